"""Telemetry Report v2.0 / INT-MD v2.1 decoding, and the collector that counts what it decodes.

Reports are built by hand: the spec's own example (telemetry_report.mdk, "Example with Embedded
INT-MD in a TCP Packet") word by word with struct, the fabric's form (p4src/README.md: DSCP flag,
NPT 0, bitmap 0xFC00, Hop ML 8) with scapy for the inner headers. Malformed inputs: random bytes,
every truncation and every single-byte corruption of valid reports, and one case per reason.
"""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller.telemetry.int_collector import IntCollector
from controller.telemetry.int_report import (
    INNER_TYPE_ETHERNET,
    INNER_TYPE_IPV6,
    FlowKey,
    HopRecord,
    MalformedReport,
    Reason,
    decode_reports,
    group_header,
    individual_report,
    int_md_stack,
    metadata_bytes,
)

INT_DSCP_BIT = 0x20
FABRIC_BITMAP = 0xFC00


# --- the spec's example ---------------------------------------------------------------------


def spec_example_report() -> bytes:
    """telemetry_report.mdk, "Example with Embedded INT-MD in a TCP Packet": Switch1 (source,
    node 1) and Switch2 (node 2) in the INT stack (node id + queue occupancy, Hop ML 2, RHC 8-2),
    Switch3 (node 3, the sink) reports its queue occupancy in the report header (MD Length 1),
    the inner packet is IPv4 / new UDP (dport INT_TBD) / shim NPT 2 (IP proto 6) / INT-MD / TCP."""
    words = []
    words.append(struct.pack("!II", (2 << 28) | 7, 3))  # Ver 2, hw_id 0, seq 7; Node ID of Switch3
    words.append(struct.pack("!BBBB", 0x14, 23, 1, 0b0010_0000))  # RepType 1, InType 4, RepLength 23, MD Length 1, F
    words.append(struct.pack("!HHHH", 0x1000, 0, 0, 0))  # RepMdBits: bit 3 (queue id + occupancy); DS fields 0
    words.append(struct.pack("!I", (0 << 24) | 9))  # queue occupancy of Switch3
    inner_len = 20 + 8 + 4 + 12 + 16 + 20
    words.append(
        struct.pack(
            "!BBHHHBBH4s4s",
            0x45, 0, inner_len, 0x1234, 0x4000, 64, 17, 0,
            socket.inet_aton("192.0.2.1"), socket.inet_aton("192.0.2.2"),
        )
    )
    words.append(struct.pack("!HHHH", 49152, 0xFFEE, inner_len - 20, 0))  # UDP, dport INT_TBD (any value)
    words.append(struct.pack("!BBH", (1 << 4) | (2 << 2), 7, 6))  # shim: Type 1, NPT 2, Length 7, IP proto 6
    words.append(struct.pack("!IHHHH", (2 << 28) | (2 << 8) | 6, 0x9000, 0, 0, 0))  # Ver 2, HopML 2, RHC 6; bits 0, 3
    words.append(struct.pack("!II", 2, 4))  # hop2: node id, queue occupancy (newest first)
    words.append(struct.pack("!II", 1, 1))  # hop1
    words.append(struct.pack("!HHIIBBHHH", 5555, 80, 1000, 0, 5 << 4, 0x18, 65535, 0, 0))  # original TCP header
    report = b"".join(words)
    assert len(report) - 12 == 23 * 4  # Report Length counts everything after the first word of the header
    return report


def test_spec_example_decodes_to_three_hops_in_path_order() -> None:
    (report,) = decode_reports(spec_example_report())
    assert (report.node_id, report.hw_id, report.sequence) == (3, 0, 7)
    assert (report.report_type, report.inner_type) == (1, 4)
    assert report.tracked and not (report.dropped or report.congested or report.intermediate)
    assert report.flow == FlowKey("192.0.2.1", "192.0.2.2", 6, 5555, 80)
    assert (report.instruction_bitmap, report.hop_ml, report.remaining_hop_count) == (0x9000, 2, 6)
    assert [h.switch_id for h in report.path] == [1, 2, 3]
    assert [h.queue_occupancy for h in report.path] == [1, 4, 9]
    assert all(h.queue_id == 0 and h.hop_latency_us is None and h.egress_port is None for h in report.path)


# --- the fabric's form ----------------------------------------------------------------------


def fabric_hops(n: int = 5, congested_at: int | None = None) -> list[HopRecord]:
    hops = []
    for i in range(n):
        q = 40 if i == congested_at else 0
        hops.append(
            HopRecord(
                switch_id=i + 1,
                ingress_port=1 + i,
                egress_port=3 + i,
                hop_latency_us=12 + i + 1000 * (i == congested_at),
                queue_id=0,
                queue_occupancy=q,
                ingress_ts=1_000_000 + 100 * i,
                egress_ts=1_000_012 + 100 * i,
            )
        )
    return hops


def fabric_report(
    path: list[HopRecord],
    *,
    ipv6: bool = False,
    tcp: bool = False,
    dscp_flag: bool = True,
    node_id: int = 20,
    sequence: int = 1,
    payload: bytes = b"",
) -> bytes:
    """A sink's report in the fabric's form: inner IP / L4 / shim (NPT 0) / INT-MD 0xFC00 / stack."""
    dscp = 0x0A | (INT_DSCP_BIT if dscp_flag else 0)
    stack = int_md_stack(path, bitmap=FABRIC_BITMAP, remaining_hop_count=6 - len(path), shim_field=0x0A << 2)
    l4 = TCP(sport=40000, dport=5001, flags="A") if tcp else UDP(sport=40000, dport=5001)
    if ipv6:
        inner = IPv6(src="fd00:0:0:0::2", dst="fd00:0:3:1::3", tc=(dscp << 2) | 2) / l4
    else:
        inner = IP(src="10.0.0.2", dst="10.3.1.3", tos=(dscp << 2) | 2) / l4
    raw = bytes(inner) + stack + payload
    return group_header(node_id, sequence) + individual_report(raw, in_type=INNER_TYPE_IPV6 if ipv6 else 4)


@pytest.mark.parametrize("ipv6", [False, True])
@pytest.mark.parametrize("tcp", [False, True])
def test_fabric_report_decodes_every_field(ipv6: bool, tcp: bool) -> None:
    path = fabric_hops(5, congested_at=4)
    (report,) = decode_reports(fabric_report(path, ipv6=ipv6, tcp=tcp, payload=b"hello world!"))
    assert report.path == tuple(path)
    assert report.hop_count == 5
    assert report.hop_ml == 8 and report.instruction_bitmap == FABRIC_BITMAP and report.remaining_hop_count == 1
    proto = 6 if tcp else 17
    src, dst = ("fd00::2", "fd00:0:3:1::3") if ipv6 else ("10.0.0.2", "10.3.1.3")
    assert report.flow == FlowKey(src, dst, proto, 40000, 5001)
    assert report.ip_dscp == 0x0A | INT_DSCP_BIT and report.ip_ecn == 2
    assert report.path[-1].queue_occupancy == 40 and report.path[-1].hop_latency_us == 1016


def test_fabric_bitmap_is_32_bytes_per_hop() -> None:
    assert metadata_bytes(FABRIC_BITMAP) == 32
    assert metadata_bytes(0x9000) == 8  # the spec example: node id + queue
    assert metadata_bytes(0xFFFF) == 4 * 16 + 3 * 4  # bits 4-6 are 8 bytes each


def test_restored_dscp_still_finds_the_stack() -> None:
    """A sink may restore the DSCP before re-inserting the stack: a valid shim is enough."""
    (report,) = decode_reports(fabric_report(fabric_hops(3), dscp_flag=False))
    assert report.hop_count == 3 and report.ip_dscp == 0x0A


def test_unavailable_metadata_decodes_to_none() -> None:
    hop = HopRecord(switch_id=7, ingress_port=None, egress_port=None, hop_latency_us=None, queue_id=None, queue_occupancy=None)
    (report,) = decode_reports(fabric_report([hop]))
    assert report.path == (hop,)


def test_ethernet_inner_type_and_several_reports_in_one_packet() -> None:
    path = fabric_hops(2)
    inner_ip = bytes(IP(src="10.0.0.2", dst="10.3.1.3", tos=INT_DSCP_BIT << 2) / UDP(sport=1, dport=2))
    stack = int_md_stack(path)
    eth = bytes(Ether(src="00:00:0a:00:00:02", dst="02:00:00:00:00:01", type=0x0800)) + inner_ip + stack
    ip_only = inner_ip + stack
    payload = group_header(9, 3) + individual_report(eth, in_type=INNER_TYPE_ETHERNET) + individual_report(ip_only)
    reports = decode_reports(payload)
    assert len(reports) == 2
    assert all(r.path == tuple(path) and r.flow == FlowKey("10.0.0.2", "10.3.1.3", 17, 1, 2) for r in reports)


def test_report_length_0xff_extends_to_the_end() -> None:
    data = bytearray(fabric_report(fabric_hops(2)))
    data[9] = 0xFF
    (report,) = decode_reports(bytes(data))
    assert report.hop_count == 2


def test_npt1_restores_the_original_udp_port() -> None:
    path = fabric_hops(2)
    stack = int_md_stack(path, npt=1, shim_field=4791)
    inner = bytes(IP(src="10.0.0.2", dst="10.3.1.3") / UDP(sport=49152, dport=0xFFEE)) + stack
    (report,) = decode_reports(group_header(1) + individual_report(inner))
    assert report.flow == FlowKey("10.0.0.2", "10.3.1.3", 17, 49152, 4791)
    assert report.hop_count == 2


def test_inner_only_report_without_int() -> None:
    inner = bytes(IP(src="10.0.0.2", dst="10.3.1.3") / UDP(sport=5, dport=6) / b"abcd")
    (report,) = decode_reports(group_header(1) + individual_report(inner, rep_type=0))
    assert report.report_type == 0 and not report.has_int and report.path == ()


# --- malformed ------------------------------------------------------------------------------


def _reason(data: bytes) -> str:
    with pytest.raises(MalformedReport) as info:
        decode_reports(data)
    return info.value.reason


def test_each_reason_is_named() -> None:
    good = fabric_report(fabric_hops(3))
    assert _reason(good[:5]) == Reason.TRUNCATED
    assert _reason(b"\x10" + good[1:]) == Reason.VERSION  # group version 1
    assert _reason(good[:8]) == Reason.NO_REPORTS
    assert _reason(good + b"\x00\x00") == Reason.LENGTH  # trailing bytes: lengths do not add up
    bad_type = bytearray(good)
    bad_type[8] = 0x24  # RepType 2 (IOAM)
    assert _reason(bytes(bad_type)) == Reason.UNSUPPORTED
    bad_md = bytearray(good)
    bad_md[10] = 1  # MD Length 1 but RepMdBits 0
    assert _reason(bytes(bad_md)) == Reason.LENGTH
    inner_at = 8 + 4 + 8
    bad_ip = bytearray(good)
    bad_ip[inner_at] = 0x65  # IP version 6 under InType 4
    assert _reason(bytes(bad_ip)) == Reason.INNER_HEADER
    shim_at = inner_at + 20 + 8
    bad_int = bytearray(good)
    bad_int[shim_at + 4] = 0x10  # INT-MD version 1
    assert _reason(bytes(bad_int)) == Reason.VERSION
    bad_len = bytearray(good)
    bad_len[shim_at + 1] += 1  # shim length one word longer: not a whole number of hops
    assert _reason(bytes(bad_len)) == Reason.LENGTH
    bad_hopml = bytearray(good)
    bad_hopml[shim_at + 4 + 2] = 4  # Hop ML 4 < the bitmap's 8 words
    assert _reason(bytes(bad_hopml)) == Reason.LENGTH


def valid_reports() -> list[bytes]:
    return [
        spec_example_report(),
        fabric_report(fabric_hops(5)),
        fabric_report(fabric_hops(1), ipv6=True, tcp=True),
        fabric_report(fabric_hops(3), dscp_flag=False, payload=b"12345678"),
    ]


@pytest.mark.parametrize("index", range(4))
def test_every_truncation_is_malformed(index: int) -> None:
    data = valid_reports()[index]
    for cut in range(len(data)):
        with pytest.raises(MalformedReport):
            decode_reports(data[:cut])


@pytest.mark.parametrize("index", range(4))
def test_every_byte_corruption_decodes_or_is_malformed(index: int) -> None:
    data = valid_reports()[index]
    rng = random.Random(index)
    for pos in range(len(data)):
        for value in (0x00, 0xFF, rng.randrange(256)):
            mutated = data[:pos] + bytes([value]) + data[pos + 1 :]
            try:
                decode_reports(mutated)
            except MalformedReport:
                pass


def test_random_bytes_never_escape_as_other_errors() -> None:
    rng = random.Random(1234)
    decoded = 0
    for _ in range(20000):
        size = rng.choice((0, 1, 4, 8, 12, 16, 40, 64, 128, 300))
        data = bytes(rng.randrange(256) for _ in range(size))
        if rng.random() < 0.5 and size >= 8:  # make the group version right half the time
            data = bytes([0x20 | (data[0] & 0x0F)]) + data[1:]
        try:
            decode_reports(data)
            decoded += 1
        except MalformedReport:
            pass
    assert decoded < 20000


# --- collector ------------------------------------------------------------------------------


def test_collector_aggregates_flows_ports_and_counts_malformed() -> None:
    collector = IntCollector(port=0)
    path = fabric_hops(5, congested_at=4)
    quiet = fabric_hops(5)
    for seq in range(1, 11):
        assert collector.ingest(fabric_report(path if seq % 2 else quiet, sequence=seq)) == 1
    assert collector.ingest(fabric_report(path, sequence=14)) == 1  # 11..13 lost
    assert collector.ingest(b"\x00" * 3) == 0
    assert collector.ingest(b"garbage!" * 5) == 0
    snap = collector.snapshot()
    assert snap.counters.reports_decoded == 11 and snap.counters.datagrams == 13
    assert snap.counters.malformed == {Reason.TRUNCATED: 1, Reason.VERSION: 1}
    assert snap.counters.reports_lost == 3
    flow = FlowKey("10.0.0.2", "10.3.1.3", 17, 40000, 5001)
    summary = snap.flows[flow]
    assert summary.reports == 11 and summary.hop_count == 5 and summary.paths_seen == 1
    last = summary.hops[-1]
    assert (last.switch_id, last.queue_max, last.samples) == (5, 40, 11)
    assert last.queue_mean == pytest.approx(40 * 6 / 11)
    assert summary.hops[0].queue_max == 0
    port = snap.ports[(5, 7)]
    assert (port.queue_occupancy, port.queue_occupancy_peak, port.hop_latency_peak_us) == (40, 40, 1016)
    assert len(collector.history(flow)) == 11
    collector.reset_flows()
    assert collector.snapshot().flows == {} and collector.counters().reports_decoded == 11


def test_collector_over_udp() -> None:
    with IntCollector("127.0.0.1", 0) as collector:
        host, port = collector.address
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for seq in range(50):
                sender.sendto(fabric_report(fabric_hops(4), sequence=seq), (host, port))
            sender.sendto(b"\xff" * 17, (host, port))
            sender.sendto(spec_example_report()[:-3], (host, port))
        finally:
            sender.close()
        assert collector.wait_for_reports(50, timeout=5)
        deadline = time.monotonic() + 5
        while collector.counters().datagrams < 52 and time.monotonic() < deadline:
            time.sleep(0.01)
        counters = collector.counters()
        assert counters.reports_decoded == 50 and counters.malformed_total == 2
        assert collector.running
    assert not collector.running
