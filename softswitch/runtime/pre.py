"""The packet replication engine: multicast groups and clone sessions.

As BMv2 with PI: a group is a list of nodes, one per replication id (``instance`` in
P4Runtime), each with a set of egress ports. Copies go out node by node in the order the
nodes were attached, and within a node in ascending port order; a clone session with
several replicas is a multicast group of its own. ``on_change`` (the native data plane's
mirror) hears of every change: ("group" or "session", its id), or (kind, None) when all went.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..runtime.tables import TableError

MAX_MULTICAST_GROUP = 0xFFFF
MAX_CLONE_SESSION = 0x7FFF      # simple_switch's MAX_MIRROR_SESSION_ID


@dataclass(eq=False)
class ReplicaGroup:
    id: int
    nodes: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)   # (rid, ports)

    def replicas(self) -> list[tuple[int, int]]:
        """(egress_port, rid) for every copy, in BMv2's order."""
        return [(port, rid) for rid, ports in self.nodes for port in ports]

    def set_replicas(self, replicas: list[tuple[int, int]]) -> None:
        """Replace the replicas: nodes kept in place, removed ones dropped, new rids appended."""
        by_rid: dict[int, set[int]] = {}
        for port, rid in replicas:
            ports = by_rid.setdefault(rid, set())
            if port in ports:
                raise TableError("INVALID_ARGUMENT",
                                 f"group {self.id}: replica (port {port}, instance {rid}) given twice")
            ports.add(port)
        kept = [(rid, tuple(sorted(by_rid.pop(rid)))) for rid, _ in self.nodes if rid in by_rid]
        self.nodes = kept + [(rid, tuple(sorted(by_rid[rid]))) for rid in sorted(by_rid)]


@dataclass(eq=False)
class CloneSession:
    id: int
    group: ReplicaGroup
    class_of_service: int = 0
    packet_length_bytes: int = 0


class ReplicationEngine:
    def __init__(self) -> None:
        self.groups: dict[int, ReplicaGroup] = {}
        self.sessions: dict[int, CloneSession] = {}
        self.on_change: Callable[[str, int | None], None] | None = None

    def _changed(self, kind: str, ident: int | None) -> None:
        if self.on_change is not None:
            self.on_change(kind, ident)

    # -- multicast -----------------------------------------------------------------------
    def insert_group(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        if not 1 <= group_id <= MAX_MULTICAST_GROUP:
            raise TableError("INVALID_ARGUMENT", f"multicast group id {group_id} out of range 1..{MAX_MULTICAST_GROUP}")
        if group_id in self.groups:
            raise TableError("ALREADY_EXISTS", f"multicast group {group_id} exists")
        g = ReplicaGroup(group_id)
        g.set_replicas(replicas)
        self.groups[group_id] = g
        self._changed("group", group_id)

    def modify_group(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        self._group(group_id).set_replicas(replicas)
        self._changed("group", group_id)

    def delete_group(self, group_id: int) -> None:
        self._group(group_id)
        del self.groups[group_id]
        self._changed("group", group_id)

    def _group(self, group_id: int) -> ReplicaGroup:
        g = self.groups.get(group_id)
        if g is None:
            raise TableError("NOT_FOUND", f"no multicast group {group_id}")
        return g

    def multicast(self, group_id: int) -> list[tuple[int, int]]:
        g = self.groups.get(group_id)
        return g.replicas() if g else []

    # -- clone sessions ------------------------------------------------------------------
    def insert_session(self, session_id: int, replicas: list[tuple[int, int]],
                       class_of_service: int = 0, packet_length_bytes: int = 0) -> None:
        if not 0 <= session_id <= MAX_CLONE_SESSION:
            raise TableError("INVALID_ARGUMENT", f"clone session id {session_id} out of range 0..{MAX_CLONE_SESSION}")
        if session_id in self.sessions:
            raise TableError("ALREADY_EXISTS", f"clone session {session_id} exists")
        if class_of_service:
            raise TableError("UNIMPLEMENTED", "class of service for clone sessions is not supported (as on BMv2)")
        g = ReplicaGroup(session_id)
        g.set_replicas(replicas)
        self.sessions[session_id] = CloneSession(session_id, g, class_of_service, packet_length_bytes)
        self._changed("session", session_id)

    def modify_session(self, session_id: int, replicas: list[tuple[int, int]],
                       class_of_service: int = 0, packet_length_bytes: int = 0) -> None:
        s = self._session(session_id)
        if class_of_service:
            raise TableError("UNIMPLEMENTED", "class of service for clone sessions is not supported (as on BMv2)")
        s.group.set_replicas(replicas)
        s.packet_length_bytes = packet_length_bytes
        self._changed("session", session_id)

    def delete_session(self, session_id: int) -> None:
        self._session(session_id)
        del self.sessions[session_id]
        self._changed("session", session_id)

    def _session(self, session_id: int) -> CloneSession:
        s = self.sessions.get(session_id)
        if s is None:
            raise TableError("NOT_FOUND", f"no clone session {session_id}")
        return s

    def clone_targets(self, session_id: int) -> list[tuple[int, int]] | None:
        """(port, rid) copies of a clone session, or None if the session does not exist."""
        s = self.sessions.get(session_id)
        return s.group.replicas() if s else None

    def reset(self) -> None:
        self.groups.clear()
        self.sessions.clear()
        self._changed("group", None)
