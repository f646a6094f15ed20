"""P4Runtime entities for the fabric program's control-plane contract (p4src/README.md).

The names below are the P4Info names of ``p4src/fabric.p4``, from `controller.p4names` (generated
from the build: the controller spells no P4 name by hand). `forwarding_entities(p4info, state)` turns one switch's desired
`controller.routing.SwitchForwarding` into the entities that implement it, in the order they can
be inserted (action profile members, then groups, then table entries that refer to them):

* ``my_station``: the switch's router MAC -> ``set_routable``;
* ``arp_reply`` / ``ndp_reply``: the subnets of the switch's hosts -> ``reply_*(router MAC)``
  (proxy ARP/NDP: hosts send everything, gateway or neighbour, to the switch);
* ``routing_v4`` / ``routing_v6``: prefix -> ``set_next_id(next_id)``;
* ``ecmp_selector`` + ``hashed``: next id -> group ``next_id`` whose members are
  ``route(port, smac, dmac)``; one member per distinct next hop, member ids 1, 2, ... in sorted
  next-hop order, group id == next id;
* clone session 511 -> CPU port 255 (used by the ACL's ``copy_to_cpu``);
* ``hash_config`` (keyless, `hash_seed_entity`) -> ``set_hash_seed(seed)``: a seed of its own
  per switch, so the ECMP choices of successive tiers are independent (de-polarisation).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable

from p4.v1 import p4runtime_pb2

from controller import p4names as P4
from controller.p4info import P4Info
from controller.p4names import Action, ActionProfile, Counter, Table
from controller.routing import NextHop, SwitchForwarding

CPU_PORT = P4.CPU_PORT
CPU_CLONE_SESSION_ID = P4.CPU_CLONE_SESSION_ID
# Knuth's multiplicative constant (odd, so the map id -> id * C mod 2^w is a bijection):
# distinct device ids get distinct, well-spread seeds at any seed width.
_SEED_MULTIPLIER = 0x9E3779B1

MY_STATION = Table.FILTERING_MY_STATION
SET_ROUTABLE = Action.FILTERING_SET_ROUTABLE
ARP_REPLY = Table.ARP_NDP_ARP_REPLY
REPLY_ARP = Action.ARP_NDP_REPLY_ARP
NDP_REPLY = Table.ARP_NDP_NDP_REPLY
REPLY_NDP = Action.ARP_NDP_REPLY_NDP
ROUTING_V4 = Table.FORWARDING_ROUTING_V4
ROUTING_V6 = Table.FORWARDING_ROUTING_V6
SET_NEXT_ID = Action.FORWARDING_SET_NEXT_ID
NEXT_HASHED = Table.NEXT_HASHED
ECMP_SELECTOR = ActionProfile.NEXT_ECMP_SELECTOR
ROUTE = Action.NEXT_ROUTE
HASH_CONFIG = Table.NEXT_HASH_CONFIG
SET_HASH_SEED = Action.NEXT_SET_HASH_SEED
ACL = Table.ACL_ACL
ACL_PUNT = Action.ACL_PUNT_TO_CPU
ACL_COPY = Action.ACL_COPY_TO_CPU
ACL_DROP = Action.ACL_DROP
INGRESS_PORT_COUNTER = Counter.FILTERING_INGRESS_PORT_COUNTER
EGRESS_PORT_COUNTER = Counter.EGRESS_PORT_COUNTER

ETHERTYPE_LLDP = 0x88CC


def entity(
    msg: p4runtime_pb2.TableEntry
    | p4runtime_pb2.ActionProfileMember
    | p4runtime_pb2.ActionProfileGroup
    | p4runtime_pb2.PacketReplicationEngineEntry,
) -> p4runtime_pb2.Entity:
    """Wrap a table entry, member, group or PRE entry in an Entity."""
    if isinstance(msg, p4runtime_pb2.TableEntry):
        return p4runtime_pb2.Entity(table_entry=msg)
    if isinstance(msg, p4runtime_pb2.ActionProfileMember):
        return p4runtime_pb2.Entity(action_profile_member=msg)
    if isinstance(msg, p4runtime_pb2.ActionProfileGroup):
        return p4runtime_pb2.Entity(action_profile_group=msg)
    if isinstance(msg, p4runtime_pb2.PacketReplicationEngineEntry):
        return p4runtime_pb2.Entity(packet_replication_engine_entry=msg)
    raise TypeError(f"cannot wrap {type(msg).__name__} in an Entity")


def default_entry(p4info: P4Info, table: str, action: str, **params: object) -> p4runtime_pb2.Entity:
    """A keyless table's default action (written with MODIFY, is_default_action set)."""
    return entity(p4info.table_entry(table, action=action, params=params, default=True))  # type: ignore[arg-type]


def hash_seed(p4info: P4Info, device_id: int) -> int:
    """The ECMP hash seed of a switch: distinct per device id at the seed's bit width."""
    width = p4info.action_param(SET_HASH_SEED, "seed").bitwidth
    seed = (device_id * _SEED_MULTIPLIER) & ((1 << width) - 1)
    return seed or 1


def hash_seed_entity(p4info: P4Info, device_id: int) -> p4runtime_pb2.Entity:
    return default_entry(p4info, HASH_CONFIG, SET_HASH_SEED, seed=hash_seed(p4info, device_id))


def my_station(p4info: P4Info, mac: str) -> p4runtime_pb2.Entity:
    return entity(p4info.table_entry(MY_STATION, {"eth_dst": mac}, action=SET_ROUTABLE))


def arp_reply(p4info: P4Info, prefix: str | object, mac: str) -> p4runtime_pb2.Entity:
    return entity(p4info.table_entry(ARP_REPLY, {"target_ipv4": prefix}, action=REPLY_ARP, params={"mac": mac}))  # type: ignore[dict-item]


def ndp_reply(p4info: P4Info, prefix: str | object, mac: str) -> p4runtime_pb2.Entity:
    return entity(p4info.table_entry(NDP_REPLY, {"target_ipv6": prefix}, action=REPLY_NDP, params={"mac": mac}))  # type: ignore[dict-item]


def route(p4info: P4Info, prefix: str | object, next_id: int) -> p4runtime_pb2.Entity:
    """routing_v4 or routing_v6 (chosen by the prefix) -> set_next_id(next_id)."""
    net = ipaddress.ip_network(prefix)  # type: ignore[arg-type]
    table, field = (ROUTING_V4, "ipv4_dst") if net.version == 4 else (ROUTING_V6, "ipv6_dst")
    return entity(p4info.table_entry(table, {field: net}, action=SET_NEXT_ID, params={"next_id": next_id}))


def route_member(p4info: P4Info, member_id: int, hop: NextHop) -> p4runtime_pb2.Entity:
    return entity(p4info.profile_member(ECMP_SELECTOR, member_id, ROUTE, port=hop.port, smac=hop.smac, dmac=hop.dmac))


def ecmp_group(p4info: P4Info, group_id: int, member_ids: Iterable[int], max_size: int = 0) -> p4runtime_pb2.Entity:
    return entity(p4info.profile_group(ECMP_SELECTOR, group_id, list(member_ids), max_size))


def next_entry(p4info: P4Info, next_id: int, group_id: int) -> p4runtime_pb2.Entity:
    return entity(p4info.table_entry(NEXT_HASHED, {"next_id": next_id}, group_id=group_id))


def static_route(p4info: P4Info, prefix: str, hop: NextHop, next_id: int = 1) -> list[p4runtime_pb2.Entity]:
    """One prefix through one next hop, by hand (a one-switch lab, a benchmark): the member,
    a one-member group (id = next id), the next entry and the route, in insert order."""
    return [route_member(p4info, next_id, hop), ecmp_group(p4info, next_id, [next_id]),
            next_entry(p4info, next_id, next_id), route(p4info, prefix, next_id)]


def clone_session(session_id: int = CPU_CLONE_SESSION_ID, port: int = CPU_PORT) -> p4runtime_pb2.Entity:
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.clone_session_entry.session_id = session_id
    pre.clone_session_entry.replicas.add(egress_port=port, instance=1)
    return entity(pre)


def acl_punt_ethertype(p4info: P4Info, eth_type: int = ETHERTYPE_LLDP, priority: int = 10) -> p4runtime_pb2.Entity:
    """Punt frames of one ether type (LLDP by default) to the controller."""
    return entity(p4info.table_entry(ACL, {"eth_type": (eth_type, 0xFFFF)}, action=ACL_PUNT, priority=priority))


@dataclass(frozen=True)
class ForwardingEntities:
    """The entities of one switch, grouped by dependency: ``members`` before ``groups`` before
    ``tables`` on insert (the reverse on delete)."""

    members: list[p4runtime_pb2.Entity]
    groups: list[p4runtime_pb2.Entity]
    tables: list[p4runtime_pb2.Entity]
    pre: list[p4runtime_pb2.Entity]

    def in_insert_order(self) -> list[p4runtime_pb2.Entity]:
        return [*self.pre, *self.members, *self.groups, *self.tables]

    def __len__(self) -> int:
        return len(self.members) + len(self.groups) + len(self.tables) + len(self.pre)


def member_ids(state: SwitchForwarding) -> dict[NextHop, int]:
    """Member id of every distinct next hop of the switch: 1, 2, ... in sorted order."""
    hops = sorted({hop for hopset in state.next_groups.values() for hop in hopset})
    return {hop: i + 1 for i, hop in enumerate(hops)}


def forwarding_entities(p4info: P4Info, state: SwitchForwarding, *, punt_lldp: bool = False) -> ForwardingEntities:
    """Everything basic forwarding needs on the switch described by ``state``."""
    members = member_ids(state)
    max_group = p4info.action_profile(ECMP_SELECTOR).max_group_size
    for next_id, hops in state.next_groups.items():
        if max_group and len(hops) > max_group:
            raise ValueError(
                f"{state.switch}: next id {next_id} has {len(hops)} next hops, more than "
                f"{ECMP_SELECTOR}'s max group size {max_group}"
            )
    tables = [my_station(p4info, state.router_mac)]
    tables += [arp_reply(p4info, net, state.router_mac) for net in state.arp_prefixes]
    tables += [ndp_reply(p4info, net, state.router_mac) for net in state.ndp_prefixes]
    tables += [next_entry(p4info, next_id, next_id) for next_id in sorted(state.next_groups)]
    tables += [route(p4info, r.prefix, r.next_id) for r in state.routes]
    if punt_lldp:
        tables.append(acl_punt_ethertype(p4info))
    return ForwardingEntities(
        members=[route_member(p4info, mid, hop) for hop, mid in sorted(members.items(), key=lambda kv: kv[1])],
        groups=[
            ecmp_group(p4info, next_id, sorted(members[h] for h in hops))
            for next_id, hops in sorted(state.next_groups.items())
        ],
        tables=tables,
        pre=[clone_session()],
    )
