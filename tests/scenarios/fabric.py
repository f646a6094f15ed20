"""fabric.p4 (p4src/): routing, ECMP, ARP/NDP replies, TTL, ACL punt/copy, packet-out, counters.

The control plane is written as p4src/README.md describes it. Every expected frame is built
here with scapy from the contract: a routed packet leaves with the chosen member's MACs,
TTL / hop limit - 1 and a correct IPv4 checksum; the ECMP member is
``members_in_creation_order[crc16(selector fields) % n]``, the selector fields packed as
BMv2 packs them (ip_src, ip_dst 128 bits each, IPv4 zero-extended; ip_proto; L4 ports;
flow label 20 bits; ecmp_mix 32 bits = the XOR fold of those fields times
((seed * ECMP_SEED_SCRAMBLE) | 1), p4src/include/define.p4; 348 bits, zero-padded to 44
bytes) and CRC-16/ARC computed bit by bit here. The neighbor
advertisement's ICMPv6 checksum is checked with a checksum written out here over the IPv6
pseudo-header. Packet-ins are recorded as their metadata (ingress_port, _pad: 4 bytes
each) followed by the payload.
"""
import ipaddress

from p4.v1 import p4runtime_pb2
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import raw

from controller.p4names import Action, ActionProfile, Counter, Table
from scenarios._reference import crc16_arc, internet_checksum
from scenarios.runner import CONTROL, CPU_PORT, Scenario, Send, Setup, Step

ROUTER = "00:00:00:00:aa:aa"
HOST = {1: "00:00:00:00:00:01", 2: "00:00:00:00:00:02", 3: "00:00:00:00:00:03", 4: "00:00:00:00:00:04"}
# ECMP members of group 100 (next_id 2), in creation order: (member id, port, neighbour MAC)
GROUP = [(11, 2, "00:00:00:00:bb:02"), (12, 3, "00:00:00:00:bb:03"), (13, 4, "00:00:00:00:bb:04")]
SINGLE = (14, 1, "00:00:00:00:bb:01")           # next_id 1: one member, no group
GW4, GW6 = "10.0.0.254", "2001:db8::fe"
SEED = 7                      # a hash_config seed (a switch id, say)
ECMP_SEED_SCRAMBLE = 0x9E3779B1


def ecmp_member(src: str, dst: str, proto: int, sport: int, dport: int, flow_label: int, seed: int) -> tuple:
    s, d = int(ipaddress.ip_address(src)), int(ipaddress.ip_address(dst))
    fold = 0
    for word in [(s >> k) & 0xFFFFFFFF for k in (96, 64, 32, 0)] + [(d >> k) & 0xFFFFFFFF for k in (96, 64, 32, 0)]:
        fold ^= word
    fold ^= (sport << 16) | dport
    fold ^= (proto << 20) | flow_label
    mix = (fold * (((seed * ECMP_SEED_SCRAMBLE) & 0xFFFFFFFF) | 1)) & 0xFFFFFFFF
    bits = (((((((((((s << 128) | d) << 8) | proto) << 16) | sport) << 16) | dport) << 20) | flow_label) << 32) | mix
    h = crc16_arc((bits << 4).to_bytes(44, "big"))
    return GROUP[h % len(GROUP)]


# --- control plane --------------------------------------------------------------------------

def _setup(s: Setup) -> None:
    p = s.p4info
    ents = [p.table_entry(Table.FILTERING_MY_STATION, {"eth_dst": ROUTER}, action=Action.FILTERING_SET_ROUTABLE)]
    ents += [p.profile_member(ActionProfile.NEXT_ECMP_SELECTOR, m, Action.NEXT_ROUTE, port=port, smac=ROUTER, dmac=mac)
             for m, port, mac in GROUP + [SINGLE]]
    ents.append(p.profile_group(ActionProfile.NEXT_ECMP_SELECTOR, 100, [m for m, _, _ in GROUP]))
    s.insert(*ents)
    routes_v4 = [("10.0.1.0/24", 1), ("10.0.2.0/24", 2)]
    routes_v6 = [("2001:db8:1::/64", 1), ("2001:db8:2::/64", 2)]
    s.insert(
        p.table_entry(Table.NEXT_HASHED, {"next_id": 1}, member_id=SINGLE[0]),
        p.table_entry(Table.NEXT_HASHED, {"next_id": 2}, group_id=100),
        *[p.table_entry(Table.FORWARDING_ROUTING_V4, {"ipv4_dst": net}, action=Action.FORWARDING_SET_NEXT_ID,
                        params={"next_id": n}) for net, n in routes_v4],
        p.table_entry(Table.FORWARDING_ROUTING_V4, {"ipv4_dst": "10.99.0.0/16"}, action=Action.FORWARDING_DROP),
        *[p.table_entry(Table.FORWARDING_ROUTING_V6, {"ipv6_dst": net}, action=Action.FORWARDING_SET_NEXT_ID,
                        params={"next_id": n}) for net, n in routes_v6],
        p.table_entry(Table.ARP_NDP_ARP_REPLY, {"target_ipv4": f"{GW4}/32"}, action=Action.ARP_NDP_REPLY_ARP,
                      params={"mac": ROUTER}),
        p.table_entry(Table.ARP_NDP_NDP_REPLY, {"target_ipv6": f"{GW6}/128"}, action=Action.ARP_NDP_REPLY_NDP,
                      params={"mac": ROUTER}),
        p.table_entry(Table.ACL_ACL, {"eth_type": (0x0806, 0xFFFF)}, action=Action.ACL_COPY_TO_CPU, priority=30),
        p.table_entry(Table.ACL_ACL, {"eth_type": (0x86DD, 0xFFFF), "ip_proto": (58, 0xFF), "icmp_type": (135, 0xFF)},
                      action=Action.ACL_COPY_TO_CPU, priority=25),
        p.table_entry(Table.ACL_ACL, {"eth_type": (0x0800, 0xFFFF), "ip_proto": (1, 0xFF), "icmp_type": (8, 0xFF)},
                      action=Action.ACL_PUNT_TO_CPU, priority=20),
        p.table_entry(Table.ACL_ACL, {"ip_proto": (17, 0xFF), "l4_dport": (9, 0xFFFF)}, action=Action.ACL_DROP,
                      priority=10),
    )
    cs = p4runtime_pb2.PacketReplicationEngineEntry()
    cs.clone_session_entry.session_id = 511
    cs.clone_session_entry.replicas.add(egress_port=CPU_PORT, instance=1)
    s.insert(cs)


def _set_seed(s: Setup) -> bytes:
    s.modify(s.p4info.table_entry(Table.NEXT_HASH_CONFIG, action=Action.NEXT_SET_HASH_SEED, params={"seed": SEED},
                                  default=True))
    return b"seed"


def _read_counters(s: Setup) -> bytes:
    lines = []
    for name in (Counter.FILTERING_INGRESS_PORT_COUNTER, Counter.EGRESS_PORT_COUNTER):
        for e in s.read(s.p4info.counter_entry(name)):
            c = e.counter_entry
            if c.data.packet_count:
                lines.append(f"{name.rsplit('.', 1)[1]}[{c.index.index}] {c.data.packet_count} {c.data.byte_count}")
    return "\n".join(sorted(lines)).encode()


# --- packets --------------------------------------------------------------------------------

def udp4(src: str, dst: str, sport: int, dport: int = 4791, ttl: int = 64, port: int = 1, **ip) -> bytes:
    return raw(Ether(dst=ROUTER, src=HOST[port]) / IP(src=src, dst=dst, ttl=ttl, **ip)
               / UDP(sport=sport, dport=dport) / b"rocev2 payload")


def udp6(src: str, dst: str, sport: int, fl: int, hlim: int = 64, port: int = 1) -> bytes:
    return raw(Ether(dst=ROUTER, src=HOST[port]) / IPv6(src=src, dst=dst, fl=fl, hlim=hlim)
               / UDP(sport=sport, dport=4791) / b"v6 payload")


def routed(frame: bytes, seed: int = 0, single: bool = False) -> tuple[int, bytes]:
    """The frame as it leaves after routing: port, bytes."""
    pkt = Ether(frame)
    l3 = pkt[IP] if IP in pkt else pkt[IPv6]
    l4 = pkt[UDP] if UDP in pkt else (pkt[TCP] if TCP in pkt else None)
    sport, dport = (l4.sport, l4.dport) if l4 is not None else (0, 0)
    fl = l3.fl if IPv6 in pkt else 0
    proto = l3.proto if IP in pkt else l3.nh
    _, port, mac = SINGLE if single else ecmp_member(l3.src, l3.dst, proto, sport, dport, fl, seed)
    pkt[Ether].src, pkt[Ether].dst = ROUTER, mac
    if IP in pkt:
        pkt[IP].ttl -= 1
        del pkt[IP].chksum
    else:
        pkt[IPv6].hlim -= 1
    return port, raw(pkt)


def packet_in(ingress_port: int, payload: bytes) -> tuple[int, bytes]:
    return CPU_PORT, ingress_port.to_bytes(4, "big") + bytes(4) + payload


ARP_REQ = raw(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST[2]) / ARP(op=1, hwsrc=HOST[2], psrc="10.0.0.2", pdst=GW4))
ARP_REPLY = raw(Ether(dst=HOST[2], src=ROUTER) / ARP(op=2, hwsrc=ROUTER, psrc=GW4, hwdst=HOST[2], pdst="10.0.0.2"))
ARP_OTHER = raw(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST[3]) / ARP(op=1, hwsrc=HOST[3], psrc="10.0.0.3",
                                                                   pdst="10.0.0.77"))
H6 = "2001:db8::3"
NS = raw(Ether(dst="33:33:ff:00:00:fe", src=HOST[3]) / IPv6(src=H6, dst="ff02::1:ff00:fe", hlim=255)
         / ICMPv6ND_NS(tgt=GW6) / ICMPv6NDOptSrcLLAddr(lladdr=HOST[3]))
NA = raw(Ether(dst=HOST[3], src=ROUTER) / IPv6(src=GW6, dst=H6, hlim=255)
         / ICMPv6ND_NA(R=1, S=1, O=1, tgt=GW6) / ICMPv6NDOptDstLLAddr(lladdr=ROUTER))
NS_DAD = raw(Ether(dst="33:33:ff:00:00:fe", src=HOST[3]) / IPv6(src="::", dst="ff02::1:ff00:fe", hlim=255)
             / ICMPv6ND_NS(tgt=GW6))
PING = raw(Ether(dst=ROUTER, src=HOST[1]) / IP(src="10.0.1.1", dst="10.0.2.9", ttl=9) / ICMP(type=8, id=7, seq=1)
           / b"ping")
BAD_CSUM = bytearray(udp4("10.0.1.1", "10.0.2.5", 1000))
BAD_CSUM[14 + 10] ^= 0xFF
OUT_FRAME = raw(Ether(dst=HOST[3], src=ROUTER, type=0x88CC) / b"lldp-ish from the controller")

FLOWS4 = [udp4("10.0.1.1", "10.0.2.5", 49152 + 997 * i) for i in range(12)]
FLOWS6 = [udp6("2001:db8:1::1", "2001:db8:2::5", 50000 + i, fl=0x12345 * i & 0xFFFFF) for i in range(6)]
FLOWS4_SEEDED = FLOWS4[:6]

# (Send, expected outputs); None: computed when expecting (ECMP)
CASES = [(Send(1, f), [routed(f)]) for f in FLOWS4] + [(Send(1, f), [routed(f)]) for f in FLOWS6] + [
    (Send(2, udp4("10.0.2.7", "10.0.1.9", 5, port=2)), [routed(udp4("10.0.2.7", "10.0.1.9", 5, port=2), single=True)]),
    (Send(1, udp4("10.0.1.1", "10.0.2.5", 7, ttl=2)), [routed(udp4("10.0.1.1", "10.0.2.5", 7, ttl=2))]),
    (Send(1, udp4("10.0.1.1", "10.0.2.5", 7, ttl=1), expect_nothing=True), []),             # TTL 1: dropped
    (Send(1, udp4("10.0.1.1", "10.0.2.5", 7, ttl=0), expect_nothing=True), []),
    (Send(1, udp6("2001:db8:1::1", "2001:db8:2::5", 7, 1, hlim=2)),
     [routed(udp6("2001:db8:1::1", "2001:db8:2::5", 7, 1, hlim=2))]),
    (Send(1, udp6("2001:db8:1::1", "2001:db8:2::5", 7, 1, hlim=1), expect_nothing=True), []),  # hop limit 1
    (Send(1, bytes(BAD_CSUM), expect_nothing=True), []),                                   # bad IPv4 checksum
    (Send(1, udp4("10.0.1.1", "10.0.2.5", 7, options=b"\x01\x01\x01\x00"), expect_nothing=True), []),  # ihl 6
    (Send(1, udp4("10.0.1.1", "10.99.1.1", 7), expect_nothing=True), []),                  # route to drop
    (Send(1, udp4("10.0.1.1", "192.0.2.1", 7), expect_nothing=True), []),                  # no route
    (Send(1, raw(Ether(dst=HOST[2], src=HOST[1]) / IP(dst="10.0.2.5") / UDP()), expect_nothing=True), []),  # not my MAC
    (Send(1, udp4("10.0.1.1", "10.0.2.5", 7, dport=9), expect_nothing=True), []),          # ACL drop
    # ARP request for the gateway: the reply goes back out port 2, a copy of the request to the CPU
    (Send(2, ARP_REQ), [(2, ARP_REPLY), packet_in(2, ARP_REQ)]),
    (Send(3, ARP_OTHER), [packet_in(3, ARP_OTHER)]),                                         # not answered
    (Send(3, NS), [(3, NA), packet_in(3, NS)]),                                            # NS -> NA
    (Send(3, NS_DAD), [packet_in(3, NS_DAD)]),                                             # DAD probe: no NA
    # ICMP echo request: punted, as routing left it
    (Send(1, PING), [(CPU_PORT, packet_in(1, routed(PING)[1])[1])]),
    (Send(None, OUT_FRAME, {"egress_port": 3}), [(3, OUT_FRAME)]),                          # packet-out
    (Send(None, ARP_REPLY, {"egress_port": 2}), [(2, ARP_REPLY)]),
]
SEEDED_AT = len(CASES)
CASES += [(Step(_set_seed), [(CONTROL, b"seed")])] + [(Send(1, f), [routed(f, seed=SEED)]) for f in FLOWS4_SEEDED]
CASES += [(Step(_read_counters), None)]
PACKETS = [send for send, _ in CASES]


def _na_checksum_ok(frame: bytes) -> bool:
    ip6 = frame[14:54]
    icmp = frame[54:]
    pseudo = ip6[8:40] + len(icmp).to_bytes(4, "big") + b"\0\0\0" + bytes([58])
    return internet_checksum(pseudo + icmp) == 0


def _expect(outputs) -> None:
    assert _na_checksum_ok(NA)                        # our checksum agrees with scapy's on the expected NA
    for i, ((send, want), got) in enumerate(zip(CASES[:-1], outputs)):
        assert got == sorted(want), f"packet {i}: got {got}\n want {sorted(want)}"
    ports_hit = {got[0][0] for got in outputs[:len(FLOWS4)]}
    assert ports_hit == {2, 3, 4}, f"12 flows used only ports {ports_hit} of the group"
    i_ns = next(i for i, (s, _) in enumerate(CASES) if isinstance(s, Send) and s.frame == NS)
    na = next(f for p, f in outputs[i_ns] if p == 3)
    assert _na_checksum_ok(na), "the NA's ICMPv6 checksum is wrong"
    # counters: every packet but packet-outs counted in, every copy out, bytes as received
    ing, egr = {}, {}
    for (send, _), got in zip(CASES[:-1], outputs):
        if isinstance(send, Step):
            continue
        length = len(send.frame) + (2 if send.port is None else 0)    # packet-outs carry packet_out (2 bytes)
        if send.port is not None:
            n, b = ing.get(send.port, (0, 0))
            ing[send.port] = (n + 1, b + length)
        for p, _ in got:
            n, b = egr.get(p, (0, 0))
            egr[p] = (n + 1, b + length)
    want = [f"ingress_port_counter[{k}] {n} {b}" for k, (n, b) in ing.items()]
    want += [f"egress_port_counter[{k}] {n} {b}" for k, (n, b) in egr.items()]
    assert outputs[-1] == [(CONTROL, "\n".join(sorted(want)).encode())], \
        f"counters:\n{outputs[-1][0][1].decode()}\nwant:\n" + "\n".join(sorted(want))


SCENARIOS = [Scenario("fabric", "fabric", PACKETS, setup=_setup, expect=_expect)]
