"""P4Info helper, canonical encoding, entity builders, reconciliation plans and error formatting.

A small P4Info written out here (the shape of p4src/fabric.p4's tables) keeps these tests
independent of p4c; when the compiled p4src/build/fabric.p4info.txtpb exists the contract is also
checked against it.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller import entries as E
from controller.errors import UpdateFailure, WriteError
from controller.p4info import P4Info, P4InfoError, canonical, decode, encode, encode_int, format_value
from controller.reconcile import canonical_entity, entity_key, plan
from controller.routing import compute_forwarding
from controller.topology import TopologyModel
from topologies.fabric import fat_tree, leaf_spine

BUILD = Path(__file__).resolve().parents[2] / "p4src" / "build"

SAMPLE_P4INFO = """
tables {
  preamble { id: 1001 name: "FabricIngress.filtering.my_station" alias: "my_station" }
  match_fields { id: 1 name: "eth_dst" bitwidth: 48 match_type: EXACT }
  action_refs { id: 2001 } action_refs { id: 2000 annotations: "@defaultonly" scope: DEFAULT_ONLY }
  size: 64
}
tables {
  preamble { id: 1002 name: "FabricIngress.arp_ndp.arp_reply" alias: "arp_reply" }
  match_fields { id: 1 name: "target_ipv4" bitwidth: 32 match_type: LPM }
  action_refs { id: 2002 }
  size: 1024
}
tables {
  preamble { id: 1003 name: "FabricIngress.arp_ndp.ndp_reply" alias: "ndp_reply" }
  match_fields { id: 1 name: "target_ipv6" bitwidth: 128 match_type: LPM }
  action_refs { id: 2003 }
  size: 1024
}
tables {
  preamble { id: 1004 name: "FabricIngress.forwarding.routing_v4" alias: "routing_v4" }
  match_fields { id: 1 name: "ipv4_dst" bitwidth: 32 match_type: LPM }
  action_refs { id: 2004 } action_refs { id: 2005 }
  size: 16384
}
tables {
  preamble { id: 1005 name: "FabricIngress.forwarding.routing_v6" alias: "routing_v6" }
  match_fields { id: 1 name: "ipv6_dst" bitwidth: 128 match_type: LPM }
  action_refs { id: 2004 } action_refs { id: 2005 }
  size: 16384
}
tables {
  preamble { id: 1006 name: "FabricIngress.next.hashed" alias: "hashed" }
  match_fields { id: 1 name: "next_id" bitwidth: 32 match_type: EXACT }
  action_refs { id: 2006 }
  implementation_id: 3001
  size: 1024
}
tables {
  preamble { id: 1007 name: "FabricIngress.acl.acl" alias: "acl" }
  match_fields { id: 1 name: "ig_port" bitwidth: 9 match_type: TERNARY }
  match_fields { id: 2 name: "eth_src" bitwidth: 48 match_type: TERNARY }
  match_fields { id: 3 name: "eth_dst" bitwidth: 48 match_type: TERNARY }
  match_fields { id: 4 name: "eth_type" bitwidth: 16 match_type: TERNARY }
  action_refs { id: 2007 }
  size: 1024
}
actions { preamble { id: 2000 name: "nop" alias: "nop" } }
actions { preamble { id: 2001 name: "FabricIngress.filtering.set_routable" alias: "set_routable" } }
actions {
  preamble { id: 2002 name: "FabricIngress.arp_ndp.reply_arp" alias: "reply_arp" }
  params { id: 1 name: "mac" bitwidth: 48 }
}
actions {
  preamble { id: 2003 name: "FabricIngress.arp_ndp.reply_ndp" alias: "reply_ndp" }
  params { id: 1 name: "mac" bitwidth: 48 }
}
actions {
  preamble { id: 2004 name: "FabricIngress.forwarding.set_next_id" alias: "set_next_id" }
  params { id: 1 name: "next_id" bitwidth: 32 }
}
actions { preamble { id: 2005 name: "FabricIngress.forwarding.drop" alias: "forwarding.drop" } }
actions {
  preamble { id: 2006 name: "FabricIngress.next.route" alias: "route" }
  params { id: 1 name: "port" bitwidth: 9 }
  params { id: 2 name: "smac" bitwidth: 48 }
  params { id: 3 name: "dmac" bitwidth: 48 }
}
actions { preamble { id: 2007 name: "FabricIngress.acl.punt_to_cpu" alias: "punt_to_cpu" } }
action_profiles {
  preamble { id: 3001 name: "FabricIngress.next.ecmp_selector" alias: "ecmp_selector" }
  table_ids: 1006 with_selector: true size: 1024
}
counters {
  preamble { id: 4001 name: "FabricEgress.egress_port_counter" alias: "egress_port_counter" }
  spec { unit: BOTH } size: 512
}
controller_packet_metadata {
  preamble { id: 5001 name: "packet_out" alias: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
controller_packet_metadata {
  preamble { id: 5002 name: "packet_in" alias: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
"""


@pytest.fixture(scope="module")
def p4info() -> P4Info:
    return P4Info(text_format.Parse(SAMPLE_P4INFO, p4info_pb2.P4Info()))


# --- canonical values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, width, expected",
    [
        (0, 9, b"\x00"),
        (1, 9, b"\x01"),
        (255, 9, b"\xff"),
        (256, 9, b"\x01\x00"),
        (511, 9, b"\x01\xff"),
        ("02:00:00:00:00:01", 48, b"\x02\x00\x00\x00\x00\x01"),
        ("00:00:0a:00:00:02", 48, b"\x0a\x00\x00\x02"),
        ("10.0.1.0", 32, b"\x0a\x00\x01\x00"),
        ("0.0.0.1", 32, b"\x01"),
        (ipaddress.IPv6Address("fd00::1"), 128, b"\xfd" + b"\x00" * 14 + b"\x01"),
        ("::", 128, b"\x00"),
        (b"\x00\x00\x07", 16, b"\x07"),
        ("0x86dd", 16, b"\x86\xdd"),
    ],
)
def test_encode_is_canonical(value, width: int, expected: bytes) -> None:
    assert encode(value, width) == expected
    assert decode(expected) == decode(b"\x00\x00" + expected)


def test_encode_rejects_values_that_do_not_fit() -> None:
    with pytest.raises(P4InfoError, match="0x200 does not fit in 9 bits"):
        encode(512, 9)
    with pytest.raises(P4InfoError, match="negative"):
        encode_int(-1, 8)
    with pytest.raises(P4InfoError, match="'not-an-address'"):
        encode("not-an-address", 32)
    with pytest.raises(P4InfoError, match="does not fit in 32 bits"):
        encode("fd00::1", 32)


def test_canonical_and_format() -> None:
    assert canonical(b"\x00\x00\x01\x00") == b"\x01\x00"
    assert canonical(b"\x00\x00") == b"\x00"
    assert format_value(0x020000000001, 48) == "02:00:00:00:00:01"
    assert format_value(int(ipaddress.IPv4Address("10.1.2.3")), 32, "ipv4_dst") == "10.1.2.3"
    assert format_value(7, 32, "next_id") == "7"
    assert format_value(1, 128) == "::1"


# --- lookups and builders -------------------------------------------------------------------


def test_names_and_aliases_resolve(p4info: P4Info) -> None:
    assert p4info.table_id("FabricIngress.forwarding.routing_v4") == 1004
    assert p4info.table_id("routing_v4") == 1004
    assert p4info.action_id("set_next_id") == 2004
    assert p4info.action_profile_id(E.ECMP_SELECTOR) == 3001
    assert p4info.table_action_profile(E.NEXT_HASHED).preamble.id == 3001
    assert p4info.counter_id(E.EGRESS_PORT_COUNTER) == 4001
    assert p4info.name_of(2006) == "FabricIngress.next.route"


def test_unknown_names_are_reported_with_what_exists(p4info: P4Info) -> None:
    with pytest.raises(P4InfoError, match=r"no table named 'routing_v5'.*FabricIngress.forwarding.routing_v4"):
        p4info.table("routing_v5")
    with pytest.raises(P4InfoError, match=r"routing_v4 has no match field 'dst'; its fields: \['ipv4_dst'\]"):
        p4info.match_field("routing_v4", "dst")
    with pytest.raises(P4InfoError, match="needs parameter 'dmac'"):
        p4info.action("route", port=1, smac="02:00:00:00:00:01")
    with pytest.raises(P4InfoError, match=r"no parameter\(s\) \['colour'\]"):
        p4info.action("set_next_id", next_id=1, colour=3)
    with pytest.raises(P4InfoError, match="route parameter port.*does not fit in 9 bits"):
        p4info.action("route", port=600, smac=0, dmac=0)


def test_lpm_entry_is_masked_and_canonical(p4info: P4Info) -> None:
    entry = p4info.table_entry("routing_v4", {"ipv4_dst": "10.1.7.9/16"}, action="set_next_id", params={"next_id": 3})
    (fm,) = entry.match
    assert (fm.field_id, fm.lpm.value, fm.lpm.prefix_len) == (1, b"\x0a\x01\x00\x00", 16)
    assert entry.action.action.params[0].value == b"\x03"
    v6 = p4info.table_entry("routing_v6", {"ipv6_dst": ipaddress.ip_network("fd00:0:1::/48")}, action="set_next_id", params={"next_id": 0})
    assert v6.match[0].lpm.value == b"\xfd\x00\x00\x00\x00\x01" + bytes(10) and v6.action.action.params[0].value == b"\x00"
    with pytest.raises(P4InfoError, match="prefix length 33 outside 0..32"):
        p4info.table_entry("routing_v4", {"ipv4_dst": ("10.0.0.0", 33)}, action="set_next_id", params={"next_id": 1})


def test_ternary_entry(p4info: P4Info) -> None:
    entry = p4info.table_entry(E.ACL, {"eth_type": (0x88CC, 0xFFFF)}, action=E.ACL_PUNT, priority=10)
    (fm,) = entry.match
    assert (fm.ternary.value, fm.ternary.mask, entry.priority) == (b"\x88\xcc", b"\xff\xff", 10)


def test_describe_entity_is_readable(p4info: P4Info) -> None:
    ent = E.route(p4info, "10.1.0.0/24", 3)
    assert p4info.describe_entity(ent) == (
        "table FabricIngress.forwarding.routing_v4 [ipv4_dst=10.1.0.0/24] -> FabricIngress.forwarding.set_next_id(next_id=3)"
    )
    member = E.route_member(p4info, 2, compute_forwarding(TopologyModel(fat_tree(4)))["p0e0"].next_groups[3][0])
    assert p4info.describe_entity(member) == (
        "FabricIngress.next.ecmp_selector member 2 -> "
        "FabricIngress.next.route(port=3, smac=02:00:00:00:00:01, dmac=02:00:00:00:00:03)"
    )
    assert p4info.describe_entity(E.clone_session()) == "clone session 511 -> ports [255]"


def test_packet_out_and_in_metadata(p4info: P4Info) -> None:
    out = p4info.packet_out(b"frame", egress_port=3)
    assert [(m.metadata_id, m.value) for m in out.metadata] == [(1, b"\x03")]
    pin = p4runtime_pb2.PacketIn(payload=b"x")
    pin.metadata.add(metadata_id=1, value=b"\x00\x07")
    assert p4info.packet_in_metadata(pin) == {"ingress_port": 7}


# --- fabric entries -------------------------------------------------------------------------


def test_forwarding_entities_of_an_edge_switch(p4info: P4Info) -> None:
    state = compute_forwarding(TopologyModel(fat_tree(4)))["p0e0"]
    ents = E.forwarding_entities(p4info, state)
    # 3 distinct next hops (2 hosts, 2 aggs -> 4 members), 3 groups
    assert len(ents.members) == 4 and len(ents.groups) == 3
    tables = {}
    for e in ents.tables:
        tables.setdefault(p4info.name_of(e.table_entry.table_id), []).append(e)
    assert len(tables[E.MY_STATION]) == 1
    assert len(tables[E.ARP_REPLY]) == 1 and len(tables[E.NDP_REPLY]) == 1
    assert len(tables[E.ROUTING_V4]) == 9 and len(tables[E.ROUTING_V6]) == 9
    assert len(tables[E.NEXT_HASHED]) == 3
    uplink = next(g.action_profile_group for g in ents.groups if len(g.action_profile_group.members) == 2)
    assert [m.member_id for m in uplink.members] == [3, 4]
    order = [e.WhichOneof("entity") for e in ents.in_insert_order()]
    assert order.index("action_profile_group") > order.index("action_profile_member")
    assert order.index("table_entry") > max(i for i, k in enumerate(order) if k == "action_profile_group")
    assert order[0] == "packet_replication_engine_entry"


@pytest.mark.parametrize("fabric", [fat_tree(4), leaf_spine(4, 2, 2)], ids=["fat_tree4", "leaf_spine"])
def test_every_switch_builds(p4info: P4Info, fabric) -> None:
    for state in compute_forwarding(TopologyModel(fabric)).values():
        ents = E.forwarding_entities(p4info, state, punt_lldp=True)
        keys = [entity_key(e) for e in ents.in_insert_order()]
        assert len(keys) == len(set(keys)), state.switch


def test_compiled_p4info_carries_the_contract() -> None:
    path = BUILD / "fabric.p4info.txtpb"
    if not path.exists():
        pytest.skip(f"{path} not built yet (make p4)")
    real = P4Info.from_file(path)
    for table in (E.MY_STATION, E.ARP_REPLY, E.NDP_REPLY, E.ROUTING_V4, E.ROUTING_V6, E.NEXT_HASHED, E.ACL):
        real.table(table)
    for state in compute_forwarding(TopologyModel(fat_tree(4))).values():
        assert len(E.forwarding_entities(real, state, punt_lldp=True)) > 0
    real.counter(E.EGRESS_PORT_COUNTER)
    real.counter(E.INGRESS_PORT_COUNTER)
    real.packet_metadata_field("packet_out", "egress_port")
    real.packet_metadata_field("packet_in", "ingress_port")


# --- reconciliation plans -------------------------------------------------------------------


def _padded(entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity:
    """What a target that reads back full-width byte strings would return."""
    e = p4runtime_pb2.Entity()
    e.CopyFrom(entity)
    t = e.table_entry
    for fm in t.match:
        if fm.HasField("lpm"):
            fm.lpm.value = fm.lpm.value.rjust(4 if len(fm.lpm.value) <= 4 else 16, b"\x00")
    for p in t.action.action.params:
        p.value = p.value.rjust(4, b"\x00")
    t.counter_data.packet_count = 5  # read-only data must not count as a difference
    return e


def test_plan_is_empty_when_the_switch_holds_the_desired_state(p4info: P4Info) -> None:
    state = compute_forwarding(TopologyModel(fat_tree(4)))["p0a0"]
    desired = E.forwarding_entities(p4info, state).in_insert_order()
    actual = [_padded(e) if e.WhichOneof("entity") == "table_entry" else e for e in desired]
    assert not plan(desired, actual)
    assert canonical_entity(_padded(desired[-1])) == canonical_entity(desired[-1])


def test_plan_inserts_modifies_and_deletes_in_dependency_order(p4info: P4Info) -> None:
    fw = compute_forwarding(TopologyModel(fat_tree(4)))
    desired = E.forwarding_entities(p4info, fw["p0e0"]).in_insert_order()
    stale_route = E.route(p4info, "10.9.9.0/24", 1)
    stale_member = E.route_member(p4info, 99, fw["p0e0"].next_groups[1][0])
    changed = E.route(p4info, "10.1.0.0/24", 1)  # desired says next id 3
    foreign = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=4242))
    wanted_keys = {entity_key(e) for e in desired}
    actual = [e for e in desired if entity_key(e) != entity_key(changed) and e.WhichOneof("entity") != "action_profile_group"]
    actual += [changed, stale_route, stale_member, foreign]
    todo = plan(desired, actual)
    assert [entity_key(e) for e in todo.modifies] == [entity_key(changed)]
    assert {e.WhichOneof("entity") for e in todo.inserts} == {"action_profile_group"}
    assert {entity_key(e) for e in todo.deletes} == {entity_key(stale_route), entity_key(stale_member)}
    assert all(entity_key(e) in wanted_keys for e in todo.inserts)
    kinds = [(u.type, u.entity.WhichOneof("entity")) for u in todo.updates()]
    U = p4runtime_pb2.Update
    assert kinds.index((U.DELETE, "table_entry")) < kinds.index((U.DELETE, "action_profile_member"))
    assert kinds.index((U.INSERT, "action_profile_group")) < kinds.index((U.MODIFY, "table_entry"))
    assert kinds[-1] == (U.DELETE, "action_profile_member")


# --- error formatting -----------------------------------------------------------------------


def test_write_error_names_switch_entity_and_target_error(p4info: P4Info) -> None:
    failure = UpdateFailure(
        3, "INSERT", p4info.describe_entity(E.route(p4info, "10.1.0.0/24", 3)), "ALREADY_EXISTS", "Match entry exists"
    )
    err = WriteError("p0e0", 1, 12, [failure], address="127.0.0.1:50001")
    text = str(err)
    assert text.startswith("p0e0 (device 1) at 127.0.0.1:50001: write failed: 1 of 12 updates rejected")
    assert (
        "update 3: INSERT table FabricIngress.forwarding.routing_v4 [ipv4_dst=10.1.0.0/24] -> "
        "FabricIngress.forwarding.set_next_id(next_id=3): ALREADY_EXISTS: Match entry exists"
    ) in text
    assert err.switch == "p0e0" and err.device_id == 1 and err.failures == [failure]
