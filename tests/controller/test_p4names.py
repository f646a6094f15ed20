"""controller/p4names.py is what `make p4names` makes of the committed build today.

The names module is generated from p4src/build/fabric.p4info.txtpb and p4src/include/define.p4
(aifabric.p4build); made again here in memory and compared with the committed file, so a P4
object renamed, added or removed without regenerating fails here, not when a switch is programmed.
"""
from __future__ import annotations

from aifabric.p4build import NAMES_MODULE, REPO, defined_constants, identifier, names_source
from controller import p4names
from controller.p4info import P4Info


def test_the_committed_names_module_is_current():
    committed = (REPO / NAMES_MODULE).read_text()
    assert names_source() == committed, f"{NAMES_MODULE} is stale: run `make p4names` and commit the result"


def test_every_p4info_object_has_its_name():
    info = P4Info.from_file(REPO / "p4src/build/fabric.p4info.txtpb").message
    for kind, cls in (("tables", p4names.Table), ("actions", p4names.Action), ("counters", p4names.Counter),
                      ("registers", p4names.Register), ("action_profiles", p4names.ActionProfile)):
        for obj in getattr(info, kind):
            assert getattr(cls, identifier(obj.preamble.name)) == obj.preamble.name
    assert p4names.MATCH_FIELDS[p4names.Table.NEXT_HASHED] == ("next_id",)
    assert p4names.ACTION_PARAMS[p4names.Action.NEXT_ROUTE] == ("port", "smac", "dmac")
    assert p4names.PacketIn.INGRESS_PORT == "ingress_port" and p4names.PacketOut.EGRESS_PORT == "egress_port"


def test_identifiers_and_constants():
    assert identifier("FabricIngress.next.hashed") == "NEXT_HASHED"
    assert identifier("FabricEgress.egress_port_counter") == "EGRESS_PORT_COUNTER"
    assert identifier("nop") == "NOP"
    assert defined_constants("const bit<16> AGG_UDP_PORT     = 0xBEE0;\n#define AGG_VALUES   64   // values\n") == [
        ("AGG_UDP_PORT", "0xBEE0", ""), ("AGG_VALUES", "64", "values")]
    assert (p4names.CPU_PORT, p4names.AGG_UDP_PORT, p4names.AGG_BLOCK_VALUES) == (255, 0xBEE0, 64)


def test_host_and_topology_wire_constants_agree_with_the_p4_program():
    """Hosts, topologies and emulation define their wire constants once each, without the
    controller's module (they do not import the controller); here they are held against the P4
    program's."""
    from hostagent.collectives.aggregation import protocol
    from hostagent.traffic.flows import ROCEV2_PORT
    from emulation import failover_heartbeat_generator as heartbeat_generator
    from topologies import addressing

    assert (protocol.AGG_UDP_PORT, protocol.BLOCK_VALUES, protocol.MAX_BLOCKS) == \
        (p4names.AGG_UDP_PORT, p4names.AGG_BLOCK_VALUES, p4names.AGG_MAX_BLOCKS)
    assert (8 + protocol.HEADER_BYTES, protocol.BLOCK_VALUES * protocol.VALUE_BYTES) == \
        (p4names.AGG_UDP_BYTES, p4names.AGG_BLOCK_BYTES)        # a frame's udp.len, as the parser checks it
    assert heartbeat_generator.ETHERTYPE_LINK_HEARTBEAT == p4names.ETHERTYPE_LINK_HEARTBEAT
    assert heartbeat_generator.GEN_PORT == p4names.HEARTBEAT_GEN_PORT
    assert addressing.CPU_PORT == p4names.CPU_PORT
    assert ROCEV2_PORT == p4names.UDP_PORT_ROCEV2
