"""basic_router.p4: IPv4 LPM forwarding, TTL decrement, checksum update, drops."""
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios.runner import Scenario, Send, Setup

ROUTER_MAC = "00:00:00:00:aa:aa"
NEXT_HOP = {2: 0x00000000BB02, 3: 0x00000000BB03}


def _setup(s: Setup) -> None:
    routes = [("10.0.2.0", 24, 2), ("10.0.3.0", 24, 3), ("10.0.3.7", 32, 2), ("0.0.0.0", 0, 4)]
    # a /0 route is the entry with the LPM field left out (P4Runtime: don't-care)
    s.insert(*[s.p4info.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (net, plen)} if plen else {},
                                    action="MyIngress.ipv4_forward",
                                    params={"dstAddr": NEXT_HOP.get(port, 0xBB04), "port": port})
               for net, plen, port in routes])


def _frame(dst: str, ttl: int = 64, **kw) -> bytes:
    return raw(Ether(dst=ROUTER_MAC, src="00:00:00:00:00:01") / IP(src="10.0.1.1", dst=dst, ttl=ttl, **kw)
               / UDP(sport=1234, dport=80) / b"payload")


PACKETS = [
    Send(1, _frame("10.0.2.9")),                      # /24 -> port 2
    Send(1, _frame("10.0.3.9")),                      # /24 -> port 3
    Send(1, _frame("10.0.3.7")),                      # /32 beats /24 -> port 2
    Send(2, _frame("192.168.0.1")),                   # default route -> port 4
    Send(1, _frame("10.0.2.9", ttl=1)),               # TTL 1 -> 0, still forwarded (no TTL check)
    Send(1, raw(Ether(dst=ROUTER_MAC) / TCP()), expect_nothing=True),     # not IPv4: dropped
    Send(1, _frame("10.0.2.9")[:20], expect_nothing=False),               # truncated IPv4 header
    Send(1, raw(Ether(dst=ROUTER_MAC) / IP(dst="10.0.2.1", options=b"\x01\x01\x01\x00") / b"x")),
]


def _expect(outputs) -> None:
    for i, dst, port in ((0, "10.0.2.9", 2), (1, "10.0.3.9", 3), (2, "10.0.3.7", 2), (3, "192.168.0.1", 4)):
        assert [p for p, _ in outputs[i]] == [port], f"packet {i} to {dst}: {outputs[i]}"
        out = Ether(outputs[i][0][1])
        sent = Ether(PACKETS[i].frame)
        assert out.dst == f"00:00:00:00:bb:0{port}", out.dst
        assert out.src == ROUTER_MAC                    # old dst becomes src
        assert out[IP].ttl == sent[IP].ttl - 1
        chk = out[IP].chksum
        del out[IP].chksum
        assert Ether(raw(out))[IP].chksum == chk        # checksum recomputed correctly
        assert raw(out[UDP]) == raw(sent[UDP])          # the rest untouched
    assert Ether(outputs[4][0][1])[IP].ttl == 0
    assert outputs[5] == []


SCENARIOS = [Scenario("basic_router", "basic_router", PACKETS, setup=_setup, expect=_expect)]
