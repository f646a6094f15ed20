"""P4Runtime entities of ``p4src/include/control/failover.p4``.

* ``port_status``: one entry ``port -> port_down()`` per dead port of the switch;
* ``failover``: for every group of two or more members, ``(next_id, member port) ->
  reroute(backup)``, the backup being the next member in port order (wrapping around);
* ``heartbeat_watch``: ``port -> watch(timeout_us)`` for every fabric port while link heartbeats
  run.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from controller.entries import entity
from controller.p4info import P4Info
from controller.p4names import Action, Counter, Table
from controller.routing import NextHop, SwitchForwarding

PORT_STATUS = Table.PORT_FAILOVER_PORT_STATUS
PORT_DOWN = Action.PORT_FAILOVER_PORT_DOWN
FAILOVER = Table.PORT_FAILOVER_FAILOVER
REROUTE = Action.PORT_FAILOVER_REROUTE
HEARTBEAT_WATCH = Table.PORT_FAILOVER_HEARTBEAT_WATCH
FAILED_OVER = Counter.PORT_FAILOVER_FAILED_OVER     # packets moved off each dead port
WATCH = Action.PORT_FAILOVER_WATCH


def owned_tables(p4info: P4Info) -> set[tuple]:
    """What the reconcile loop keeps in sync: the backups and the watched ports. ``port_status`` is written by the
    failure handler alone, at once (a reconcile that read it a moment before must not undo it)."""
    return {("table", p4info.table_id(FAILOVER)), ("table", p4info.table_id(HEARTBEAT_WATCH))}


def port_down(p4info: P4Info, port: int) -> p4runtime_pb2.Entity:
    return entity(p4info.table_entry(PORT_STATUS, {"port": port}, action=PORT_DOWN))


def backups(state: SwitchForwarding) -> dict[tuple[int, int], NextHop]:
    """(next id, member port) -> the member that takes its packets while its port is dead."""
    result = {}
    for next_id, hops in state.next_groups.items():
        ordered = sorted(hops, key=lambda h: h.port)
        if len(ordered) < 2:
            continue
        for i, hop in enumerate(ordered):
            result[(next_id, hop.port)] = ordered[(i + 1) % len(ordered)]
    return result


def failover_entities(p4info: P4Info, state: SwitchForwarding) -> list[p4runtime_pb2.Entity]:
    return [
        entity(p4info.table_entry(FAILOVER, {"next_id": next_id, "port": port}, action=REROUTE,
                                  params={"port": hop.port, "smac": hop.smac, "dmac": hop.dmac}))
        for (next_id, port), hop in sorted(backups(state).items())
    ]


def watch_entities(p4info: P4Info, ports: list[int], timeout_us: int) -> list[p4runtime_pb2.Entity]:
    return [entity(p4info.table_entry(HEARTBEAT_WATCH, {"port": port}, action=WATCH, params={"timeout_us": timeout_us}))
            for port in sorted(ports)]
