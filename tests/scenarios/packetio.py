"""packetio.p4: P4Runtime packet-in and packet-out through CPU port 255.

Frames from port 1 are punted: the controller gets them as PacketIn with metadata
ingress_port (the runner records the metadata values, 4 bytes each in id order, then the
payload). A PacketOut leaves through its egress_port metadata, untouched; to the CPU port it
comes back as a PacketIn from port 255; to BMv2's drop port (511) or a port without an
interface it vanishes. PI fills metadata the PacketOut leaves out with zeros (egress port
0: no interface here, so nothing comes out).
"""
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios.runner import CPU_PORT, Scenario, Send, Setup

FRAME = raw(Ether(dst="00:00:00:00:00:0c", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.3")
            / UDP(sport=7, dport=8) / b"to and from the controller")
BIG = raw(Ether(dst="00:00:00:00:00:0c", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.3")
          / TCP(sport=7, dport=8) / (bytes(range(256)) * 6)[:1460])      # 1514 bytes: a full MTU
TINY = raw(Ether(dst="00:00:00:00:00:0c", src="00:00:00:00:00:01", type=0x9000))   # 14 bytes


def packet_in(ingress_port: int, payload: bytes) -> tuple[int, bytes]:
    return CPU_PORT, ingress_port.to_bytes(4, "big") + bytes(4) + payload


def _setup(s: Setup) -> None:
    s.insert(*[s.p4info.table_entry("IoIngress.fwd", {"standard_metadata.ingress_port": i},
                                    action="IoIngress.set_port", params={"port": o}) for i, o in ((2, 3), (3, 2))])


# (what is sent, what must come out)
CASES = [
    (Send(1, FRAME), [packet_in(1, FRAME)]),
    (Send(1, BIG), [packet_in(1, BIG)]),
    (Send(1, TINY), [packet_in(1, TINY)]),
    (Send(2, FRAME), [(3, FRAME)]),                                     # not punted: fwd
    (Send(None, FRAME, {"egress_port": 3}), [(3, FRAME)]),
    (Send(None, BIG, {"egress_port": 2}), [(2, BIG)]),
    (Send(None, TINY, {"egress_port": 1}), [(1, TINY)]),
    (Send(None, FRAME, {"egress_port": 4, "_pad": 0x7F}), [(4, FRAME)]),   # pad bits are ignored
    (Send(None, FRAME, {"egress_port": CPU_PORT}), [packet_in(CPU_PORT, FRAME)]),   # loops back
    (Send(None, FRAME, {"egress_port": 511}, expect_nothing=True), []),  # BMv2's drop port
    (Send(None, FRAME, {"egress_port": 9}, expect_nothing=True), []),    # no interface behind port 9
    (Send(None, FRAME, {}, expect_nothing=True), []),                   # egress_port missing: 0
    # only the packet_out header, no Ethernet: PacketTooShort, and nothing the kernel can send
    (Send(None, b"", {"egress_port": 3}, expect_nothing=True), []),
    (Send(1, FRAME), [packet_in(1, FRAME)]),                             # still punting
]
PACKETS = [send for send, _ in CASES]


def _expect(outputs) -> None:
    for i, ((send, want), got) in enumerate(zip(CASES, outputs)):
        assert got == sorted(want), f"packet {i} ({send.port}, {send.metadata}): got {got}, want {want}"


SCENARIOS = [Scenario("packetio", "packetio", PACKETS, setup=_setup, expect=_expect)]
