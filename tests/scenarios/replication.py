"""replication.p4: multicast, I2E/E2E clones, resubmit, recirculate, truncate, egress drop.

Egress writes what it sees into header `rep`, so every copy tells its instance type,
egress_rid, ports, packet_length and the metadata that survived. The expectations follow
simple_switch.cpp: resubmitted, recirculated and cloned packets start with all metadata
reset (ingress_port included: 0) except the preserved field list, and a packet that ingress
unicasts or multicasts gets instance_type NORMAL or REPLICATION whatever it was before (so
a resubmitted or recirculated packet reaches egress as NORMAL; ingress records what it saw
in ig_instance_type); an I2E clone is the packet as received, parsed again; an E2E clone
carries the headers as egress left them;
truncate() shortens only the packet it was called on, not the copies made of it
(multicast copies, clones and recirculated packets are new BMv2 packets); egress runs
even for a port without an interface (the packet is then lost at transmit).

Ports: fwd 0 -> 3 (where resubmitted and recirculated packets, whose ingress_port is 0,
go), 1 -> 2, 2 -> multicast group 1, 3 -> multicast group 7 (absent), 4 -> port 9 (no
interface). Group 1: (2, rid 1), (3, rid 1), (3, rid 2), (4, rid 7). Clone session 5 (I2E):
(4, rid 0x55). Clone session 6 (E2E): (3, rid 0x66), (1, rid 0x67).
"""
from p4.v1 import p4runtime_pb2
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios._fields import Layout
from scenarios.runner import Scenario, Send, Setup

CLONE_I2E, CLONE_E2E, RESUBMIT, RECIRC, TRUNCATE, DROP = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NORMAL, I2E, E2E, RECIRCULATED, REPLICATED, RESUBMITTED = 0, 1, 2, 4, 5, 6
TRUNCATE_LEN = 48
REP = Layout(("flags", 8), ("ig_instance_type", 32), ("instance_type", 32), ("egress_rid", 16), ("egress_port", 16),
             ("ingress_port", 16),
             ("packet_length", 32), ("resubmit_count", 8), ("recirc_count", 8), ("clone_tag", 8),
             ("orig_ig_port", 16))
ETH = raw(Ether(dst="00:00:00:00:00:0a", src="00:00:00:00:00:0b", type=0x88B5))
PAYLOAD = bytes(range(100, 140))          # 40 bytes: frames are 74 bytes, above TRUNCATE_LEN
GROUP_1 = [(2, 1), (3, 1), (3, 2), (4, 7)]
SESSION_5 = [(4, 0x55)]
SESSION_6 = [(3, 0x66), (1, 0x67)]


def _setup(s: Setup) -> None:
    p = s.p4info
    fwd = [(0, "set_port", {"port": 3}), (1, "set_port", {"port": 2}), (2, "set_mcast", {"grp": 1}),
           (3, "set_mcast", {"grp": 7}), (4, "set_port", {"port": 9})]
    s.insert(*[p.table_entry("RepIngress.fwd", {"standard_metadata.ingress_port": port}, action=f"RepIngress.{a}",
                             params=params) for port, a, params in fwd])
    pre = []
    mg = p4runtime_pb2.PacketReplicationEngineEntry()
    mg.multicast_group_entry.multicast_group_id = 1
    for port, rid in GROUP_1:
        mg.multicast_group_entry.replicas.add(egress_port=port, instance=rid)
    pre.append(mg)
    for sid, replicas in ((5, SESSION_5), (6, SESSION_6)):
        cs = p4runtime_pb2.PacketReplicationEngineEntry()
        cs.clone_session_entry.session_id = sid
        for port, rid in replicas:
            cs.clone_session_entry.replicas.add(egress_port=port, instance=rid)
        pre.append(cs)
    s.insert(*pre)


def _frame(flags: int, payload: bytes = PAYLOAD) -> bytes:
    return ETH + REP.pack(flags=flags) + payload


def out(flags: int, port: int, *, ig_inst: int = 0, inst: int = NORMAL, rid: int = 0, ig: int,
        resub: int = 0, recirc: int = 0, tag: int = 0, orig: int, payload: bytes = PAYLOAD,
        trunc: bool = False) -> tuple[int, bytes]:
    """One expected copy: the port it leaves and its bytes."""
    frame = ETH + REP.pack(flags=flags, ig_instance_type=ig_inst, instance_type=inst, egress_rid=rid,
                           egress_port=port, ingress_port=ig,
                           packet_length=len(_frame(flags, payload)),
                           resubmit_count=resub, recirc_count=recirc, clone_tag=tag, orig_ig_port=orig) + payload
    return port, frame[:TRUNCATE_LEN] if trunc else frame


# (port, flags, expected copies[, payload]) -- every copy spelled out
CASES = [
    (1, 0, [out(0, 2, ig=1, orig=1)]),
    (1, CLONE_I2E, [out(CLONE_I2E, 2, ig=1, tag=0xC1, orig=1),
                    out(CLONE_I2E, 4, inst=I2E, rid=0x55, ig=0, tag=0xC1, orig=1)]),
    # resubmitted twice; from the second pass on, ingress_port is 0: fwd sends it to 3
    (1, RESUBMIT, [out(RESUBMIT, 3, ig_inst=RESUBMITTED, ig=0, resub=2, orig=1)]),
    # recirculated twice (egress writes rep each pass; the last pass is what leaves)
    (1, RECIRC, [out(RECIRC, 3, ig_inst=RECIRCULATED, ig=0, recirc=2, orig=1)]),
    # E2E clone: the original leaves on 2, the session's copies on 3 and 1
    (1, CLONE_E2E, [out(CLONE_E2E, 2, ig=1, orig=1),
                    out(CLONE_E2E, 3, inst=E2E, rid=0x66, ig=0, tag=0xE2, orig=1),
                    out(CLONE_E2E, 1, inst=E2E, rid=0x67, ig=0, tag=0xE2, orig=1)]),
    (1, DROP, []),
    # dropped in egress after asking for an E2E clone: the clones still go
    (1, DROP | CLONE_E2E, [out(DROP | CLONE_E2E, 3, inst=E2E, rid=0x66, ig=0, tag=0xE2, orig=1),
                           out(DROP | CLONE_E2E, 1, inst=E2E, rid=0x67, ig=0, tag=0xE2, orig=1)]),
    (1, TRUNCATE, [out(TRUNCATE, 2, ig=1, orig=1, trunc=True)]),
    # a frame shorter than the truncation length is left alone
    (1, TRUNCATE, [out(TRUNCATE, 2, ig=1, orig=1, payload=b"short")], b"short"),
    # truncate() then clones: only the original is shortened
    (1, TRUNCATE | CLONE_I2E, [out(TRUNCATE | CLONE_I2E, 2, ig=1, tag=0xC1, orig=1, trunc=True),
                               out(TRUNCATE | CLONE_I2E, 4, inst=I2E, rid=0x55, ig=0, tag=0xC1, orig=1)]),
    (1, TRUNCATE | CLONE_E2E, [out(TRUNCATE | CLONE_E2E, 2, ig=1, orig=1, trunc=True),
                               out(TRUNCATE | CLONE_E2E, 3, inst=E2E, rid=0x66, ig=0, tag=0xE2, orig=1),
                               out(TRUNCATE | CLONE_E2E, 1, inst=E2E, rid=0x67, ig=0, tag=0xE2, orig=1)]),
    # multicast: four copies, two of them on port 3 with different rids
    (2, 0, [out(0, p, inst=REPLICATED, rid=r, ig=2, orig=2) for p, r in GROUP_1]),
    # truncate() then multicast: the copies are whole
    (2, TRUNCATE, [out(TRUNCATE, p, inst=REPLICATED, rid=r, ig=2, orig=2) for p, r in GROUP_1]),
    # truncate() then recirculate: the recirculated packet is whole, the last pass truncates again
    (1, TRUNCATE | RECIRC, [out(TRUNCATE | RECIRC, 3, ig_inst=RECIRCULATED, ig=0, recirc=2, orig=1, trunc=True)]),
    # multicast and an I2E clone
    (2, CLONE_I2E, [out(CLONE_I2E, p, inst=REPLICATED, rid=r, ig=2, tag=0xC1, orig=2) for p, r in GROUP_1]
     + [out(CLONE_I2E, 4, inst=I2E, rid=0x55, ig=0, tag=0xC1, orig=2)]),
    # resubmit wins over multicast (mcast_grp is reset in the resubmitted packet)
    (2, RESUBMIT, [out(RESUBMIT, 3, ig_inst=RESUBMITTED, ig=0, resub=2, orig=2)]),
    # to port 9 (no interface): lost, but its egress ran and cloned it
    (4, CLONE_E2E, [out(CLONE_E2E, 3, inst=E2E, rid=0x66, ig=0, tag=0xE2, orig=4),
                    out(CLONE_E2E, 1, inst=E2E, rid=0x67, ig=0, tag=0xE2, orig=4)]),
    # an I2E clone on every pass of a resubmitted packet
    # (a clone is the packet as received, parsed again: ingress's write of ig_instance_type is not in it)
    (1, CLONE_I2E | RESUBMIT, [out(CLONE_I2E | RESUBMIT, 3, ig_inst=RESUBMITTED, ig=0, resub=2, tag=0xC1, orig=1)]
     + [out(CLONE_I2E | RESUBMIT, 4, inst=I2E, rid=0x55, ig=0, tag=0xC1, orig=1)] * 3),
    # multicast to an absent group: nothing
    (3, 0, []),
]
CASES = [c if len(c) == 4 else (*c, PAYLOAD) for c in CASES]     # (port, flags, copies, payload)
PACKETS = [Send(port, _frame(flags, payload), expect_nothing=not copies) for port, flags, copies, payload in CASES]
# not a `rep` packet: forwarded untouched
PACKETS.append(Send(1, raw(Ether(dst="00:00:00:00:00:0a", type=0x0800)) + PAYLOAD))


def _expect(outputs) -> None:
    for i, (port, flags, copies, _) in enumerate(CASES):
        want = sorted(copies)
        got = outputs[i]
        if got != want:
            lines = [f"packet {i} (port {port}, flags {flags:#x}):"]
            lines += [f"  got  port {p}: {REP.unpack(f[14:]) if len(f) >= 14 + REP.size else f.hex()} "
                      f"({len(f)} bytes)" for p, f in got]
            lines += [f"  want port {p}: {REP.unpack(f[14:])} ({len(f)} bytes)" for p, f in want]
            raise AssertionError("\n".join(lines))
    assert outputs[-1] == [(2, PACKETS[-1].frame)]


SCENARIOS = [Scenario("replication", "replication", PACKETS, setup=_setup, expect=_expect)]
