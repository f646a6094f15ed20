"""The host agent's TC programs, loaded for real (bcc) on both ends of a veth pair between two
network namespaces, with a congested hop (`CeMarker`) in front of B's programs: the rewrite on
the wire (flow label, RoCEv2 source port with a right checksum, ECT), per-flow counting of CE
marks and ECN-Echo, CNPs on CE with their rate limit, and receiver reports. Each program is
compiled once for the module."""
from __future__ import annotations

import os
import socket
import time

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from hostagent.agent.flowkey import ROCEV2_PORT, FlowKey
from hostagent.traffic.wire import pack_datagram_header
from hostagent_support import CeMarker, NsPair, needs_bcc, tcp_selector

pytestmark = needs_bcc
ECT0, CE = 2, 3
CNP_INTERVAL_S = 0.1


@pytest.fixture(scope="module")
def bench():
    from hostagent.agent.bpf.loader import TcProgram

    with NsPair(f"hb{os.getpid() % 10000}") as pair:
        marker = CeMarker(pair.b)              # first at B's ingress: the congested hop
        pa, pb = TcProgram(), TcProgram()
        try:
            pa.attach(pair.a.iface, pair.a.ns)
            pb.attach(pair.b.iface, pair.b.ns)
            for p in (pa, pb):
                p.configure(cnp_interval_ns=int(CNP_INTERVAL_S * 1e9), report_interval_ns=50_000_000, set_ect=True)
            yield pair, pa, pb, marker
        finally:
            for x in (pa, pb, marker):
                x.close()


def bound(host, family: int, port: int) -> socket.socket:
    s = host.socket(family, socket.SOCK_DGRAM)
    s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
    s.setblocking(port != ROCEV2_PORT)
    return s


def udp_pair(pair: NsPair, family: int, sport: int):
    """A sending socket on A (source port ``sport``) and a receiving one on B (port 4791)."""
    return bound(pair.a, family, sport), bound(pair.b, family, ROCEV2_PORT)


def send_roce(tx: socket.socket, dst: str, qp: int, count: int, gap: float = 0.0, payload: int = 64) -> None:
    buf = bytearray(payload)
    for seq in range(count):
        pack_datagram_header(buf, qp, seq, count, time.time_ns())
        tx.sendto(buf, (dst, ROCEV2_PORT))
        if gap:
            time.sleep(gap)


def drain(rx: socket.socket) -> list[int]:
    """Source ports of the datagrams the receiving socket got."""
    out = []
    while True:
        try:
            out.append(rx.recvfrom(2048)[1][1])
        except BlockingIOError:
            return out


def tcp_connection(pair: NsPair, family: int, port: int):
    """(client socket on A, accepted socket on B, listening socket on B, the flow's key)."""
    v6 = family == socket.AF_INET6
    server = pair.b.socket(family, socket.SOCK_STREAM)
    server.bind(("::" if v6 else "0.0.0.0", port))
    server.listen(1)
    client = pair.a.socket(family, socket.SOCK_STREAM)
    src, dst = (pair.a.ip6, pair.b.ip6) if v6 else (pair.a.ip4, pair.b.ip4)
    client.connect((dst, port))
    conn, _ = server.accept()
    return client, conn, server, FlowKey(src, dst, "tcp", client.getsockname()[1], port)


def checksum_ok(pkt: Ether) -> bool:
    """The transport checksum as scapy computes it from the bytes."""
    layer = UDP if UDP in pkt else TCP
    again = pkt.copy()
    del again[layer].chksum
    return Ether(bytes(again))[layer].chksum == pkt[layer].chksum


def roce_frames(frames: list[bytes], qp: int, opcode: int = 0x04) -> list[Ether]:
    out = []
    for f in frames:
        p = Ether(f)
        if UDP in p and p[UDP].dport == ROCEV2_PORT:
            bth = bytes(p[UDP].payload)
            if len(bth) >= 12 and bth[0] == opcode and int.from_bytes(bth[5:8], "big") == qp:
                out.append(p)
    return out


@pytest.mark.parametrize("family", [socket.AF_INET6, socket.AF_INET], ids=["ipv6", "ipv4"])
def test_roce_flow_moved_on_the_wire_with_right_checksums(bench, family) -> None:
    pair, pa, _, _ = bench
    v6 = family == socket.AF_INET6
    qp, sport, new_sport, label = (11, 50011, 61011, 0xABCDE) if v6 else (12, 50012, 61012, None)
    src, dst = (pair.a.ip6, pair.b.ip6) if v6 else (pair.a.ip4, pair.b.ip4)
    tx, rx = udp_pair(pair, family, sport)
    cap = pair.b.capture()
    send_roce(tx, dst, qp, 5)
    key = FlowKey.roce(src, dst, qp)
    pa.set_path(key, label=label, sport=new_sport)
    send_roce(tx, dst, qp, 5)
    frames = roce_frames(cap.frames(), qp)
    cap.close()
    assert len(frames) == 10
    before, after = frames[:5], frames[5:]
    assert {p[UDP].sport for p in before} == {sport} and {p[UDP].sport for p in after} == {new_sport}
    assert all(checksum_ok(p) for p in frames)
    if v6:
        assert {p[IPv6].fl for p in after} == {label}
        assert {p[IPv6].fl for p in before} != {label}              # the kernel's own label before
        assert {p[IPv6].tc & 3 for p in frames} == {ECT0}           # made ECN-capable, as a RoCE NIC does
    else:
        assert {p[IP].tos & 3 for p in frames} == {ECT0}
        assert all(Ether(bytes(p))[IP].chksum == p[IP].chksum for p in frames)
    # B's kernel checked every checksum (offloads off) and delivered all ten
    assert sorted(drain(rx)) == sorted([sport] * 5 + [new_sport] * 5)
    t = pa.tx()[key]
    assert (t.packets, t.sport) == (10, new_sport) and (t.label == label if v6 else True)
    assert pa.paths()[key] == (label, new_sport)
    for s in (tx, rx):
        s.close()


def test_receiver_counts_packets_and_ce_per_flow(bench) -> None:
    pair, _, pb, marker = bench
    qp = 21
    marker.mark(qp, 1, 4)                                 # one in four CE
    tx, rx = udp_pair(pair, socket.AF_INET, 50021)
    send_roce(tx, pair.b.ip4, qp, 40)
    time.sleep(0.2)
    r = pb.rx()[FlowKey.roce(pair.a.ip4, pair.b.ip4, qp)]
    assert (r.packets, r.ce) == (40, 10)
    assert marker.counts(qp) == (40, 10)
    for s in (tx, rx):
        s.close()


def test_cnp_sent_on_ce_at_most_once_per_interval(bench) -> None:
    pair, pa, pb, marker = bench
    qp_ce, qp_clear = 31, 32
    marker.mark(qp_ce, 1, 1)                              # every packet CE
    tx, rx = udp_pair(pair, socket.AF_INET6, 50031)
    tx2 = bound(pair.a, socket.AF_INET6, 50032)
    cap = pair.a.capture()                                # the tap sees CNPs before A's programs consume them
    start = time.monotonic()
    send_roce(tx, pair.b.ip6, qp_ce, 150, gap=0.004)     # about 0.6 s of CE-marked packets
    span = time.monotonic() - start
    send_roce(tx2, pair.b.ip6, qp_clear, 50)
    cnps = roce_frames(cap.frames(), qp_ce, opcode=0x81)
    cap.close()
    most = 1 + int(span / CNP_INTERVAL_S)
    assert 2 <= len(cnps) <= most, f"{len(cnps)} CNPs in {span:.2f} s at most one per {CNP_INTERVAL_S} s"
    for p in cnps:                                        # RoCEv2 CNP: B -> A, BECN, the flow's QP
        assert (p[IPv6].src, p[IPv6].dst, p[UDP].dport) == (pair.b.ip6, pair.a.ip6, ROCEV2_PORT)
        bth = bytes(p[UDP].payload)
        assert len(bth) == 12 + 16 + 4 and bth[4] & 0x40 and bth[12:28] == bytes(16)
        assert checksum_ok(p)
    key = FlowKey.roce(pair.a.ip6, pair.b.ip6, qp_ce)
    assert pb.rx()[key].cnps == len(cnps) and pb.rx()[key].ce == 150
    assert pa.feedback()[key].cnps == len(cnps)           # taken by A's ingress program
    clear = FlowKey.roce(pair.a.ip6, pair.b.ip6, qp_clear)
    assert (pb.rx()[clear].packets, pb.rx()[clear].cnps, pa.feedback()[clear].cnps) == (50, 0, 0)
    assert len(drain(rx)) == 200                          # the data itself reached B's socket
    for s in (tx, tx2, rx):
        s.close()


def test_reports_carry_the_receivers_counts(bench) -> None:
    pair, pa, pb, marker = bench
    qp = 41
    marker.mark(qp, 1, 2)
    tx, rx = udp_pair(pair, socket.AF_INET, 50041)
    send_roce(tx, pair.b.ip4, qp, 60, gap=0.005)
    time.sleep(0.1)
    send_roce(tx, pair.b.ip4, qp, 1)                      # after a report interval: one more report
    time.sleep(0.2)
    key = FlowKey.roce(pair.a.ip4, pair.b.ip4, qp)
    fb, r = pa.feedback()[key], pb.rx()[key]
    assert fb.reports == r.reports >= 3
    assert (fb.rx_packets, fb.rx_ce) == (r.packets, r.ce) == (61, 31)
    for s in (tx, rx):
        s.close()


def test_tcp_ece_counted_at_the_sender_and_ce_at_the_receiver(bench) -> None:
    pair, pa, pb, marker = bench
    port = 5099
    for h in (pair.a, pair.b):
        h.sh("sysctl", "-qw", "net.ipv4.tcp_ecn=1")
    marker.mark(tcp_selector(port), 1, 2)
    client, conn, server, key = tcp_connection(pair, socket.AF_INET6, port)
    label = 0x12345
    pa.set_path(key, label=label)
    cap = pair.b.capture()
    got = 0
    for _ in range(20):
        client.sendall(bytes(1000))
        while got < 1000 * (_ + 1):
            got += len(conn.recv(65536))
    time.sleep(0.2)
    data = [Ether(f) for f in cap.frames() if TCP in Ether(f) and Ether(f)[TCP].dport == port]
    cap.close()
    assert data and {p[IPv6].fl for p in data} == {label}
    ack, r, t = pa.acks()[key], pb.rx()[key], pa.tx()[key]
    assert r.packets >= 20 and 0 < r.ce < r.packets       # half the ECT data segments marked
    assert 0 < ack.ece <= ack.acks                        # B echoed them
    assert t.seq_next == ack.ack_seq                      # everything sent is acknowledged
    for s in (client, conn, server):
        s.close()


def test_an_rto_is_seen_through_sock_diag(bench) -> None:
    from hostagent.agent.tcpdiag import RtoWatch

    pair, _, _, marker = bench
    port = 5098
    client, conn, server, key = tcp_connection(pair, socket.AF_INET, port)
    watch = RtoWatch(pair.a.ns)
    try:
        assert key in watch.sample() and watch.poll() == set()
        marker.mark(tcp_selector(port), 0, 0, drop=True)      # the path goes black
        client.send(bytes(1000))
        deadline, rto = time.monotonic() + 5, set()
        while not rto and time.monotonic() < deadline:        # the first RTO comes after 200 ms or more
            time.sleep(0.05)
            rto = watch.poll()
        assert key in rto
    finally:
        marker.mark(tcp_selector(port), 0, 0)
        watch.close()
        for s in (client, conn, server):
            s.close()
