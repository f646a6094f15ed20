"""The traffic sender and receiver (python -m hostagent.traffic) for real, between two network
namespaces joined by a veth pair, driven through hostagent.traffic.drive as a lab drives them.

Both hosts run their processes pinned to one CPU: a veth hands each packet to the backlog of the
CPU that sent it, so a sender moving between CPUs could reorder packets by itself, and the
out-of-order counts below must come from the sender's deliberate swaps only.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyroute2 import IPRoute, NetNS, netns

from hostagent.traffic.drive import FlowResult, collect, run_traffic, start_receivers, start_senders
from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec
from hostagent.traffic.flowstats import TcpReceived, UdpReceived
from hostagent.traffic.receiver import Received
from hostagent.traffic.wire import pack_datagram_header

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veths)")

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 20.0          # receivers end by then whatever happens


@dataclass
class NsHost:
    """A host as the driver sees one (name, popen, IP), in its own network namespace."""

    name: str
    ns: str
    ip: str

    def IP(self) -> str:
        return self.ip

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(["ip", "netns", "exec", self.ns, "taskset", "-c", "0", *argv], cwd=REPO, **kwargs)


@pytest.fixture(scope="module")
def hosts():
    tag = f"tt{os.getpid() % 100000}"
    made: list[str] = []
    try:
        for i, name in enumerate(("a", "b"), 1):
            ns = f"{tag}{name}"
            if ns in netns.listnetns():
                netns.remove(ns)
            netns.create(ns)
            made.append(ns)
        with IPRoute() as ipr:
            ipr.link("add", ifname=f"{tag}a0", kind="veth", peer=f"{tag}b0")
            for name in ("a", "b"):
                ipr.link("set", index=ipr.link_lookup(ifname=f"{tag}{name}0")[0], net_ns_fd=f"{tag}{name}")
        result = {}
        for i, name in enumerate(("a", "b"), 1):
            ns, ip = f"{tag}{name}", f"10.250.0.{i}"
            with NetNS(ns) as n:
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
                idx = n.link_lookup(ifname=f"{tag}{name}0")[0]
                n.addr("add", index=idx, address=ip, prefixlen=24)
                n.link("set", index=idx, state="up")
            result[name] = NsHost(name, ns, ip)
        yield result
    finally:
        for ns in made:
            if ns in netns.listnetns():
                netns.remove(ns)


def swapped_pairs(size: int, every: int) -> int:
    """Datagrams a sender with --swap-every sends out of order: one per multiple q of ``every``
    with q + 1 < size."""
    return len(range(0, size - 1, every))


def udp(src: str, dst: str, sport: int, size: int, **kw) -> FlowSpec:
    return FlowSpec(src, dst, "udp", sport, ROCEV2_PORT, size, rate_pps=kw.pop("rate_pps", 1000), **kw)


def test_udp_flows_counted_and_reordering_seen(hosts) -> None:
    flows = [udp("a", "b", 50001, 120), udp("a", "b", 50002, 90, payload=500, start=0.05),
             udp("b", "a", 50001, 60)]
    receivers = start_receivers(hosts, flows, quiet=1.0, deadline=DEADLINE, reorder_buffer=True)
    senders = start_senders(hosts, flows, start_delay=0.3, swap_every=10)
    results = collect(flows, senders, receivers)
    assert [r.id for r in results] == [0, 1, 2]
    for r in results:
        rec, sent = r.received, r.sent
        assert isinstance(rec, UdpReceived) and sent is not None and sent.error is None
        assert (rec.src, rec.sport, rec.dst) == (hosts[r.flow.src].ip, r.flow.sport, hosts[r.flow.dst].ip)
        assert sent.sent == rec.packets == rec.unique == rec.expected == r.flow.size
        assert rec.bytes == r.flow.bytes == sent.bytes
        assert (rec.lost, rec.duplicates) == (0, 0) and r.complete and r.lost == 0
        assert r.out_of_order == swapped_pairs(r.flow.size, 10)
        assert rec.reorder_distance_max == 1
        # the reordering buffer held one datagram at a time and delivered everything in order
        assert (rec.buffer_max, rec.delivered_in_order, rec.held_at_end) == (1, r.flow.size, 0)
        assert rec.first_send <= rec.first_arrival <= rec.last_arrival
        assert r.fct_s == pytest.approx(rec.last_arrival - rec.first_send, abs=1e-6)   # epoch floats: µs
        assert r.fct_s > 0 and r.throughput_bps > 0
    # flow 1 starts 50 ms after flow 0, both paced from one common start
    assert results[1].sent.first_send > results[0].sent.first_send


def test_dropped_datagrams_are_lost_and_held_in_the_reorder_buffer(hosts) -> None:
    flows = [udp("a", "b", 50011, 50)]
    results = run_traffic(hosts, flows, quiet=0.5, deadline=DEADLINE, reorder_buffer=True, start_delay=0.3,
                          drop_every=7)
    r = results[0]
    rec = r.received
    dropped = 50 // 7                                  # sequence numbers 6, 13, ..., 48
    assert r.sent.dropped == dropped and r.sent.sent == 50 - dropped
    assert (rec.unique, rec.lost, rec.out_of_order, rec.duplicates) == (50 - dropped, dropped, 0, 0)
    assert not r.complete and r.fct_s is None and r.lost == dropped
    # in-order delivery stops at the first gap (sequence number 6): the rest wait behind it
    assert (rec.delivered_in_order, rec.held_at_end) == (6, 50 - dropped - 6)


def test_tcp_bytes_and_completion(hosts) -> None:
    flows = [FlowSpec("a", "b", "tcp", 50021, 5001, 3_000_000), FlowSpec("a", "b", "tcp", 50022, 5001, 200_000),
             FlowSpec("b", "a", "tcp", 50021, 5002, 77_777, start=0.1)]
    results = run_traffic(hosts, flows, quiet=1.0, deadline=DEADLINE, start_delay=0.3)
    for r in results:
        rec, sent = r.received, r.sent
        assert isinstance(rec, TcpReceived) and sent.error is None
        assert (rec.src, rec.sport, rec.dport) == (hosts[r.flow.src].ip, r.flow.sport, r.flow.dport)
        assert sent.sent == sent.acked == rec.bytes == rec.expected == r.flow.size
        assert r.complete and r.lost == 0 and r.delivered_bytes == r.flow.size
        assert r.fct_s == sent.fct_s and r.fct_s > 0
        assert rec.connect <= rec.first_arrival <= rec.last_arrival
        assert r.out_of_order == 0 and sent.retransmits is not None and sent.reordering_seen is not None


def test_receiver_counts_crafted_sequences(hosts) -> None:
    """The receiver's command line, fed datagrams written by hand from host a's namespace: a
    repeat, a late one, one that contradicts its flow's total and a stranger; the flow completes
    with the last one, so the receiver has seen them all when it ends."""
    proc = hosts["b"].popen([sys.executable, "-u", "-m", "hostagent.traffic", "receive", "--udp-port", "4791",
                             "--expect", "1", "--quiet", "2", "--deadline", str(DEADLINE)])
    try:
        assert proc.stdout.readline() == b"ready\n"
        with netns.create_socket(hosts["a"].ns, socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("0.0.0.0", 50031))
            for seq, total in ((0, 5), (1, 5), (1, 5), (3, 5), (4, 5), (2, 9), (-1, 0), (2, 5)):
                buf = bytearray(64)
                if total:
                    pack_datagram_header(buf, 7, seq, total, time.time_ns())
                sock.sendto(buf, (hosts["b"].ip, ROCEV2_PORT))
        out, err = proc.communicate(timeout=DEADLINE + 5)
    finally:
        proc.kill()
        proc.wait()
    report = Received.from_dict(json.loads(out.decode().splitlines()[-1]))
    assert (report.ended, report.malformed, len(report.flows)) == ("complete", 2, 1)
    rec = report.flows[0]
    assert (rec.src, rec.sport, rec.dst, rec.dport, rec.flow_id) == (hosts["a"].ip, 50031, hosts["b"].ip, 4791, 7)
    assert (rec.packets, rec.unique, rec.duplicates, rec.out_of_order, rec.lost) == (6, 5, 1, 1, 0)
    assert rec.reorder_distance_max == 2 and rec.complete and rec.bytes == 6 * 64


def test_receiver_port_in_use_is_named(hosts) -> None:
    busy = netns.create_socket(hosts["b"].ns, socket.AF_INET, socket.SOCK_DGRAM)
    with busy:
        busy.bind(("0.0.0.0", ROCEV2_PORT))
        with pytest.raises(RuntimeError, match=f"UDP port {ROCEV2_PORT}"):
            start_receivers(hosts, [udp("a", "b", 50041, 5)], deadline=DEADLINE)


def test_sender_with_a_busy_source_port_reports_it(hosts) -> None:
    flows = [udp("a", "b", 50051, 5)]
    busy = netns.create_socket(hosts["a"].ns, socket.AF_INET, socket.SOCK_DGRAM)
    with busy:
        busy.bind(("0.0.0.0", 50051))
        receivers = start_receivers(hosts, flows, quiet=0.5, deadline=2.0)
        senders = start_senders(hosts, flows, start_delay=0.0)
        with pytest.raises(RuntimeError, match="source port 50051"):
            collect(flows, senders, receivers)
    assert all(h.proc.poll() is not None for h in (*senders, *receivers))


def test_a_flow_nothing_reported_summarises_as_json() -> None:
    r = FlowResult(0, udp("a", "b", 1, 3), None, None)
    summary = r.summary()
    assert json.loads(json.dumps(summary)) == summary
    assert (summary["complete"], summary["error"], r.lost, r.out_of_order) == (False, "no sender record", 3, None)


# -- flows under a host congestion control (hostagent.traffic.controlled) ---------------------------
CC = {"name": "swift", "link_bps": 100e6, "base_rtt_s": 0.001}


def test_a_controlled_flow_is_acknowledged_datagram_by_datagram(hosts) -> None:
    """Every datagram asks for an acknowledgement and gets one: the sender takes as many as it
    sent, each it gave up on after its timeout came later (none lost), and the RTTs it measured
    are those of a veth (under a second)."""
    from hostagent.congestion import CcSettings
    flows = [udp("a", "b", 50061, 300, rate_pps=3000)]
    # unacknowledged, Swift would slow to a datagram a second: fail after DEADLINE rather than wait
    r = run_traffic(hosts, flows, quiet=0.5, deadline=DEADLINE, start_delay=0.3, cc=CcSettings(**CC),
                    timeout=DEADLINE)[0]
    sent = r.sent
    assert sent.error is None and r.complete and sent.cc == "swift"
    assert (sent.sent, sent.acks, sent.ack_errors) == (300, 300, 0)
    # a timeout is 8 ms here: a busy machine may hold an acknowledgement longer, which then comes late
    assert sent.acks_missing == sent.acks_late
    assert 0 < sent.rtt_min_us <= sent.rtt_sum_us / sent.acks < 1e6
    assert sent.cc_trace and all(window is not None for _, _, window in sent.cc_trace)
    summary = r.summary()
    assert summary["acks"] == 300 and summary["rtt_mean_us"] > 0


def test_a_flow_nobody_acknowledges_is_held_by_its_window_and_times_out(hosts) -> None:
    """No receiver on the flow's port: no acknowledgement comes, so the flow sends its window (a
    BDP: 4 datagrams here), waits, and frees each datagram only when its timeout passes (Swift
    halving the window at each); every datagram is counted missing."""
    from hostagent.congestion import CcSettings
    from hostagent.traffic.sender import Sent
    flows = [FlowSpec("a", "b", "udp", 50071, 4792, 12, rate_pps=3000)]
    cc = CcSettings("swift", 100e6, 0.0001)
    senders = start_senders(hosts, flows, start_delay=0.0, cc=cc)
    out, err = senders[0].proc.communicate(timeout=DEADLINE)
    sent = Sent.from_dict(json.loads(out.decode().splitlines()[-1])).flows[0]
    assert (sent.sent, sent.acks, sent.acks_missing) == (12, 0, 12), err.decode()[-2000:]
    assert sent.window_wait_s > 0
    assert sent.cc_trace and min(window for _, _, window in sent.cc_trace) == 1.0    # cut to one datagram


def test_the_senders_refuse_a_control_they_cannot_feed() -> None:
    from hostagent.congestion import CcSettings
    with pytest.raises(ValueError, match="telemetry"):
        CcSettings("hpcc", 10e6, 0.001)
    with pytest.raises(ValueError, match="timely, swift"):
        CcSettings("reno", 10e6, 0.001)
