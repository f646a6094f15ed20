"""Decoder of Telemetry Report v2.0 packets that carry INT-MD v2.1 metadata (pure functions).

Input: the UDP payload of one telemetry report packet (what the collector's socket receives).
Output: one `Report` per individual report, with the flow's 5-tuple (`FlowKey`) and the INT
metadata of every hop (`HopRecord`) **in path order** (source first, reporting switch last: the
INT stack is pushed newest first, so it is reversed here).

What is decoded (telemetry_report.mdk §4, INT.mdk §5.6-5.7):

* Telemetry Report Group Header v2 (8 bytes) followed by one or more Individual Report Headers
  (4 bytes each); ``Report Length`` 0xFF means "up to the end of the payload".
* RepType 1 (INT): the 8-byte main contents; RepMdBits metadata (MD Length words), when present,
  is the reporting node's own hop (INT.mdk: sink option 2) and is appended as the last hop, with
  the group header's Node ID as its switch id. RepType 0 (Inner Only) has no main contents.
* InType 3 (Ethernet, optionally one VLAN tag), 4 (IPv4), 5 (IPv6): the truncated inner packet,
  L4 = UDP or TCP (fixed 20 bytes), then the INT shim + INT-MD header + metadata stack, in any
  of INT over TCP/UDP's three forms:
  - NPT 0 (presence flagged by a DSCP bit; aifabric's choice, see p4src/README.md): the shim
    follows the L4 header;
  - NPT 1: the shim follows the UDP header, whose destination port it replaced (the shim holds
    the original one);
  - NPT 2: a UDP header was inserted before the shim, the original L4 header follows the stack
    (the spec's own example).
  The instruction bitmap is decoded generically: 4 bytes of metadata per set bit, 8 for bits 4-6,
  Hop ML words per hop (words beyond the bitmap are domain-specific metadata and are skipped).
  A metadata value of all ones means "not available" and decodes to None.

Every inconsistency raises `MalformedReport` with a short ``reason`` (one of `Reason`) and a
message naming the field and the numbers that did not add up; nothing else escapes for any
input (the tests feed random bytes and every truncation of valid reports).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Union

Buffer = Union[bytes, bytearray, memoryview]

TELEMETRY_REPORT_VERSION = 2
INT_MD_VERSION = 2
INT_TYPE_MD = 1
REPORT_TYPE_INNER_ONLY = 0
REPORT_TYPE_INT = 1
INNER_TYPE_NONE = 0
INNER_TYPE_ETHERNET = 3
INNER_TYPE_IPV4 = 4
INNER_TYPE_IPV6 = 5
REPORT_LENGTH_TO_END = 0xFF
SEQUENCE_BITS = 22

IP_PROTO_TCP = 6
IP_PROTO_UDP = 17
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = 0x8100
TCP_FIXED_HEADER = 20
UDP_HEADER = 8
INT_SHIM_BYTES = 4
INT_MD_HEADER_BYTES = 12
# aifabric's INT presence flag: this bit of the 6-bit DSCP (p4src/README.md, INT_DSCP_BIT).
DEFAULT_INT_DSCP_BIT = 0x20

# Instruction / RepMdBits bit numbers (bit 0 is the most significant bit of the 16-bit field).
BIT_NODE_ID = 0
BIT_L1_PORTS = 1
BIT_HOP_LATENCY = 2
BIT_QUEUE = 3
BIT_INGRESS_TS = 4
BIT_EGRESS_TS = 5
BIT_L2_PORTS = 6
BIT_TX_UTIL = 7
BIT_BUFFER = 8
BIT_CHECKSUM_COMPLEMENT = 15
_EIGHT_BYTE_BITS = (BIT_INGRESS_TS, BIT_EGRESS_TS, BIT_L2_PORTS)


class Reason:
    """Why a report was rejected (the collector counts per reason)."""

    TRUNCATED = "truncated"  # fewer bytes than a header or a stated length needs
    VERSION = "bad_version"  # group header or INT-MD header version is not 2
    LENGTH = "length_mismatch"  # lengths that do not add up
    UNSUPPORTED = "unsupported"  # RepType / InType / INT header type this decoder does not know
    INNER_HEADER = "bad_inner_header"  # inner IP header that contradicts InType or itself
    NO_REPORTS = "no_reports"  # a group header and nothing else

    ALL = (TRUNCATED, VERSION, LENGTH, UNSUPPORTED, INNER_HEADER, NO_REPORTS)


class MalformedReport(ValueError):
    """A telemetry report that cannot be decoded; ``reason`` is one of `Reason`."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {message}")


@dataclass(frozen=True, slots=True)
class FlowKey:
    """The monitored packet's 5-tuple (ports 0 when the protocol has none or they were cut)."""

    src_ip: str
    dst_ip: str
    protocol: int
    src_port: int
    dst_port: int

    def __str__(self) -> str:
        proto = {IP_PROTO_TCP: "tcp", IP_PROTO_UDP: "udp"}.get(self.protocol, str(self.protocol))
        return f"{proto} {self.src_ip}:{self.src_port} -> {self.dst_ip}:{self.dst_port}"


@dataclass(frozen=True, slots=True)
class HopRecord:
    """One INT hop. Units are the fabric's (p4src/README.md): latency and timestamps in
    microseconds, queue occupancy in packets. None: not requested, or the hop said "unavailable"."""

    switch_id: int | None
    ingress_port: int | None = None
    egress_port: int | None = None
    hop_latency_us: int | None = None
    queue_id: int | None = None
    queue_occupancy: int | None = None
    ingress_ts: int | None = None
    egress_ts: int | None = None
    l2_ingress_port: int | None = None
    l2_egress_port: int | None = None
    egress_tx_util: int | None = None
    buffer_id: int | None = None
    buffer_occupancy: int | None = None


@dataclass(frozen=True, slots=True)
class Report:
    """One individual telemetry report with the group header's fields."""

    node_id: int  # the reporting switch (the INT sink)
    hw_id: int
    sequence: int
    report_type: int
    inner_type: int
    dropped: bool
    congested: bool
    tracked: bool
    intermediate: bool
    flow: FlowKey | None  # None when the report carries no inner IP packet
    ip_dscp: int | None  # DSCP / ECN of the inner IP header as reported
    ip_ecn: int | None
    path: tuple[HopRecord, ...]  # source first, reporting switch last
    instruction_bitmap: int | None = None  # None: no INT-MD header in the report
    hop_ml: int | None = None
    remaining_hop_count: int | None = None
    max_hop_exceeded: bool = False  # INT-MD E flag
    mtu_exceeded: bool = False  # INT-MD M flag

    @property
    def hop_count(self) -> int:
        return len(self.path)

    @property
    def has_int(self) -> bool:
        return self.instruction_bitmap is not None


# --- layouts --------------------------------------------------------------------------------

_GROUP = struct.Struct("!II")
_INDIVIDUAL = struct.Struct("!BBBB")
_INT_MAIN = struct.Struct("!HHHH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_IPV6 = struct.Struct("!IHBB16s16s")
_PORTS = struct.Struct("!HH")
_SHIM = struct.Struct("!BBH")
_INT_MD = struct.Struct("!IHHHH")
_ETH_TYPE = struct.Struct("!H")


@dataclass(frozen=True)
class _HopLayout:
    """How to read one hop of a given bitmap: a struct, the names of its values ("queue" and
    "buffer" hold id + occupancy), and a function made for this layout that turns one hop's
    struct values into a HopRecord (generated once per bitmap: decoding is the collector's hot
    path, and a per-field loop costs several times more)."""

    unpack: struct.Struct
    fields: tuple[str, ...]
    build: Callable[..., "HopRecord"]


_ALL_ONES = {"I": 0xFFFFFFFF, "H": 0xFFFF, "Q": 0xFFFFFFFFFFFFFFFF}


@lru_cache(maxsize=256)
def metadata_bytes(bitmap: int) -> int:
    """Bytes of metadata one hop adds for an instruction bitmap (4 per bit, 8 for bits 4-6)."""
    total = 0
    for bit in range(16):
        if bitmap & (0x8000 >> bit):
            total += 8 if bit in _EIGHT_BYTE_BITS else 4
    return total


# (struct codes, field names) per instruction bit; None: 4 reserved bytes, skipped.
_BIT_FIELDS: dict[int, tuple[str, tuple[str, ...]] | None] = {
    BIT_NODE_ID: ("I", ("switch_id",)),
    BIT_L1_PORTS: ("HH", ("ingress_port", "egress_port")),
    BIT_HOP_LATENCY: ("I", ("hop_latency_us",)),
    BIT_QUEUE: ("I", ("queue",)),
    BIT_INGRESS_TS: ("Q", ("ingress_ts",)),
    BIT_EGRESS_TS: ("Q", ("egress_ts",)),
    BIT_L2_PORTS: ("II", ("l2_ingress_port", "l2_egress_port")),
    BIT_TX_UTIL: ("I", ("egress_tx_util",)),
    BIT_BUFFER: ("I", ("buffer",)),
}


@lru_cache(maxsize=256)
def hop_layout(bitmap: int, hop_bytes: int) -> _HopLayout:
    """The layout of one hop of ``hop_bytes`` bytes for ``bitmap`` (cached: bitmaps are few)."""
    fmt = ["!"]
    fields: list[str] = []
    codes: list[str] = []
    for bit in range(16):
        if not bitmap & (0x8000 >> bit):
            continue
        spec = _BIT_FIELDS.get(bit)
        if spec is None:  # reserved bits 9-14 and the checksum complement (bit 15)
            fmt.append("4x")
            continue
        fmt.append(spec[0])
        fields.extend(spec[1])
        codes.extend(spec[0])
    extra = hop_bytes - metadata_bytes(bitmap)
    if extra:
        fmt.append(f"{extra}x")  # domain-specific metadata: skipped
    return _HopLayout(struct.Struct("".join(fmt)), tuple(fields), _make_builder(tuple(fields), tuple(codes)))


def _make_builder(fields: tuple[str, ...], codes: tuple[str, ...]) -> Callable[..., "HopRecord"]:
    """``build(values, switch_id=None) -> HopRecord`` for one layout; all-ones values -> None."""
    args: dict[str, str] = {}
    for i, (name, code) in enumerate(zip(fields, codes)):
        ones = _ALL_ONES[code]
        if name in ("queue", "buffer"):
            args[f"{name}_id"] = f"None if v{i} == {ones} else v{i} >> 24"
            args[f"{name}_occupancy"] = f"None if v{i} == {ones} else v{i} & 0xFFFFFF"
        else:
            args[name] = f"None if v{i} == {ones} else v{i}"
    if "switch_id" in args:
        args["switch_id"] = f"switch_id if v{fields.index('switch_id')} == 0xFFFFFFFF else v{fields.index('switch_id')}"
    else:
        args["switch_id"] = "switch_id"
    unpacked = ", ".join(f"v{i}" for i in range(len(fields)))
    body = ["def build(values, switch_id=None):"]
    if fields:
        body.append(f"    {unpacked}{',' if len(fields) == 1 else ''} = values")
    body.append("    return HopRecord(" + ", ".join(f"{k}={v}" for k, v in args.items()) + ")")
    namespace: dict[str, object] = {"HopRecord": HopRecord}
    exec("\n".join(body), namespace)  # noqa: S102 - code made from the fixed table above
    return namespace["build"]  # type: ignore[return-value]


# --- decoding -------------------------------------------------------------------------------


def decode_reports(payload: Buffer, *, int_dscp_bit: int = DEFAULT_INT_DSCP_BIT) -> list[Report]:
    """Every individual report of one telemetry report packet (its UDP payload).

    Raises MalformedReport (and nothing else) when the payload is not a valid report."""
    try:
        return _decode(memoryview(payload), int_dscp_bit)
    except MalformedReport:
        raise
    except (struct.error, ValueError, IndexError, OverflowError, TypeError) as err:  # a bug's safety net
        raise MalformedReport(Reason.LENGTH, f"undecodable: {type(err).__name__}: {err}") from None


def _decode(data: memoryview, int_dscp_bit: int) -> list[Report]:
    size = len(data)
    if size < _GROUP.size:
        raise MalformedReport(Reason.TRUNCATED, f"{size} bytes, the group header alone needs {_GROUP.size}")
    word, node_id = _GROUP.unpack_from(data, 0)
    version = word >> 28
    if version != TELEMETRY_REPORT_VERSION:
        raise MalformedReport(Reason.VERSION, f"group header version {version}, expected {TELEMETRY_REPORT_VERSION}")
    hw_id = (word >> SEQUENCE_BITS) & 0x3F
    sequence = word & ((1 << SEQUENCE_BITS) - 1)
    offset = _GROUP.size
    reports: list[Report] = []
    while offset < size:
        if size - offset < _INDIVIDUAL.size:
            raise MalformedReport(
                Reason.LENGTH,
                f"{size - offset} bytes left after report {len(reports)}: not an individual report header "
                f"({_INDIVIDUAL.size} bytes) - the UDP payload ({size} bytes) and the report lengths do not add up",
            )
        types, rep_len, md_len, flags = _INDIVIDUAL.unpack_from(data, offset)
        body = offset + _INDIVIDUAL.size
        end = size if rep_len == REPORT_LENGTH_TO_END else body + 4 * rep_len
        if end > size:
            raise MalformedReport(
                Reason.TRUNCATED,
                f"report {len(reports)}: Report Length {rep_len} words ends at byte {end}, the payload has {size}",
            )
        reports.append(
            _individual(data[body:end], types >> 4, types & 0xF, md_len, flags, node_id, hw_id, sequence, int_dscp_bit)
        )
        offset = end
    if not reports:
        raise MalformedReport(Reason.NO_REPORTS, "a group header and no individual report")
    return reports


def _individual(
    body: memoryview,
    rep_type: int,
    in_type: int,
    md_len: int,
    flags: int,
    node_id: int,
    hw_id: int,
    sequence: int,
    int_dscp_bit: int,
) -> Report:
    sink_hop: HopRecord | None = None
    if rep_type == REPORT_TYPE_INT:
        if len(body) < _INT_MAIN.size + 4 * md_len:
            raise MalformedReport(
                Reason.LENGTH,
                f"INT report: main contents ({_INT_MAIN.size} bytes) + MD Length {md_len} words exceed "
                f"the Report Length ({len(body)} bytes)",
            )
        rep_md_bits, ds_id, ds_md_bits, _ = _INT_MAIN.unpack_from(body, 0)
        if rep_md_bits & 0x8000:
            raise MalformedReport(Reason.UNSUPPORTED, "RepMdBits bit 0 is reserved but set")
        base = metadata_bytes(rep_md_bits)
        if base > 4 * md_len or (not ds_md_bits and base != 4 * md_len):
            raise MalformedReport(
                Reason.LENGTH,
                f"RepMdBits {rep_md_bits:#06x} need {base} bytes of metadata, MD Length says {4 * md_len}",
            )
        if rep_md_bits:
            layout = hop_layout(rep_md_bits, 4 * md_len)
            values = layout.unpack.unpack_from(body, _INT_MAIN.size)
            sink_hop = layout.build(values, node_id)
        inner = body[_INT_MAIN.size + 4 * md_len :]
    elif rep_type == REPORT_TYPE_INNER_ONLY:
        inner = body
    else:
        raise MalformedReport(Reason.UNSUPPORTED, f"RepType {rep_type} (only 0 Inner Only and 1 INT are decoded)")

    flow, dscp, ecn, md = _inner(inner, in_type, int_dscp_bit)
    path = md.path if md is not None else ()
    if sink_hop is not None:
        path = path + (sink_hop,)
    return Report(
        node_id=node_id,
        hw_id=hw_id,
        sequence=sequence,
        report_type=rep_type,
        inner_type=in_type,
        dropped=bool(flags & 0x80),
        congested=bool(flags & 0x40),
        tracked=bool(flags & 0x20),
        intermediate=bool(flags & 0x10),
        flow=flow,
        ip_dscp=dscp,
        ip_ecn=ecn,
        path=path,
        instruction_bitmap=md.bitmap if md is not None else None,
        hop_ml=md.hop_ml if md is not None else None,
        remaining_hop_count=md.remaining if md is not None else None,
        max_hop_exceeded=md.e if md is not None else False,
        mtu_exceeded=md.m if md is not None else False,
    )


@dataclass(frozen=True, slots=True)
class _IntMd:
    bitmap: int
    hop_ml: int
    remaining: int
    e: bool
    m: bool
    path: tuple[HopRecord, ...]
    end: int  # offset just past the stack
    npt: int
    shim_field: int


def _inner(data: memoryview, in_type: int, int_dscp_bit: int) -> tuple[FlowKey | None, int | None, int | None, _IntMd | None]:
    """Flow key, DSCP, ECN and INT-MD of the inner packet."""
    if in_type == INNER_TYPE_NONE:
        return None, None, None, None
    offset = 0
    if in_type == INNER_TYPE_ETHERNET:
        _need(data, 14, "inner Ethernet header")
        (eth_type,) = _ETH_TYPE.unpack_from(data, 12)
        offset = 14
        if eth_type == ETHERTYPE_VLAN:
            _need(data, 18, "inner VLAN tag")
            (eth_type,) = _ETH_TYPE.unpack_from(data, 16)
            offset = 18
        if eth_type == ETHERTYPE_IPV4:
            in_type = INNER_TYPE_IPV4
        elif eth_type == ETHERTYPE_IPV6:
            in_type = INNER_TYPE_IPV6
        else:
            raise MalformedReport(Reason.UNSUPPORTED, f"inner Ethernet type {eth_type:#06x} is neither IPv4 nor IPv6")
    if in_type == INNER_TYPE_IPV4:
        _need(data, offset + _IPV4.size, "inner IPv4 header")
        ver_ihl, tos, _, _, _, _, proto, _, src, dst = _IPV4.unpack_from(data, offset)
        if ver_ihl >> 4 != 4:
            raise MalformedReport(Reason.INNER_HEADER, f"InType IPv4 but the inner IP version is {ver_ihl >> 4}")
        ihl = ver_ihl & 0xF
        if ihl < 5:
            raise MalformedReport(Reason.INNER_HEADER, f"inner IPv4 IHL {ihl} < 5")
        _need(data, offset + 4 * ihl, f"inner IPv4 header with IHL {ihl}")
        src_ip, dst_ip = socket.inet_ntop(socket.AF_INET, src), socket.inet_ntop(socket.AF_INET, dst)
        offset += 4 * ihl
    elif in_type == INNER_TYPE_IPV6:
        _need(data, offset + _IPV6.size, "inner IPv6 header")
        vtf, _, proto, _, src, dst = _IPV6.unpack_from(data, offset)
        if vtf >> 28 != 6:
            raise MalformedReport(Reason.INNER_HEADER, f"InType IPv6 but the inner IP version is {vtf >> 28}")
        tos = (vtf >> 20) & 0xFF
        src_ip, dst_ip = socket.inet_ntop(socket.AF_INET6, src), socket.inet_ntop(socket.AF_INET6, dst)
        offset += _IPV6.size
    else:
        raise MalformedReport(Reason.UNSUPPORTED, f"InType {in_type} (TLV / domain-specific inner contents)")
    dscp, ecn = tos >> 2, tos & 3
    int_flagged = bool(dscp & int_dscp_bit)

    if proto not in (IP_PROTO_TCP, IP_PROTO_UDP):
        if int_flagged:
            raise MalformedReport(Reason.UNSUPPORTED, f"INT flagged in DSCP over IP protocol {proto} (only TCP/UDP)")
        return FlowKey(src_ip, dst_ip, proto, 0, 0), dscp, ecn, None
    l4_size = UDP_HEADER if proto == IP_PROTO_UDP else TCP_FIXED_HEADER
    if len(data) < offset + _PORTS.size:
        if int_flagged:
            raise MalformedReport(Reason.TRUNCATED, "inner packet ends before the L4 header that precedes INT")
        return FlowKey(src_ip, dst_ip, proto, 0, 0), dscp, ecn, None
    sport, dport = _PORTS.unpack_from(data, offset)
    after_l4 = offset + l4_size

    md: _IntMd | None = None
    if proto == IP_PROTO_UDP and _looks_like_shim(data, after_l4, npt_values=(1, 2)):
        md = _int_md(data, after_l4)
        if md.npt == 1:
            dport = md.shim_field  # the original destination port travels in the shim
        else:  # NPT 2: the original L4 header follows the stack
            proto = md.shim_field & 0xFF
            sport = dport = 0
            if proto in (IP_PROTO_TCP, IP_PROTO_UDP) and len(data) >= md.end + _PORTS.size:
                sport, dport = _PORTS.unpack_from(data, md.end)
    elif int_flagged or _looks_like_shim(data, after_l4, npt_values=(0,)):
        # The DSCP bit says INT follows L4; the sink may also have restored DSCP before
        # re-inserting the stack, so a well-formed shim there counts too.
        _need(data, after_l4 + INT_SHIM_BYTES, "INT shim after the inner L4 header")
        md = _int_md(data, after_l4)
        if md.npt != 0:
            raise MalformedReport(Reason.LENGTH, f"INT shim NPT {md.npt} after a {proto} header flagged by DSCP (expected 0)")
    return FlowKey(src_ip, dst_ip, proto, sport, dport), dscp, ecn, md


def flow_key_of_frame(frame: Buffer, *, int_dscp_bit: int = DEFAULT_INT_DSCP_BIT) -> FlowKey | None:
    """The 5-tuple of an Ethernet frame (IPv4/IPv6; ports 0 for protocols other than TCP/UDP),
    or None when it is not an IP packet or too short to say (sampled packets, packet-ins)."""
    try:
        key, _, _, _ = _inner(memoryview(frame), INNER_TYPE_ETHERNET, int_dscp_bit)
    except MalformedReport:
        return None
    return key


def _looks_like_shim(data: memoryview, offset: int, npt_values: tuple[int, ...]) -> bool:
    """An INT-MD shim (type 1, an allowed NPT) followed by a version-2 INT-MD header."""
    if len(data) < offset + INT_SHIM_BYTES + 1:
        return False
    first = data[offset]
    return first >> 4 == INT_TYPE_MD and (first >> 2) & 3 in npt_values and data[offset + INT_SHIM_BYTES] >> 4 == INT_MD_VERSION


def _int_md(data: memoryview, offset: int) -> _IntMd:
    """The INT shim, INT-MD header and metadata stack at ``offset``."""
    _need(data, offset + INT_SHIM_BYTES, "INT shim")
    type_npt, length, field = _SHIM.unpack_from(data, offset)
    int_type, npt = type_npt >> 4, (type_npt >> 2) & 3
    if int_type != INT_TYPE_MD:
        raise MalformedReport(Reason.UNSUPPORTED, f"INT header type {int_type} (only 1, INT-MD, is decoded)")
    if 4 * length < INT_MD_HEADER_BYTES:
        raise MalformedReport(
            Reason.LENGTH, f"INT shim length {length} words is shorter than the INT-MD header ({INT_MD_HEADER_BYTES} bytes)"
        )
    header = offset + INT_SHIM_BYTES
    end = header + 4 * length
    _need(data, header + INT_MD_HEADER_BYTES, "INT-MD header")
    word, bitmap, _, ds_instruction, _ = _INT_MD.unpack_from(data, header)
    version = word >> 28
    if version != INT_MD_VERSION:
        raise MalformedReport(Reason.VERSION, f"INT-MD header version {version}, expected {INT_MD_VERSION}")
    hop_ml = (word >> 8) & 0x1F
    remaining = word & 0xFF
    hop_bytes = 4 * hop_ml
    base = metadata_bytes(bitmap)
    if base > hop_bytes or (not ds_instruction and base != hop_bytes):
        raise MalformedReport(
            Reason.LENGTH, f"instruction bitmap {bitmap:#06x} needs {base} bytes per hop, Hop ML says {hop_bytes}"
        )
    stack_bytes = 4 * length - INT_MD_HEADER_BYTES
    if stack_bytes and (not hop_bytes or stack_bytes % hop_bytes):
        raise MalformedReport(
            Reason.LENGTH,
            f"INT stack of {stack_bytes} bytes (shim length {length} words - 12) is not a whole number of "
            f"{hop_bytes}-byte hops",
        )
    if end > len(data):
        raise MalformedReport(
            Reason.TRUNCATED, f"INT stack ends at byte {end} of the inner packet, which has only {len(data)}"
        )
    path: tuple[HopRecord, ...] = ()
    if stack_bytes:
        layout = hop_layout(bitmap, hop_bytes)
        stack = data[header + INT_MD_HEADER_BYTES : end]
        build = layout.build
        hops = [build(values) for values in layout.unpack.iter_unpack(stack)]
        hops.reverse()  # the stack is newest first; the path starts at the source
        path = tuple(hops)
    return _IntMd(
        bitmap=bitmap,
        hop_ml=hop_ml,
        remaining=remaining,
        e=bool(word & (1 << 26)),
        m=bool(word & (1 << 25)),
        path=path,
        end=end,
        npt=npt,
        shim_field=field,
    )


def _need(data: memoryview, size: int, what: str) -> None:
    if len(data) < size:
        raise MalformedReport(Reason.TRUNCATED, f"{what}: needs {size} bytes of inner packet, the report has {len(data)}")


# --- encoding (for tests, benchmarks and tools) ---------------------------------------------


def encode_hop(hop: HopRecord, bitmap: int = 0xFC00, hop_ml: int | None = None) -> bytes:
    """One hop's metadata for ``bitmap`` (None values become all ones); the inverse of decoding."""
    hop_bytes = 4 * hop_ml if hop_ml is not None else metadata_bytes(bitmap)
    layout = hop_layout(bitmap, hop_bytes)
    codes = [c for c in layout.unpack.format.lstrip("!") if c in _ALL_ONES]
    values = []
    for name, code in zip(layout.fields, codes):
        ones = _ALL_ONES[code]
        if name in ("queue", "buffer"):
            ident = hop.queue_id if name == "queue" else hop.buffer_id
            occ = hop.queue_occupancy if name == "queue" else hop.buffer_occupancy
            values.append(ones if ident is None or occ is None else (ident << 24) | (occ & 0xFFFFFF))
        else:
            value = getattr(hop, name)
            values.append(ones if value is None else value)
    return layout.unpack.pack(*values)


def group_header(node_id: int, sequence: int = 0, hw_id: int = 0, version: int = TELEMETRY_REPORT_VERSION) -> bytes:
    word = (version << 28) | ((hw_id & 0x3F) << SEQUENCE_BITS) | (sequence & ((1 << SEQUENCE_BITS) - 1))
    return _GROUP.pack(word, node_id)


def int_md_stack(
    path: list[HopRecord] | tuple[HopRecord, ...],
    *,
    bitmap: int = 0xFC00,
    remaining_hop_count: int = 0,
    npt: int = 0,
    shim_field: int = 0,
    e: bool = False,
    m: bool = False,
) -> bytes:
    """INT shim + INT-MD header + metadata stack for hops given in path order."""
    hop_bytes = metadata_bytes(bitmap)
    stack = b"".join(encode_hop(h, bitmap) for h in reversed(path))
    length = (INT_MD_HEADER_BYTES + len(stack)) // 4
    shim = _SHIM.pack((INT_TYPE_MD << 4) | (npt << 2), length, shim_field)
    word = (INT_MD_VERSION << 28) | (int(e) << 26) | (int(m) << 25) | ((hop_bytes // 4) << 8) | remaining_hop_count
    return shim + _INT_MD.pack(word, bitmap, 0, 0, 0) + stack


def individual_report(
    inner: bytes,
    *,
    in_type: int = INNER_TYPE_IPV4,
    rep_type: int = REPORT_TYPE_INT,
    rep_md_bits: int = 0,
    sink_metadata: bytes = b"",
    dropped: bool = False,
    congested: bool = False,
    tracked: bool = True,
    intermediate: bool = False,
) -> bytes:
    """Individual report header + INT main contents + ``inner`` (padded to whole words)."""
    if len(inner) % 4:
        inner += bytes(4 - len(inner) % 4)
    main = _INT_MAIN.pack(rep_md_bits, 0, 0, 0) + sink_metadata if rep_type == REPORT_TYPE_INT else b""
    rep_len = (len(main) + len(inner)) // 4
    flags = (dropped << 7) | (congested << 6) | (tracked << 5) | (intermediate << 4)
    header = _INDIVIDUAL.pack((rep_type << 4) | in_type, min(rep_len, REPORT_LENGTH_TO_END), len(sink_metadata) // 4, flags)
    return header + main + inner
