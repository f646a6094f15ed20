"""softswitch as an STF target, in this process: no interfaces, no threads.

The program's packet path (packet_path.py) is driven directly: a frame enters as if it
arrived on its port, the queues and the resubmit/recirculate queue are drained until
empty, and what the switch transmits is recorded per port instead of being sent. Table
writes and the replication engine are the same objects P4Runtime writes to. The Python
packet path runs (the compiled one needs a C build first). As on BMv2, a port the test
does not name has no interface: frames sent there are lost.
"""
from __future__ import annotations

import logging
from pathlib import Path

from ..dataplane import Dataplane
from ..pipeline.program import Program
from ..runtime.pre import CloneSession, ReplicaGroup
from ..runtime.tables import Entry, TableError
from .names import ResolvedEntry
from .errors import StfError, Unsupported


class SoftswitchTarget:
    name = "softswitch"

    def __init__(self, json_path: Path, ports: set[int]):
        self._start_run(Program(json_path.read_bytes()), ports)
        self.dp = Dataplane({p: None for p in ports})
        self.lost: list[int] = []                 # ports without an interface that were sent to
        self.dp.transmit = self._transmit         # before the program: its packet path binds transmit
        self.dp._packet_failed = self._packet_failed
        self.dp.set_program(self.program)

    def _start_run(self, program: Program, ports: set[int]) -> None:
        """What a run keeps whatever runs the program: outputs, errors, entry and node handles."""
        self.program = program
        self.ports = ports
        self.out: dict[int, list[bytes]] = {}
        self._error_messages: list[str] = []
        self.nodes: dict[int, tuple[int, tuple[int, ...]]] = {}     # handle -> (rid, ports), as BMv2's PRE
        self.group_nodes: dict[int, list[int]] = {}                  # group -> node handles, in order
        self.handles: dict[tuple[str, int], Entry] = {}
        self.next_handle = 0

    # -- packets ---------------------------------------------------------------------------
    def _transmit(self, port: int, frame: bytes) -> None:
        if port in self.ports:
            self.out.setdefault(port, []).append(bytes(frame))
        else:
            self.lost.append(port)

    def _packet_failed(self, e: Exception) -> None:
        self.dp.counters.errors += 1
        self._error_messages.append(f"{type(e).__name__}: {e}")
        logging.getLogger("softswitch.stf").debug("packet failed", exc_info=e)

    def send(self, port: int, frame: bytes) -> None:
        if not self.dp.run_through(port, [frame]):
            self._error_messages.append("packets still in the switch after the drain limit (a loop?)")

    def settle(self) -> None:
        return None        # send() returns when the packet and its copies are through

    def finish(self) -> dict[int, list[bytes]]:
        return self.out

    def errors(self) -> list[str]:
        return list(self._error_messages)

    def close(self) -> None:
        return None

    # -- tables ------------------------------------------------------------------------------
    def _table(self, name: str):
        return self.program.tables[name]

    def add(self, e: ResolvedEntry) -> int:
        table = self._table(e.table.name)
        action = table.actions[e.action.name]
        # STF: the higher priority wins, as in softswitch's tables (BMv2's runner turns it
        # around); among equal ones (no priority given: 0) the entry added first wins
        prio = (e.priority or 0) if table.needs_priority else 0
        if table.impl != "simple":
            raise Unsupported(f"table '{table.name}' is an action profile/selector table: STF 'add' cannot fill it")
        try:
            table.insert(Entry(e.match, prio, action, e.data))
        except TableError as err:
            raise StfError(f"add to '{table.name}': {err}") from None
        handle = self.next_handle
        self.next_handle += 1
        self.handles[(table.name, handle)] = table.get(e.match, prio)
        return handle

    def set_default(self, table: str, action: str, data: tuple) -> None:
        t = self._table(table)
        try:
            t.set_default(t.actions[action], data)
        except TableError as err:
            raise StfError(f"setdefault on '{table}': {err}") from None

    def clear_tables(self) -> None:
        for t in self.program.tables.values():
            if not t.immutable:
                t.clear()

    # -- replication -----------------------------------------------------------------------
    def _replication_changed(self) -> None:
        """Groups or sessions changed (the native target copies them into its library)."""
        return None

    def mirroring_add(self, session: int, port: int) -> None:
        self.dp.pre.sessions[session] = CloneSession(session, ReplicaGroup(session, [(0, (port,))]))
        self._replication_changed()

    def mirroring_add_mc(self, session: int, group: int) -> None:
        g = self.dp.pre.groups.get(group)
        if g is None:
            raise StfError(f"mirroring_add_mc: no multicast group {group}")
        self.dp.pre.sessions[session] = CloneSession(session, g)
        self._replication_changed()

    def mirroring_delete(self, session: int) -> None:
        self.dp.pre.sessions.pop(session, None)
        self._replication_changed()

    def mc_mgrp_create(self, group: int) -> None:
        try:
            self.dp.pre.insert_group(group, [])
        except TableError as err:
            raise StfError(f"mc_mgrp_create: {err}") from None
        self._replication_changed()

    def mc_node_create(self, rid: int, ports: list[int]) -> int:
        handle = len(self.nodes)            # BMv2 numbers nodes from 0 in the order they are made
        self.nodes[handle] = (rid, tuple(sorted(set(ports))))
        return handle

    def mc_node_update(self, handle: int, ports: list[int]) -> None:
        rid, _ = self._node(handle)
        self.nodes[handle] = (rid, tuple(sorted(set(ports))))
        for group, handles in self.group_nodes.items():
            self.dp.pre.groups[group].nodes = [self.nodes[h] for h in handles]
        self._replication_changed()

    def mc_node_associate(self, group: int, handle: int) -> None:
        self._node(handle)
        g = self.dp.pre.groups.get(group)
        if g is None:
            raise StfError(f"mc_node_associate: no multicast group {group}")
        handles = self.group_nodes.setdefault(group, [])
        handles.append(handle)              # copies go out in the order nodes were associated
        g.nodes = [self.nodes[h] for h in handles]
        self._replication_changed()

    def _node(self, handle: int) -> tuple[int, tuple[int, ...]]:
        if handle not in self.nodes:
            raise StfError(f"no multicast node {handle}")
        return self.nodes[handle]

    # -- state -----------------------------------------------------------------------------
    def counter(self, name: str, index: int) -> tuple[int, int]:
        c = self.program.counters[name]
        if not 0 <= index < c.size:
            raise StfError(f"counter '{name}' has no index {index} (size {c.size})")
        return c.read(index)

    def direct_counter(self, table: str, handle: int) -> tuple[int, int]:
        e = self.handles[(table, handle)]
        return e.packets, e.bytes

    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None:
        self.counter(name, index)
        self.program.counters[name].write(index, packets, nbytes)

    def register(self, name: str, index: int) -> int:
        r = self.program.registers[name]
        value = r.read(index)
        if value is None:
            raise StfError(f"register '{name}' has no index {index} (size {r.size})")
        return value

    def register_write(self, name: str, index: int, value: int) -> None:
        self.register(name, index)
        self.program.registers[name].write(index, value)

    def register_reset(self, name: str) -> None:
        self.program.registers[name].reset()
