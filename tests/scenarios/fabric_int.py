"""fabric.p4: INT-MD over TCP/UDP (source, transit, sink, telemetry report) and ECN at an
idle queue, on one switch, byte for byte.

Ports: 1 host A (sends), 2 the fabric (INT packets leave here: transit), 3 host B (a sink
port), 4 the telemetry port (clone session 500). Flows to host B (10.0.3.0/24,
2001:db8:3::/64) are on the watchlist, so one switch is their source and their sink; RoCEv2
to 10.0.2.0/24 is watched too (source only: its INT packet leaves on port 2). INT packets
coming in on port 1 are built here, as an upstream switch would have made them.

Expected frames are built from the packets sent (scapy, plus the INT and report layouts
below) with a correct TCP/UDP checksum recomputed from scratch, so a wrong incremental
checksum update fails the comparison. The switch's own hop carries timestamps: `expect`
copies them from the output into the expected frame after checking that they are
plausible (egress >= ingress, latency = egress - ingress, under a second, later packets
later); `normalise` blanks them, and the L4 checksums they enter, for the comparison with
BMv2.

ECN: at an idle queue (depth 0) nothing is marked; bursts into a queue drained at 100
packets/s with Kmin = Kmax = 8 leave some packets unmarked and mark the rest CE (which ones
depends on timing: bursts are compared as sets of frames), non-ECT packets and Pmax 0 are
never marked. The RED probability between Kmin and Kmax is tests/controller/test_fabric_ecn.py.
"""
from __future__ import annotations

from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import raw

from controller import entries as E
from controller.p4names import Action, Counter, Register, Table
from controller.routing import NextHop
from scenarios._fields import Layout
from scenarios.runner import CONTROL, Scenario, Send, Setup, Step

# --- the fabric's INT and report formats (p4src/include/header.p4) ---------------------------
SHIM = Layout(("type", 4), ("npt", 2), ("r1", 2), ("len", 8), ("r2", 8), ("dscp", 6), ("r3", 2))
MD = Layout(("ver", 4), ("d", 1), ("e", 1), ("m", 1), ("rsvd", 12), ("hop_ml", 5), ("rhc", 8),
            ("bitmap", 16), ("domain", 16), ("ds_instr", 16), ("ds_flags", 16))
HOP = Layout(("switch_id", 32), ("ig_port", 16), ("eg_port", 16), ("latency", 32), ("qid", 8),
             ("qocc", 24), ("ig_ts", 64), ("eg_ts", 64))
GROUP = Layout(("ver", 4), ("hw_id", 6), ("seq", 22), ("node_id", 32))
INDIV = Layout(("rep_type", 4), ("in_type", 4), ("rep_len", 8), ("md_len", 8), ("d", 1), ("q", 1),
               ("f", 1), ("i", 1), ("rsvd", 4))
MAIN = Layout(("rep_md_bits", 16), ("domain", 16), ("ds_md_bits", 16), ("ds_md_status", 16))
INT_DSCP_BIT = 0x20
INSTRUCTIONS = 0xFC00
REPORT_PAYLOAD_WORDS = 16
HOP_TIME_FIELDS = ((8, 4), (16, 16))          # (offset, length) in a hop: latency; both timestamps

# --- the switch ---------------------------------------------------------------------------------
SWITCH_ID = 0x0A01
ROUTER_MAC = "00:00:00:00:aa:aa"
HOST_A, HOST_B, NEIGHBOR = "00:00:00:00:00:0a", "00:00:00:00:00:0b", "00:00:00:00:bb:02"
FABRIC, HOST_B_PORT, TELEMETRY = 2, 3, 4
REPORT_SRC_MAC, REPORT_DST_MAC = "00:00:00:00:0a:01", "00:00:00:00:c0:11"
REPORT_SRC_IP, REPORT_DST_IP, REPORT_PORT = "192.168.50.1", "192.168.50.254", 32766
MAX_HOP_B, MAX_HOP_ROCE = 5, 4
KMIN, KMAX, PMAX = 0, 0, 0xFFFF               # ECN at an idle queue: depth 0 <= Kmin, never marked



def _setup(s: Setup, mtu: int = 1500) -> None:
    i = s.p4info
    s.insert(E.my_station(i, ROUTER_MAC))
    for nid, port, dmac in ((2, FABRIC, NEIGHBOR), (3, HOST_B_PORT, HOST_B)):
        s.insert(E.route_member(i, nid, NextHop(port, ROUTER_MAC, dmac, "n")))
        s.insert(E.ecmp_group(i, nid, [nid]))
        s.insert(E.next_entry(i, nid, nid))
    for prefix, nid in (("10.0.2.0/24", 2), ("2001:db8:2::/64", 2), ("10.0.3.0/24", 3), ("2001:db8:3::/64", 3)):
        s.insert(E.route(i, prefix, nid))
    s.insert(i.table_entry(Table.INT_WATCHLIST_WATCHLIST, {"ip_dst": ("10.0.3.0", 0xFFFFFF00)}, action=Action.INT_WATCHLIST_MARK_SOURCE,
                           params={"max_hop": MAX_HOP_B}, priority=10),
             i.table_entry(Table.INT_WATCHLIST_WATCHLIST, {"ip_dst": ("2001:db8:3::", ((1 << 64) - 1) << 64)},
                           action=Action.INT_WATCHLIST_MARK_SOURCE, params={"max_hop": MAX_HOP_B}, priority=10),
             i.table_entry(Table.INT_WATCHLIST_WATCHLIST, {"ip_dst": ("10.0.2.0", 0xFFFFFF00), "ip_proto": (17, 0xFF),
                                              "l4_dport": (4791, 4791)},
                           action=Action.INT_WATCHLIST_MARK_SOURCE, params={"max_hop": MAX_HOP_ROCE}, priority=20))
    s.modify(_int_config(i, mtu))
    s.insert(i.table_entry(Table.INT_EGRESS_SINK_PORTS, {"egress_port": HOST_B_PORT}, action=Action.INT_EGRESS_MARK_SINK))
    s.modify(i.table_entry(Table.INT_EGRESS_REPORT_CONFIG, action=Action.INT_EGRESS_CONFIGURE_REPORT, default=True,
                           params={"src_mac": REPORT_SRC_MAC, "dst_mac": REPORT_DST_MAC, "src_ip": REPORT_SRC_IP,
                                   "dst_ip": REPORT_DST_IP, "dst_port": REPORT_PORT}))
    s.insert(E.clone_session(500, TELEMETRY))
    s.insert(i.table_entry(Table.ECN_ECN_CONFIG, {"egress_port": FABRIC},
                           action=Action.ECN_SET_THRESHOLDS,
                           params={"kmin": KMIN, "kmax": KMAX, "pmax": PMAX}))


def _int_config(i, mtu: int) -> p4runtime_pb2.TableEntry:
    return i.table_entry(Table.INT_EGRESS_INT_CONFIG, action=Action.INT_EGRESS_CONFIGURE, default=True,
                         params={"switch_id": SWITCH_ID, "mtu": mtu})


def _set_mtu(mtu: int) -> Step:
    def run(s: Setup) -> bytes:
        s.modify(_int_config(s.p4info, mtu))
        return f"mtu {mtu}".encode()
    return Step(run)


def _read_report_seq(s: Setup) -> bytes:
    if s.target == "bmv2":          # PI: register reads are not supported
        value = int(s.bmv2_thrift(f"print(c.bm_register_read(0, '{Register.INT_EGRESS_REPORT_SEQ}', 0))").split()[-1])
    else:
        reg_id = next(r.preamble.id for r in s.p4info.message.registers if r.preamble.name == Register.INT_EGRESS_REPORT_SEQ)
        reg = p4runtime_pb2.RegisterEntry(register_id=reg_id)
        reg.index.index = 0
        (e,) = s.read(reg)
        value = int.from_bytes(e.register_entry.data.bitstring, "big")
    return f"report_seq {value}".encode()


def _read_ecn_marked(s: Setup) -> bytes:
    cells = {e.counter_entry.index.index: e.counter_entry.data.packet_count
             for e in s.read(s.p4info.counter_entry(Counter.ECN_ECN_MARKED, FABRIC))}
    return f"ecn_marked[{FABRIC}] {cells.get(FABRIC, 0)}".encode()


# --- frames ---------------------------------------------------------------------------------------
def _ip(dst: str, **kw):
    if ":" in dst:
        tc = kw.pop("tos", 0)
        return IPv6(src="2001:db8:1::1", dst=dst, tc=tc, hlim=64, **kw)
    return IP(src="10.0.1.1", dst=dst, ttl=64, id=7, **kw)


def udp(dst: str, sport=4000, dport=4791, payload=b"U" * 37, **kw) -> bytes:
    return raw(Ether(dst=ROUTER_MAC, src=HOST_A) / _ip(dst, **kw) / UDP(sport=sport, dport=dport) / payload)


def tcp(dst: str, payload=b"T" * 100, options=(("MSS", 1460),), **kw) -> bytes:
    return raw(Ether(dst=ROUTER_MAC, src=HOST_A) / _ip(dst, **kw)
               / TCP(sport=5000, dport=80, flags="PA", seq=1, options=list(options)) / payload)


def _ones(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


class Frame:
    """Offsets of an Ethernet / IPv4 (no options) or IPv6 / TCP or UDP frame."""

    def __init__(self, frame: bytes, l2: int = 14):
        self.b = bytearray(frame)
        self.l3 = l2
        self.v6 = self.b[l2] >> 4 == 6
        self.l4 = l2 + (40 if self.v6 else 20)
        self.proto = self.b[l2 + 6] if self.v6 else self.b[l2 + 9]
        self.tcp = self.proto == 6
        self.l4_fixed = 20 if self.tcp else 8          # INT goes right after the fixed header
        self.csum_at = self.l4 + (16 if self.tcp else 6)

    @property
    def dscp(self) -> int:
        return ((int.from_bytes(self.b[self.l3:self.l3 + 2], "big") >> 6) & 0x3F) if self.v6 else self.b[self.l3 + 1] >> 2

    @dscp.setter
    def dscp(self, v: int) -> None:
        if self.v6:
            w = int.from_bytes(self.b[self.l3:self.l3 + 2], "big")
            self.b[self.l3:self.l3 + 2] = ((w & ~(0x3F << 6)) | (v << 6)).to_bytes(2, "big")
        else:
            self.b[self.l3 + 1] = (v << 2) | (self.b[self.l3 + 1] & 3)

    @property
    def ip_end(self) -> int:
        n = int.from_bytes(self.b[self.l3 + 4:self.l3 + 6], "big") + 40 if self.v6 else \
            int.from_bytes(self.b[self.l3 + 2:self.l3 + 4], "big")
        return self.l3 + n

    def grow(self, n: int) -> None:
        """IP payload length / total length and UDP length += n."""
        at = self.l3 + (4 if self.v6 else 2)
        self.b[at:at + 2] = (int.from_bytes(self.b[at:at + 2], "big") + n).to_bytes(2, "big")
        if not self.tcp:
            at = self.l4 + 4
            self.b[at:at + 2] = (int.from_bytes(self.b[at:at + 2], "big") + n).to_bytes(2, "big")

    def fix_checksums(self) -> None:
        if not self.v6:
            self.b[self.l3 + 10:self.l3 + 12] = b"\0\0"
            self.b[self.l3 + 10:self.l3 + 12] = (~_ones(bytes(self.b[self.l3:self.l4])) & 0xFFFF).to_bytes(2, "big")
        if not self.tcp and self.b[self.csum_at:self.csum_at + 2] == b"\0\0":
            return                                         # UDP without a checksum stays so
        self.b[self.csum_at:self.csum_at + 2] = b"\0\0"
        self.b[self.csum_at:self.csum_at + 2] = self.l4_checksum().to_bytes(2, "big")

    def _l4_sum(self) -> int:
        """Ones'-complement sum of the IP pseudo-header and the L4 segment as it stands."""
        seg = bytes(self.b[self.l4:self.ip_end])
        ip = self.b[self.l3:self.l4]
        if self.v6:
            pseudo = bytes(ip[8:40]) + len(seg).to_bytes(4, "big") + bytes([0, 0, 0, self.proto])
        else:
            pseudo = bytes(ip[12:20]) + bytes([0, self.proto]) + len(seg).to_bytes(2, "big")
        return _ones(pseudo + seg)

    def l4_checksum(self) -> int:
        c = ~self._l4_sum() & 0xFFFF
        return 0xFFFF if c == 0 and not self.tcp else c

    def l4_ok(self) -> bool:
        if not self.tcp and self.b[self.csum_at:self.csum_at + 2] == b"\0\0":
            return True
        return self._l4_sum() == 0xFFFF

    @property
    def int_at(self) -> int:
        return self.l4 + self.l4_fixed

    def has_our_int(self) -> bool:
        if not self.dscp & INT_DSCP_BIT or len(self.b) < self.int_at + 16:
            return False
        sh, md = SHIM.unpack(self.b[self.int_at:]), MD.unpack(self.b[self.int_at + 4:])
        return (sh["type"], sh["npt"], md["ver"], md["hop_ml"], md["bitmap"], md["domain"]) == \
            (1, 0, 2, 8, INSTRUCTIONS, 0) and (sh["len"] - 3) % 8 == 0 and sh["len"] <= 51

    def hops(self) -> list[dict]:
        n = (SHIM.unpack(self.b[self.int_at:])["len"] - 3) // 8
        return [HOP.unpack(self.b[self.int_at + 16 + 32 * k:]) for k in range(n)]


def routed(frame: bytes, dmac: str) -> bytes:
    """The frame as the switch routes it: MACs rewritten, TTL / hop limit - 1."""
    p = Ether(frame)
    p[Ether].src, p[Ether].dst = ROUTER_MAC, dmac
    if IP in p:
        p[IP].ttl -= 1
        del p[IP].chksum
    else:
        p[IPv6].hlim -= 1
    return raw(p)


def int_headers(dscp: int, rhc: int, hops: list[dict], d=0, e=0, m=0, shim=None, md=None) -> bytes:
    return (SHIM.pack(**{"type": 1, "len": 3 + 8 * len(hops), "dscp": dscp, **(shim or {})})
            + MD.pack(**{"ver": 2, "hop_ml": 8, "rhc": rhc, "bitmap": INSTRUCTIONS, "d": d, "e": e, "m": m,
                         **(md or {})})
            + b"".join(HOP.pack(**h) for h in hops))


def with_int(frame: bytes, headers: bytes, dscp: int | None = None, fix: bool = True) -> bytes:
    """``frame`` (no INT) with INT headers after its fixed L4 header, DSCP with the INT bit
    (or ``dscp``), lengths and checksums as they must be."""
    f = Frame(frame)
    orig_dscp = f.dscp
    f.b[f.int_at:f.int_at] = headers
    f.grow(len(headers))
    f.dscp = orig_dscp | INT_DSCP_BIT if dscp is None else dscp
    if fix:
        f.fix_checksums()
    return bytes(f.b)


def upstream_hop(k: int) -> dict:
    return {"switch_id": 0x0B00 + k, "ig_port": 1, "eg_port": 2, "latency": 50 + k, "qocc": k,
            "ig_ts": 1_000_000 * (k + 1), "eg_ts": 1_000_000 * (k + 1) + 50 + k}


def int_in(frame: bytes, nhops: int, rhc: int, **kw) -> bytes:
    """``frame`` as an upstream INT source / transit left it (nhops hops, newest first)."""
    dscp = Frame(frame).dscp
    hops = [upstream_hop(k) for k in reversed(range(nhops))]
    return with_int(frame, int_headers(dscp, rhc, hops, **kw))


# --- what the switch's own hop must look like ---------------------------------------------------
_last_ts = [0]


def own_hop(out: Frame, eg_port: int, qocc: int = 0) -> dict:
    """The first hop of ``out``, checked to be this switch's (times plausible), as a dict to
    build the expected frame with."""
    h = out.hops()[0]
    assert h["switch_id"] == SWITCH_ID and h["ig_port"] == 1 and h["eg_port"] == eg_port, h
    assert h["qid"] == 0 and h["qocc"] == qocc, h
    assert 0 < h["ig_ts"] <= h["eg_ts"] < 1 << 48, f"timestamps {h['ig_ts']} {h['eg_ts']}"
    assert h["latency"] == h["eg_ts"] - h["ig_ts"] < 1_000_000, f"hop latency {h['latency']} µs"
    assert h["ig_ts"] >= _last_ts[0], "ingress timestamps go backwards"
    _last_ts[0] = h["ig_ts"]
    return h


def report(inner: bytes, seq: int, ipv6: bool) -> bytes:
    """The telemetry report of an INT packet whose sink view (from the IP header) is ``inner``."""
    f = Frame(b"\0" * 12 + (b"\x86\xdd" if ipv6 else b"\x08\x00") + inner)
    headers = f.int_at + 4 + 4 * SHIM.unpack(f.b[f.int_at:])["len"] - 14
    words = headers // 4 + min((len(inner) - headers) // 4, REPORT_PAYLOAD_WORDS)
    body = (GROUP.pack(ver=2, seq=seq, node_id=SWITCH_ID)
            + INDIV.pack(rep_type=1, in_type=5 if ipv6 else 4, rep_len=2 + words, f=1)
            + MAIN.pack() + inner[:4 * words])
    return raw(Ether(src=REPORT_SRC_MAC, dst=REPORT_DST_MAC)
               / IP(src=REPORT_SRC_IP, dst=REPORT_DST_IP, flags="DF", id=0, ttl=64)
               / UDP(sport=0, dport=REPORT_PORT, chksum=0) / body)


def _blank(f: Frame, base: int = 0) -> None:
    for k, h in enumerate(f.hops()):
        if h["switch_id"] == SWITCH_ID:
            at = f.int_at + 16 + 32 * k
            for off, n in HOP_TIME_FIELDS:
                f.b[at + off:at + off + n] = b"\0" * n
    f.b[f.csum_at:f.csum_at + 2] = b"\0\0"


def normalise(port: int, frame: bytes) -> bytes:
    """Blank this switch's hop times and the L4 checksums they enter (INT packets, reports)."""
    try:
        if port == TELEMETRY:
            f = Frame(b"\0" * 12 + (b"\x86\xdd" if frame[62] >> 4 == 6 else b"\x08\x00") + frame[62:])
            if f.has_our_int():
                _blank(f)
                return frame[:62] + bytes(f.b[14:])
            return frame
        f = Frame(frame)
        if f.proto in (6, 17) and f.has_our_int():
            _blank(f)
            return bytes(f.b)
    except (IndexError, AssertionError):
        pass
    return frame


def _expect_int(got: bytes, expected_without_times, eg_port: int) -> bytes:
    """Check an INT packet against the expected one, whose builder gets this switch's hop."""
    out = Frame(got)
    assert out.has_our_int(), f"not an INT packet: {got.hex()}"
    assert out.l4_ok(), f"bad TCP/UDP checksum: {got.hex()}"
    want = expected_without_times(own_hop(out, eg_port))
    assert got == want, f"\n got  {got.hex()}\n want {want.hex()}"
    return want


def _ports(got) -> list[int]:
    return [p for p, _ in got]


# === scenario 1: source + sink on one switch, sink of upstream INT, D bit ========================
S1 = [
    Send(1, udp("10.0.3.9", tos=(0x06 << 2) | 2)),            # 0 UDP, DSCP 6, ECT(0)
    Send(1, tcp("10.0.3.9", tos=0x28)),                       # 1 TCP with an option, payload > 16 words
    Send(1, udp("2001:db8:3::9", tos=0x48, payload=b"abcdefgh")),   # 2 IPv6
    Send(1, raw(Ether(dst=ROUTER_MAC, src=HOST_A) / _ip("10.0.3.9") / UDP(sport=1, dport=2, chksum=0)
                / b"nocsum")),                                 # 3 UDP without checksum
    Send(1, udp("10.0.2.9", tos=0x10)),                       # 4 RoCEv2 to the fabric: source only
    Send(1, udp("10.0.2.9", dport=80)),                       # 5 not watched
    Send(1, int_in(udp("10.0.3.9", tos=(0x0A << 2)), nhops=2, rhc=3)),   # 6 sink of 2 upstream hops
    Send(1, int_in(udp("10.0.3.9"), nhops=1, rhc=4, d=1)),    # 7 D: reported, then discarded
    Step(_read_report_seq),                                    # 8 six reports so far
]


def _sink_expect(got, sent: bytes, seq: int, rhc_in: int, plain: bytes | None) -> None:
    """Host B gets ``plain`` (the packet without INT; None: discarded, D bit) routed, port 4
    the report: the sink's view of ``sent`` (its INT headers, if any, plus the sink's hop)."""
    assert _ports(got) == ([HOST_B_PORT, TELEMETRY] if plain is not None else [TELEMETRY]), got
    frames = dict(got)
    if plain is not None:
        assert frames[HOST_B_PORT] == routed(plain, HOST_B), \
            f"host B:\n got  {frames[HOST_B_PORT].hex()}\n want {routed(plain, HOST_B).hex()}"
    rep = frames[TELEMETRY]
    ipv6 = rep[62] >> 4 == 6
    view = Frame(b"\0" * 12 + (b"\x86\xdd" if ipv6 else b"\x08\x00") + rep[62:])
    hop = own_hop(view, HOST_B_PORT)
    src = Frame(sent)
    if src.dscp & INT_DSCP_BIT:           # INT from upstream: sink only
        sh, md = SHIM.unpack(src.b[src.int_at:]), MD.unpack(src.b[src.int_at + 4:])
        headers = int_headers(sh["dscp"], rhc_in - 1, [hop] + src.hops(), d=md["d"])
        want_view = with_int(routed(_strip(sent), HOST_B), headers, dscp=src.dscp)
    else:                                 # source and sink
        want_view = with_int(routed(sent, HOST_B), int_headers(src.dscp, rhc_in - 1, [hop]))
    inner = want_view[14:]
    want = report(inner, seq, ipv6)
    assert rep == want, f"report:\n got  {rep.hex()}\n want {want.hex()}"
    # lengths: IPv4 total / UDP length cover the frame, Report Length the rest
    assert int.from_bytes(rep[16:18], "big") == len(rep) - 14 and int.from_bytes(rep[38:40], "big") == len(rep) - 34
    assert (INDIV.unpack(rep[50:])["rep_len"] - 2) * 4 == len(rep) - 62
    if len(rep) - 62 == len(inner):       # not truncated: its checksum must hold as well
        assert view.l4_ok(), "report inner TCP/UDP checksum"


def _strip(int_frame: bytes) -> bytes:
    """An INT packet without its INT headers, DSCP and lengths restored (checksum as given)."""
    f = Frame(int_frame)
    sh = SHIM.unpack(f.b[f.int_at:])
    n = 4 + 4 * sh["len"]
    del f.b[f.int_at:f.int_at + n]
    f.grow(-n)
    f.dscp = sh["dscp"]
    f.fix_checksums()
    return bytes(f.b)


def _expect_s1(outputs) -> None:
    _last_ts[0] = 0
    p = [x.frame for x in S1 if isinstance(x, Send)]
    for k in range(4):
        _sink_expect(outputs[k], p[k], seq=k, rhc_in=MAX_HOP_B, plain=p[k])
    # 4: source only, the INT packet leaves to the fabric
    assert _ports(outputs[4]) == [FABRIC], outputs[4]
    _expect_int(outputs[4][0][1], lambda h: with_int(routed(p[4], NEIGHBOR),
                                                      int_headers(0x04, MAX_HOP_ROCE - 1, [h])), FABRIC)
    assert outputs[5] == [(FABRIC, routed(p[5], NEIGHBOR))]
    _sink_expect(outputs[6], p[6], seq=4, rhc_in=3, plain=udp("10.0.3.9", tos=(0x0A << 2)))
    _sink_expect(outputs[7], p[7], seq=5, rhc_in=4, plain=None)
    assert outputs[8] == [(CONTROL, b"report_seq 6")]


# === scenario 2: transit: push, E, full stack, M (transit and source) ==========================
def _roce(payload_len: int) -> bytes:
    return udp("10.0.2.9", payload=b"R" * payload_len)


S2 = [
    Send(1, int_in(udp("10.0.2.9", sport=1), nhops=1, rhc=3)),              # 0 push a second hop
    Send(1, int_in(tcp("2001:db8:2::9", payload=b"six"), nhops=1, rhc=2)),  # 1 IPv6 / TCP
    Send(1, int_in(udp("10.0.2.9", sport=2), nhops=2, rhc=0)),              # 2 Remaining Hop Count 0: E
    Send(1, int_in(udp("10.0.2.9", sport=3), nhops=6, rhc=2)),              # 3 stack full: E
    Send(1, int_in(udp("10.0.2.9", sport=4), nhops=1, rhc=3, e=1)),         # 4 E stays set, still pushes
    _set_mtu(150),                                                           # 5
    Send(1, int_in(udp("10.0.2.9", sport=5, payload=b"m" * 60), nhops=1, rhc=3)),   # 6 IP 136 + 32 > 150: M
    Send(1, int_in(udp("10.0.2.9", sport=6, payload=b"m" * 28), nhops=1, rhc=3)),   # 7 104 + 32 <= 150: push
    Send(1, _roce(90)),                          # 8 source: 118 + 16 fits, + 32 does not: INT, M, no hop
    _set_mtu(130),                                                           # 9
    Send(1, _roce(90)),                          # 10 118 + 16 > 130: not made an INT packet
    _set_mtu(1500),                                                          # 11
]


def _transit_want(sent: bytes, push: bool, e=None, m=None):
    src = Frame(sent)
    sh, md = SHIM.unpack(src.b[src.int_at:]), MD.unpack(src.b[src.int_at + 4:])
    plain = _strip(sent)
    hops = src.hops()

    def build(h):
        return with_int(routed(plain, NEIGHBOR),
                        int_headers(sh["dscp"], md["rhc"] - (1 if push else 0), ([h] if push else []) + hops,
                                    d=md["d"], e=md["e"] if e is None else e, m=md["m"] if m is None else m),
                        dscp=src.dscp)
    return build


def _expect_s2(outputs) -> None:
    _last_ts[0] = 0
    sends = {k: x.frame for k, x in enumerate(S2) if isinstance(x, Send)}
    for k in (0, 1, 4, 7):
        assert _ports(outputs[k]) == [FABRIC], (k, outputs[k])
        _expect_int(outputs[k][0][1], _transit_want(sends[k], push=True), FABRIC)
    for k, e, m in ((2, 1, None), (3, 1, None), (6, None, 1)):
        assert _ports(outputs[k]) == [FABRIC], (k, outputs[k])
        want = _transit_want(sends[k], push=False, e=e, m=m)(None)
        assert outputs[k][0][1] == want, f"packet {k}:\n got  {outputs[k][0][1].hex()}\n want {want.hex()}"
    assert outputs[5] == [(CONTROL, b"mtu 150")] and outputs[9] == [(CONTROL, b"mtu 130")]
    want = with_int(routed(sends[8], NEIGHBOR), int_headers(0, MAX_HOP_ROCE, [], m=1))
    assert outputs[8] == [(FABRIC, want)], f"\n got  {outputs[8]}\n want {want.hex()}"
    assert outputs[10] == [(FABRIC, routed(sends[10], NEIGHBOR))]


# === scenario 3: what is not our INT passes untouched ===========================================
def _foreign(label: str, dst="10.0.2.9", **kw) -> bytes:
    return int_in(udp(dst, sport=len(label)), nhops=1, rhc=3, **kw)


S3_FRAMES = [
    _foreign("bitmap", md={"bitmap": 0xFF00}),
    _foreign("hop ml 6", md={"hop_ml": 6}),
    _foreign("ver 1", md={"ver": 1}),
    _foreign("domain", md={"domain": 5}),
    _foreign("shim type 3", shim={"type": 3}),
    _foreign("npt 1", shim={"npt": 1}),
    _foreign("bitmap to the sink port", dst="10.0.3.9", md={"bitmap": 0xFF00}),
    with_int(udp("10.0.2.9"), SHIM.pack(type=1, len=12) + MD.pack(ver=2, hop_ml=8, rhc=3, bitmap=INSTRUCTIONS)
             + b"\x11" * 36),                                            # shim length not 3 + 8k
    with_int(udp("10.0.2.9"), SHIM.pack(type=1, len=59) + MD.pack(ver=2, hop_ml=8, rhc=3, bitmap=INSTRUCTIONS)
             + b"".join(HOP.pack(switch_id=k) for k in range(7))),       # 7 hops: more than MAX_INT_HOPS
    with_int(udp("10.0.2.9", payload=b""), SHIM.pack(type=1, len=19)
             + MD.pack(ver=2, hop_ml=8, rhc=3, bitmap=INSTRUCTIONS) + HOP.pack(switch_id=1) + b"\x22" * 10),
    udp("10.0.2.9", tos=0xB8, payload=b"EF, no INT here " * 3),          # DSCP EF has the INT bit
    udp("10.0.2.9", tos=0xB8, payload=b"short"),                          # ... and too short for INT
    udp("10.0.3.9", tos=0xB8, payload=b"EF to host B, watched" * 2),      # watched, but has the bit
]
S3 = [Send(1, f) for f in S3_FRAMES]


def _expect_s3(outputs) -> None:
    for k, (sent, got) in enumerate(zip(S3_FRAMES, outputs)):
        to_b = IP(sent[14:]).dst.startswith("10.0.3.")
        port, mac = (HOST_B_PORT, HOST_B) if to_b else (FABRIC, NEIGHBOR)
        assert got == [(port, routed(sent, mac))], f"packet {k}:\n got  {got}\n want {routed(sent, mac).hex()}"


# === scenario 4: ECN: an idle queue, then bursts into a queue drained at 100 packets/s ===========
ECN_RATE_PPS, BURST = 100, 30


def _ecn_step(kmin: int, kmax: int, pmax: int, *cli: str) -> Step:
    def run(s: Setup) -> bytes:
        s.modify(s.p4info.table_entry(Table.ECN_ECN_CONFIG, {"egress_port": FABRIC},
                                      action=Action.ECN_SET_THRESHOLDS,
                                      params={"kmin": kmin, "kmax": kmax, "pmax": pmax}))
        if cli:
            s.switch_cli(*cli)
        return f"ecn {kmin} {kmax} {pmax} {' / '.join(cli)}".encode()
    return Step(run)


def _ecn_marked_some(s: Setup) -> bytes:
    cells = {e.counter_entry.index.index: e.counter_entry.data.packet_count
             for e in s.read(s.p4info.counter_entry(Counter.ECN_ECN_MARKED, FABRIC))}
    return f"ecn_marked[{FABRIC}] > 0: {cells.get(FABRIC, 0) > 0}".encode()


def _ce(frame: bytes) -> bytes:
    p = Ether(frame)
    if IP in p:
        p[IP].tos |= 3
        del p[IP].chksum
    else:
        p[IPv6].tc |= 3
    return raw(p)


S4_SINGLES = [udp("10.0.2.9", dport=80, tos=e) for e in (0, 1, 2, 3)] + [tcp("2001:db8:2::9", tos=e) for e in (1, 2)]
ECT0_BURST = Send(1, udp("10.0.2.9", dport=80, tos=(0x0C << 2) | 2), repeat=BURST, count=BURST)
NOT_ECT_BURST = Send(1, udp("10.0.2.9", dport=81, tos=0x0C << 2), repeat=BURST, count=BURST)
ECT1_BURST = Send(1, udp("2001:db8:2::9", dport=82, tos=1), repeat=BURST, count=BURST)
S4 = [Send(1, f) for f in S4_SINGLES] + [
    Step(_read_ecn_marked),                                 # 6: depth 0 never marks
    _ecn_step(8, 8, 0, f"set_queue_rate {ECN_RATE_PPS} {FABRIC}"),    # 7: mark exactly above depth 8
    ECT0_BURST,                                             # 8: the first ones pass, the rest CE
    NOT_ECT_BURST,                                          # 9: never marked
    _ecn_step(0, 1000, 0),                                  # 10: RED with Pmax 0
    ECT1_BURST,                                             # 11: never marked
    Step(_ecn_marked_some),                                 # 12
    _ecn_step(0, 0, 0xFFFF, f"set_queue_rate 0 {FABRIC}"),  # 13
]


def _expect_s4(outputs) -> None:
    for k, sent in enumerate(S4_SINGLES):
        assert outputs[k] == [(FABRIC, routed(sent, NEIGHBOR))], f"packet {k}: {outputs[k]}"
    assert outputs[6] == [(CONTROL, f"ecn_marked[{FABRIC}] 0".encode())]
    plain, marked = routed(ECT0_BURST.frame, NEIGHBOR), _ce(routed(ECT0_BURST.frame, NEIGHBOR))
    frames = [f for p, f in outputs[8] if p == FABRIC]
    assert len(frames) == BURST and set(frames) <= {plain, marked}, outputs[8]
    n_ce = frames.count(marked)
    # depths 0..8 (at least the first nine) are not marked; the queue drains 100 per second
    # while the burst comes in within milliseconds, so most of the rest sees more than 8
    assert BURST - n_ce >= 9 and n_ce >= BURST - 9 - 5, f"{n_ce} of {BURST} marked"
    assert outputs[9] == [(FABRIC, routed(NOT_ECT_BURST.frame, NEIGHBOR))] * BURST
    assert outputs[11] == [(FABRIC, routed(ECT1_BURST.frame, NEIGHBOR))] * BURST
    assert outputs[12] == [(CONTROL, f"ecn_marked[{FABRIC}] > 0: True".encode())]


SCENARIOS = [
    Scenario("fabric_int_source_sink", "fabric", S1, setup=_setup, ports=4, normalise=normalise, expect=_expect_s1),
    Scenario("fabric_int_transit", "fabric", S2, setup=_setup, ports=4, normalise=normalise, expect=_expect_s2),
    Scenario("fabric_int_foreign", "fabric", S3, setup=_setup, ports=4, normalise=normalise, expect=_expect_s3),
    Scenario("fabric_ecn", "fabric", S4, setup=_setup, ports=4, expect=_expect_s4),
]
