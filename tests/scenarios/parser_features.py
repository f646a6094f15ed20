"""parser_features.p4: header stacks, unions, varbit, lookahead, verify, advance, value sets.

Every packet comes back (port 4) with the headers the parser extracted, re-emitted in
deparser order, then the `result` header ingress appends, then the bytes the parser did
not consume. The expected frame of each packet is spelled out here from the P4 program:
which headers a parser error leaves valid (those extracted before it), how many bytes the
parser consumed (everything up to the failing operation), what push_front/pop_front do to
a full or empty stack.

Left out of the comparison: a transition that selects on lookahead past the end of the
packet. BMv2 peeks beyond its packet buffer there (ParseSwitchKeyBuilder does not check
the length), so its result depends on stray memory; p4c turns this program's lookahead
selects into `set` operations, which BMv2 does check (PacketTooShort), and that is what the
MPLS packets below exercise.
"""
from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from scenarios._fields import Layout
from scenarios.runner import Scenario, Send, Setup

# parser_error codes the program writes into result.parser_error
OK, TOO_SHORT, STACK_OOB, HDR_TOO_SHORT, INVALID_ARG, BAD_VERSION, BAD_IHL = 0, 1, 3, 4, 6, 7, 8

ETH_MPLS, ETH_UNION, ETH_IPV4, ETH_PVS, ETH_VL = 0x8847, 0x88B6, 0x0800, 0x88B7, 0x88B8
PUSHED_LABEL = 0xABCDE
PVS_MEMBERS = (0x01, 0x7F, 0xFF)

MPLS = Layout(("label", 20), ("tc", 3), ("bos", 1), ("ttl", 8))
RESULT = Layout(("parser_error", 8), ("mpls_depth", 8), ("variant", 8), ("pvs_hit", 8),
                ("ipv4_opt_bytes", 8), ("lookahead_ipv4", 8), ("after_mpls", 8))


def eth(ether_type: int) -> bytes:
    return raw(Ether(dst="00:00:00:00:00:04", src="00:00:00:00:00:01", type=ether_type))


def mpls(label: int, bos: int = 0, ttl: int = 63, tc: int = 5) -> bytes:
    return MPLS.pack(label=label, tc=tc, bos=bos, ttl=ttl)


def ipv4(ihl: int = 5, version: int = 4, options: bytes = b"") -> bytes:
    """An IPv4 header as raw bytes (any version/ihl, options as given)."""
    h = bytearray(raw(IP(src="10.0.0.1", dst="10.0.0.2", ttl=17, proto=17)))
    h[0] = (version << 4) | ihl
    return bytes(h) + options


def result(err: int = OK, depth: int = 0, variant: int = 0, pvs: int = 0, opt: int = 0,
           la: int = 0, after: int = 0) -> bytes:
    return RESULT.pack(parser_error=err, mpls_depth=depth, variant=variant, pvs_hit=pvs,
                       ipv4_opt_bytes=opt, lookahead_ipv4=la, after_mpls=after)


UDP_PART = raw(UDP(sport=5000, dport=6000) / b"payload!")
IP5 = ipv4()
OPTS40 = bytes(range(1, 41))


def _setup(s: Setup) -> None:
    p = s.p4info
    s.insert(*[p.table_entry("FeatureIngress.fwd", {"standard_metadata.ingress_port": port},
                             action="FeatureIngress.set_port", params={"port": 4}) for port in (1, 2, 3)],
             p.table_entry("FeatureIngress.mpls_op", {"standard_metadata.ingress_port": 2},
                           action="FeatureIngress.push_label", params={"label": PUSHED_LABEL}),
             p.table_entry("FeatureIngress.mpls_op", {"standard_metadata.ingress_port": 3},
                           action="FeatureIngress.pop_label"))
    if s.target == "bmv2":
        # PI answers ValueSetEntry writes with UNIMPLEMENTED: fill the set over Thrift instead
        s.bmv2_thrift(*[f"c.bm_parse_vset_add(0, 'FeatureParser.pvs', {bytes([v])!r})" for v in PVS_MEMBERS])
        return
    # the value set takes MODIFY only (P4Runtime 9.8)
    vs = next(v for v in p.message.value_sets if v.preamble.name == "FeatureParser.pvs")
    entry = p4runtime_pb2.ValueSetEntry(value_set_id=vs.preamble.id)
    for v in PVS_MEMBERS:
        entry.members.add().match.add(field_id=vs.match[0].id).exact.value = bytes([v])
    s.modify(entry)

L1, L2, L3, L4 = 0x00010, 0xFFFFF, 0x12345, 0x00000
# (port, frame sent, frame expected on port 4)
CASES = [
    # MPLS, one label, IPv4 found by lookahead
    (1, eth(ETH_MPLS) + mpls(L1, 1) + IP5 + UDP_PART,
     eth(ETH_MPLS) + mpls(L1, 1) + IP5 + result(depth=1, la=1, after=0x45) + UDP_PART),
    # three labels (extreme label values), then something that is not IPv4
    (1, eth(ETH_MPLS) + mpls(L2, ttl=255) + mpls(L4, ttl=0) + mpls(L3, 1) + b"\x60\x01\x02",
     eth(ETH_MPLS) + mpls(L2, ttl=255) + mpls(L4, ttl=0) + mpls(L3, 1) + result(depth=3, after=0x60)
     + b"\x60\x01\x02"),
    # four labels without bottom of stack: the fifth extract overflows the stack
    (1, eth(ETH_MPLS) + mpls(L1) + mpls(L2) + mpls(L3) + mpls(L4) + mpls(7, 1) + IP5,
     eth(ETH_MPLS) + mpls(L1) + mpls(L2) + mpls(L3) + mpls(L4) + result(STACK_OOB, depth=4)
     + mpls(7, 1) + IP5),
    # bottom of stack, then nothing: the lookahead finds no byte
    (1, eth(ETH_MPLS) + mpls(L1, 1),
     eth(ETH_MPLS) + mpls(L1, 1) + result(TOO_SHORT, depth=1)),
    # second label cut after two bytes
    (1, eth(ETH_MPLS) + mpls(L1) + mpls(L2, 1)[:2],
     eth(ETH_MPLS) + mpls(L1) + result(TOO_SHORT, depth=1) + mpls(L2, 1)[:2]),
    # IPv4 under MPLS with ihl 3: extracted, then verify fails; (bit<8>)ihl - 5 wraps
    (1, eth(ETH_MPLS) + mpls(L1, 1) + ipv4(ihl=3) + UDP_PART,
     eth(ETH_MPLS) + mpls(L1, 1) + ipv4(ihl=3) + result(BAD_IHL, depth=1, opt=0xF8, la=1, after=0x43)
     + UDP_PART),
    # plain IPv4, version 6: IPv4BadVersion, the header stays valid
    (1, eth(ETH_IPV4) + ipv4(version=6) + UDP_PART,
     eth(ETH_IPV4) + ipv4(version=6) + result(BAD_VERSION) + UDP_PART),
    # version 4, ihl 0
    (1, eth(ETH_IPV4) + ipv4(ihl=0) + UDP_PART,
     eth(ETH_IPV4) + ipv4(ihl=0) + result(BAD_IHL, opt=0xEC) + UDP_PART),
    # ihl 15: the longest options (varbit<320> full)
    (1, eth(ETH_IPV4) + ipv4(ihl=15, options=OPTS40) + UDP_PART,
     eth(ETH_IPV4) + ipv4(ihl=15, options=OPTS40) + result(opt=40) + UDP_PART),
    # ihl 7 but only 5 option bytes: the options are not extracted
    (1, eth(ETH_IPV4) + ipv4(ihl=7, options=OPTS40[:5]),
     eth(ETH_IPV4) + ipv4(ihl=7) + result(TOO_SHORT, opt=8) + OPTS40[:5]),
    # port 2 pushes a label onto IPv4 with options
    (2, eth(ETH_IPV4) + ipv4(ihl=6, options=b"\x01\x01\x01\x00") + UDP_PART,
     eth(ETH_MPLS) + mpls(PUSHED_LABEL, 1, ttl=64, tc=0) + ipv4(ihl=6, options=b"\x01\x01\x01\x00")
     + result(depth=1, opt=4) + UDP_PART),
    # push onto a full stack: the bottom label falls off, no label has bos any more
    (2, eth(ETH_MPLS) + mpls(L1) + mpls(L2) + mpls(L3) + mpls(L4, 1) + IP5,
     eth(ETH_MPLS) + mpls(PUSHED_LABEL, 0, ttl=64, tc=0) + mpls(L1) + mpls(L2) + mpls(L3) + IP5
     + result(depth=4, la=1, after=0x45)),
    # port 3 pops: two labels -> one
    (3, eth(ETH_MPLS) + mpls(L1) + mpls(L2, 1) + IP5 + UDP_PART,
     eth(ETH_MPLS) + mpls(L2, 1) + IP5 + result(depth=1, la=1, after=0x45) + UDP_PART),
    # one label -> none: back to the IPv4 ether type
    (3, eth(ETH_MPLS) + mpls(L3, 1) + IP5 + UDP_PART,
     eth(ETH_IPV4) + IP5 + result(la=1, after=0x45) + UDP_PART),
    # pop on an empty stack
    (3, eth(ETH_IPV4) + IP5 + UDP_PART,
     eth(ETH_IPV4) + IP5 + result() + UDP_PART),
    # header union: short, long, neither, long cut short
    (1, eth(ETH_UNION) + b"\x01" + b"\xbe\xef" + b"tail",
     eth(ETH_UNION) + b"\x01" + b"\xbe\xef" + result(variant=1) + b"tail"),
    (1, eth(ETH_UNION) + b"\x02" + b"\xde\xad\xbe\xef" + b"tail",
     eth(ETH_UNION) + b"\x02" + b"\xde\xad\xbe\xef" + result(variant=2) + b"tail"),
    (1, eth(ETH_UNION) + b"\x03" + b"\xde\xad\xbe\xef",
     eth(ETH_UNION) + b"\x03" + result() + b"\xde\xad\xbe\xef"),
    (1, eth(ETH_UNION) + b"\x02" + b"\xde\xad\xbe",
     eth(ETH_UNION) + b"\x02" + result(TOO_SHORT) + b"\xde\xad\xbe"),
    # parser value set: members 0x01, 0x7f, 0xff
    *[(1, eth(ETH_PVS) + bytes([v]) + b"zz", eth(ETH_PVS) + bytes([v]) + result(pvs=int(v in PVS_MEMBERS)) + b"zz")
      for v in (0x01, 0x00, 0xFF, 0x80, 0x7F, 0xFE)],
    (1, eth(ETH_PVS), eth(ETH_PVS) + result(TOO_SHORT)),
    # varbit and advance: vl_bits, skip_bits
    (1, eth(ETH_VL) + b"\x40\x10" + b"SK" + b"12345678" + b"rest",
     eth(ETH_VL) + b"\x40\x10" + b"12345678" + result() + b"rest"),
    (1, eth(ETH_VL) + b"\x00\x00" + b"rest",
     eth(ETH_VL) + b"\x00\x00" + result() + b"rest"),
    (1, eth(ETH_VL) + b"\x18\x00" + b"abc",
     eth(ETH_VL) + b"\x18\x00" + b"abc" + result()),
    (1, eth(ETH_VL) + b"\x0c\x00" + b"12345678",              # 12 bits: not whole bytes
     eth(ETH_VL) + b"\x0c\x00" + result(INVALID_ARG) + b"12345678"),
    (1, eth(ETH_VL) + b"\x48\x00" + b"123456789abc",           # 72 bits > varbit<64>
     eth(ETH_VL) + b"\x48\x00" + result(HDR_TOO_SHORT) + b"123456789abc"),
    (1, eth(ETH_VL) + b"\x48\x00" + b"1234",                   # ... and too few bytes: checked first
     eth(ETH_VL) + b"\x48\x00" + result(TOO_SHORT) + b"1234"),
    (1, eth(ETH_VL) + b"\x08\x04" + b"12345678",               # advance by 4 bits
     eth(ETH_VL) + b"\x08\x04" + result(INVALID_ARG) + b"12345678"),
    (1, eth(ETH_VL) + b"\x08\xf8" + b"12345678",               # advance 31 bytes past the end
     eth(ETH_VL) + b"\x08\xf8" + result(TOO_SHORT) + b"12345678"),
    (1, eth(ETH_VL) + b"\x08\x40" + b"12345678",               # advance to the very end, then 1 byte missing
     eth(ETH_VL) + b"\x08\x40" + result(TOO_SHORT)),
]

PACKETS = [Send(port, frame) for port, frame, _ in CASES]


def _expect(outputs) -> None:
    for i, (port, sent, want) in enumerate(CASES):
        got = outputs[i]
        assert len(got) == 1 and got[0][0] == 4, f"packet {i}: {got}"
        frame = got[0][1]
        assert frame == want, f"packet {i} (port {port}, {sent.hex()}):\n got  {frame.hex()}\n want {want.hex()}"


SCENARIOS = [Scenario("parser_features", "parser_features", PACKETS, setup=_setup, expect=_expect)]
