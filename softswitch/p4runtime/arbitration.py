"""Client arbitration (P4Runtime specification section 5) for one device.

Each StreamChannel is a `Connection`. Per (device, role) the primary is the live connection
with the highest election id, as in PI's server (which simple_switch_grpc uses); a connection
without an election id never becomes primary (specification 5.4.1, "Unset Election ID"). When
the primary changes every connection of the role is told who is primary (status OK for the
primary, ALREADY_EXISTS for backups, NOT_FOUND when there is none); otherwise only the
connection whose update it was hears back. Invalid updates end the stream with the status the
specification prescribes (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED).

At most `MAX_JOINED_STREAMS` connections (all roles together) have arbitrated at any time. When
all places are taken, a connection whose first arbitration would make it primary of its role
takes the place of the oldest connection that is not a primary, which is ended with
RESOURCE_EXHAUSTED; any other newcomer is refused with RESOURCE_EXHAUSTED (streams.py has the
whole stream policy).

Messages to a stream go through its `Outbox`, so neither the data plane (packet-ins) nor
another stream ever blocks on a slow client: packet-ins beyond the outbox limit are dropped.
"""
from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass, field

from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2

from .errors import (P4RTError, ALREADY_EXISTS, CANCELLED, FAILED_PRECONDITION, INVALID_ARGUMENT, NOT_FOUND, OK,
                     PERMISSION_DENIED, RESOURCE_EXHAUSTED)

ElectionId = tuple[int, int]
MAX_JOINED_STREAMS = 8               # connections that have arbitrated, all roles together
OUTBOX_LIMIT = 1024                  # queued packet-ins per stream before new ones are dropped


@dataclass(frozen=True)
class EndOfStream:
    """Put in an outbox to end the stream with this status (OK: normal end)."""

    code: int = OK
    message: str = ""


class Outbox:
    def __init__(self, limit: int = OUTBOX_LIMIT):
        self._items: deque = deque()
        self._cond = threading.Condition()
        self._limit = limit
        self.dropped = 0

    def put(self, item: object, droppable: bool = False) -> bool:
        with self._cond:
            if droppable and len(self._items) >= self._limit:
                self.dropped += 1
                return False
            self._items.append(item)
            self._cond.notify()
            return True

    def get(self) -> object:
        with self._cond:
            while not self._items:
                self._cond.wait()
            return self._items.popleft()


_ids = itertools.count(1)


@dataclass(eq=False)
class Connection:
    outbox: Outbox = field(default_factory=Outbox)
    id: int = field(default_factory=lambda: next(_ids))
    device_id: int | None = None
    role: str | None = None                  # None until the first arbitration update
    election_id: ElectionId | None = None    # None: unset (never primary)
    closed: bool = False                     # its stream ended: it never joins again

    @property
    def joined(self) -> bool:
        return self.role is not None


def election_of(msg) -> ElectionId | None:
    """The election id of a message with an ``election_id`` field, or None if unset."""
    return (msg.election_id.high, msg.election_id.low) if msg.HasField("election_id") else None


class Arbiter:
    def __init__(self, device_id: int):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._roles: dict[str, list[Connection]] = {}

    # -- stream side ---------------------------------------------------------------------------
    def update(self, conn: Connection, arb: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        """Apply an arbitration update from ``conn``; raises P4RTError to end the stream."""
        role = arb.role.name if arb.HasField("role") else ""
        election = election_of(arb)
        if arb.HasField("role") and arb.role.HasField("config"):
            raise P4RTError(INVALID_ARGUMENT, "role.config is not supported: roles have full pipeline access")
        with self._lock:
            if conn.closed:
                # an update read just before its stream ended: joining now would hold a place
                # for a client that is gone, for as long as the switch runs
                raise P4RTError(CANCELLED, "the stream has ended")
            if not conn.joined:
                if arb.device_id != self.device_id:
                    raise P4RTError(NOT_FOUND, f"unknown device id {arb.device_id} (this device is {self.device_id})")
                conns = self._roles.get(role, [])
                self._check_unique(conns, conn, election)
                self._make_room(conns, election)
                before = self._primary(conns)
                conn.device_id, conn.role, conn.election_id = arb.device_id, role, election
                conns.append(conn)
                self._roles[role] = conns
            else:
                if arb.device_id != conn.device_id:
                    raise P4RTError(FAILED_PRECONDITION, f"this stream is for device {conn.device_id}, "
                                                         f"not {arb.device_id}")
                if role != conn.role:
                    raise P4RTError(FAILED_PRECONDITION, f"this stream has role '{conn.role}': open a new stream "
                                                         f"to change role")
                conns = self._roles[role]
                self._check_unique(conns, conn, election)
                before = self._primary(conns)
                conn.election_id = election
            after = self._primary(conns)
            if after is not before:
                for c in conns:
                    c.outbox.put(self._notification(role, after, c))
            else:
                conn.outbox.put(self._notification(role, after, conn))

    def leave(self, conn: Connection) -> None:
        """``conn``'s stream ended: its place is free, and an update of it still on its way is
        refused (under the same lock as `update`, so no update can slip in after this)."""
        with self._lock:
            conn.closed = True
            if conn.joined:
                self._remove(conn)

    def _remove(self, conn: Connection) -> None:
        conns = self._roles.get(conn.role, [])
        if conn not in conns:
            return
        before = self._primary(conns)
        conns.remove(conn)
        if before is conn:
            after = self._primary(conns)
            for c in conns:
                c.outbox.put(self._notification(conn.role, after, c))
        if not conns and conn.role:
            del self._roles[conn.role]

    def _make_room(self, conns: list[Connection], election: ElectionId | None) -> None:
        """Refuse a newcomer when every place is taken, unless it would become primary of its
        role: then the oldest connection that is not a primary leaves to make room."""
        joined = [c for cs in self._roles.values() for c in cs]
        if len(joined) < MAX_JOINED_STREAMS:
            return
        primary = self._primary(conns)
        if election is None or (primary is not None and election < primary.election_id):
            raise P4RTError(RESOURCE_EXHAUSTED, f"{len(joined)} controllers are connected (at most "
                                                f"{MAX_JOINED_STREAMS}); only a new primary takes the place of "
                                                f"one that is not primary")
        primaries = {id(self._primary(cs)) for cs in self._roles.values()}
        victim = min((c for c in joined if id(c) not in primaries), key=lambda c: c.id, default=None)
        if victim is None:
            raise P4RTError(RESOURCE_EXHAUSTED, f"{len(joined)} controllers are connected, all of them primaries "
                                                f"of their roles (at most {MAX_JOINED_STREAMS})")
        self._remove(victim)
        victim.closed = True
        victim.outbox.put(EndOfStream(RESOURCE_EXHAUSTED, f"stream closed to make room for a new primary: at most "
                                                          f"{MAX_JOINED_STREAMS} controllers can be connected"))

    @staticmethod
    def _check_unique(conns: list[Connection], conn: Connection, election: ElectionId | None) -> None:
        if election is None:
            return
        for c in conns:
            if c is not conn and c.election_id == election:
                raise P4RTError(INVALID_ARGUMENT, f"election id {election} is already used by another "
                                                  f"controller of this role")

    @staticmethod
    def _primary(conns: list[Connection]) -> Connection | None:
        best = None
        for c in conns:
            if c.election_id is not None and (best is None or c.election_id > best.election_id):
                best = c
        return best

    def _notification(self, role: str, primary: Connection | None, to: Connection) -> p4runtime_pb2.StreamMessageResponse:
        msg = p4runtime_pb2.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.device_id
        if role:
            arb.role.name = role
        if primary is not None:
            arb.election_id.high, arb.election_id.low = primary.election_id
        if primary is None:
            arb.status.CopyFrom(status_pb2.Status(code=NOT_FOUND, message="No primary"))
        elif primary is to:
            arb.status.CopyFrom(status_pb2.Status(code=OK, message="Is primary"))
        else:
            arb.status.CopyFrom(status_pb2.Status(code=ALREADY_EXISTS, message="Is backup"))
        return msg

    # -- RPC side ------------------------------------------------------------------------------
    def is_primary(self, conn: Connection) -> bool:
        with self._lock:
            return conn.joined and self._primary(self._roles.get(conn.role, [])) is conn

    def check_writer(self, role: str, election: ElectionId | None) -> None:
        """Raise unless a request with this role and election id comes from the primary.

        As PI: while no controller has a stream open, requests without an election id are
        accepted (convenient for tools) and requests with one are not."""
        with self._lock:
            conns = self._roles.get(role)
            if not conns:
                if role:
                    raise P4RTError(NOT_FOUND, f"unknown role '{role}' (no controller of this role is connected)")
                if election is not None:
                    raise P4RTError(PERMISSION_DENIED, "Not primary: no controller has arbitrated for this device")
                return
            primary = self._primary(conns)
            if primary is None or election is None or primary.election_id != election:
                raise P4RTError(PERMISSION_DENIED, f"Not primary: election id {election} is not the primary's")

    def primaries(self) -> list[Connection]:
        with self._lock:
            return [p for p in (self._primary(c) for c in self._roles.values()) if p is not None]

    def close_all(self, message: str) -> None:
        with self._lock:
            for conns in self._roles.values():
                for c in conns:
                    c.outbox.put(EndOfStream(OK, message))
