"""A measurement that failed is reported as failed, with why, never as a number: the demo's
TCP figure (the real iperf3, server and client, in network namespaces made here), its UDP
sender, an AllReduce run's figures (real ring workers on a namespace's loopback), a
load-balancing run's (the real traffic sender and receiver), INT hop figures (a report the INT
collector decoded) and processes' memory, through the tables, JSON reports and lists of failed
figures the demos and benchmarks print.

Two namespaces with only their loopback: the iperf3 server runs in one, the client in the other
connects to its own 127.0.0.1, where nothing listens (the demo's figure when its client cannot
reach the server).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP

from aifabric.lab import checks, report, traffic

from aifabric.experiments import demo_fabric, demo_int
from aifabric.experiments.allreduce_lab import CELLS, RunResult, collect_workers
from aifabric.experiments.load_balance_bench import LbPlan, ModeRun, summarise
from aifabric.lab.report import Failed
from controller.telemetry.int_collector import IntCollector
from controller.telemetry.int_report import FlowKey, HopRecord, group_header, individual_report, int_md_stack
from hostagent.traffic.drive import run_traffic
from hostagent.traffic.flows import FlowSpec

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

REPO = Path(__file__).resolve().parents[2]
REFUSED = "iperf3: unable to connect to server: Connection refused"


@dataclass
class NsHost:
    """A host as the measurements see a Mininet host (name, popen, cmd), in a namespace."""

    name: str
    ns: str

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("cwd", REPO)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *argv], **kwargs)

    def cmd(self, line: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.ns, "bash", "-c", line], capture_output=True,
                              text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def hosts():
    tag = f"mf{os.getpid() % 100000}"
    made = []
    try:
        for name in ("a", "b"):
            ns = f"{tag}{name}"
            subprocess.run(["ip", "netns", "add", ns], check=True)
            made.append(ns)
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        yield NsHost("a", made[0]), NsHost("b", made[1])
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False)


def _figures(tcp, sent=640, cores_used=4) -> dict:
    """The demo's figures as `demo_fabric.run` records them, with the measurements given."""
    return {"topology": "fat-tree k=4", "target": "softswitch", "switches": 20, "hosts": 16,
            "bring_up_s": {"targets": 1.0, "program": 2.0, "total": 3.0},
            "switch_rss_mib": {"mean": 60.0, "max": 61.0},
            "traffic": {"udp_flows": 64, "udp_datagrams": sent, "tcp_mbps": tcp, "cores_used": cores_used,
                        "udp_packets_per_core": {"c0": 160, "c1": 160, "c2": 160, "c3": 160}}}


def _line(table: str, label: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(label))


def test_tcp_flow_nobody_answers_is_failed_with_iperf3s_reason(hosts, tmp_path, capsys) -> None:
    client, server = hosts
    mbps = traffic.iperf_tcp(client, server, "127.0.0.1", seconds=1)
    assert mbps == Failed(REFUSED)

    figures = _figures(mbps)
    row = _line(demo_fabric.summary_table(figures), "TCP flow")
    assert row.split(None, 3)[-1] == f"failed ({REFUSED})"
    assert not re.search(r"\d", row.replace(REFUSED, "")), row

    report.write_json(tmp_path / "demo.json", figures)
    assert json.loads((tmp_path / "demo.json").read_text())["traffic"]["tcp_mbps"] == {"failed": REFUSED}

    assert report.say_failed(figures) is True
    assert f"traffic.tcp_mbps: {REFUSED}" in capsys.readouterr().out


def test_tcp_flow_server_that_cannot_listen_is_failed_with_its_reason(hosts) -> None:
    client, server = hosts
    # the port bound (not listening) by another process: iperf3's server cannot start
    holder = server.popen([sys.executable, "-c", "import socket, sys; s = socket.socket(socket.AF_INET6); "
                           "s.bind(('::', 5201)); print('bound', flush=True); sys.stdin.read()"],
                          stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"bound\n"
        mbps = traffic.iperf_tcp(client, server, "127.0.0.1", seconds=1)
    finally:
        holder.kill()
        holder.wait()
    assert isinstance(mbps, Failed), mbps
    assert mbps.why.startswith("iperf3 server: iperf3: error - unable to start listener for connections: "
                               "Address already in use"), mbps


def test_tcp_flow_measured_on_loopback_is_a_number(hosts, tmp_path, capsys) -> None:
    _, server = hosts
    mbps = traffic.iperf_tcp(server, server, "127.0.0.1", seconds=1)
    assert isinstance(mbps, float) and mbps > 0, mbps

    figures = _figures(mbps)
    assert _line(demo_fabric.summary_table(figures), "TCP flow").split()[-1] == report._fmt(mbps)
    report.write_json(tmp_path / "demo.json", figures)
    assert json.loads((tmp_path / "demo.json").read_text())["traffic"]["tcp_mbps"] == mbps
    assert report.say_failed(figures) is False
    assert capsys.readouterr().out == ""


def test_udp_sender_that_failed_is_not_counted_as_sent(hosts, tmp_path) -> None:
    client, _ = hosts
    sent = traffic.udp_flows(client, "::1", flows=4, count=2, interval=0)      # an IPv6 address, sent as IPv4
    assert sent == Failed("UDP sender on a: socket.gaierror: [Errno -9] Address family for hostname not supported")

    table = demo_fabric.summary_table(_figures(12.5, sent=sent, cores_used=sent))
    assert _line(table, "cores used").split(None, 2)[-1] == str(sent)
    assert report.failed_figures(_figures(12.5, sent=sent, cores_used=sent)) == [
        f"traffic.udp_datagrams: {sent.why}", f"traffic.cores_used: {sent.why}"]


def test_udp_sender_that_sent_counts_its_datagrams(hosts) -> None:
    client, _ = hosts
    assert traffic.udp_flows(client, "127.0.0.1", flows=4, count=2, interval=0) == 8


def test_paced_sender_and_its_receiver_count_every_datagram(hosts) -> None:
    client, _ = hosts
    rx = traffic.start_receiver(client, 47001, quiet=0.5, limit=10.0)
    tx = traffic.start_paced_sender(client, "127.0.0.1", 47002, 47001, 2000, 50, size=64)
    assert traffic.sender_result(tx).sent == 50
    assert traffic.receiver_result(rx) == {"127.0.0.1:47002": traffic.ReceivedFlow(50, 50 * 64, ce=0, corrupt=0)}


def test_failed_figures_are_found_wherever_they_are_in_a_report() -> None:
    data = {"runs": [{"time_s": 1.5}, {"time_s": Failed("h3: no output")}], "plan": {"rate": 100},
            "cells": (0, Failed("x"))}
    assert report.failed_figures(data) == ["runs[1].time_s: h3: no output", "cells[1]: x"]
    assert report.failed_figures({"a": 0, "b": 0.0, "c": None, "d": "failed"}) == []


def _ring(host: NsHost, rank: int, retries: int) -> subprocess.Popen:
    """A rank of a 2-worker ring on the namespace's loopback (127.0.0.1 and .2)."""
    return host.popen([sys.executable, "-m", "hostagent.collectives", "ring", "--peers", "127.0.0.1,127.0.0.2",
                       "--rank", str(rank), "--size", "256", "--timeout", "0.05", "--retries", str(retries)])


def _allreduce_table(r: RunResult) -> str:
    """The row the AllReduce demo and benchmark print for a run."""
    return report.table(["algorithm", *CELLS], [("ring", *r.cells())])


def test_allreduce_whose_workers_gave_no_report_is_failed_not_timed(hosts, tmp_path) -> None:
    _, host = hosts
    r = RunResult("ring", ["w0", "w1"], 256, "float32")
    # w1 cannot start (a rank outside the ring); w0 waits for it and gives up
    collect_workers(r, {"w0": _ring(host, 0, retries=3), "w1": _ring(host, 7, retries=3)}, deadline_s=60)
    assert r.errors[0].startswith("w0: error: ring job 0: rank 0 got no ack for step 0"), r.errors
    assert r.errors[1] == "w1: error: rank 7 is outside 0..1", r.errors
    failed = Failed("; ".join(r.errors))
    assert r.unmeasured == failed
    assert r.cells()[1:6] == (failed,) * 5

    *_, row, note = _allreduce_table(r).splitlines()          # one reason for five cells: a note under the table
    assert row.split() == ["ring", "NO", *["failed", "[1]"] * 5, f"{100 * r.cpu_busy:.0f}%",
                            f"{100 * r.switch_cpu:.0f}%"], row   # CPU: measured
    assert note == f"[1] {failed.why}"

    report.write_json(tmp_path / "runs.json", {"runs": [r.summary()]})
    saved = json.loads((tmp_path / "runs.json").read_text())["runs"][0]
    for key in ("time_s", "algbw_MBps", "bytes_sent_per_worker", "bytes_received_per_worker", "retransmissions"):
        assert saved[key] == {"failed": failed.why}, key


def test_allreduce_whose_workers_reported_is_timed(hosts) -> None:
    _, host = hosts
    r = RunResult("ring", ["w0", "w1"], 256, "float32")
    collect_workers(r, {"w0": _ring(host, 0, retries=200), "w1": _ring(host, 1, retries=200)}, deadline_s=60)
    assert r.ok and r.unmeasured is None, r.errors
    assert r.time_s == max(w["time_s"] for w in r.per_worker) > 0
    assert r.algbw_kbps == pytest.approx(1024 / r.time_s / 1000)
    assert report.failed_figures(r.summary()) == []
    assert "failed" not in _allreduce_table(r)


def test_lb_run_whose_sender_failed_is_failed_with_its_reason(hosts) -> None:
    a, b = hosts
    # the receiver listens in b; the sender in a connects to its own loopback, where nothing does
    flows = [FlowSpec("a", "b", "tcp", 50021, 5001, 100_000)]
    results = run_traffic({"a": a, "b": b}, flows, quiet=1.0, deadline=3.0, tcp_timeout=3.0,
                          addr_of=lambda name: "127.0.0.1")
    figures = ModeRun("ecmp", "permutation", 1, flows=[r.summary() for r in results]).figures(LbPlan(), {0: 100.0})
    failed = Failed("flow 0 a->b: tcp to 127.0.0.1:5001 from port 50021: [Errno 111] Connection refused")
    for key in ("throughput_vs_ideal", "fct_p50_s", "fct_p99_s", "out_of_order", "lost", "complete"):
        assert figures[key] == failed, key

    medians = summarise([figures])
    assert medians[0]["throughput_vs_ideal"] == medians[0]["lost"] == Failed(f"seed 1: {failed.why}")
    assert f"lost: seed 1: {failed.why}" in "\n".join(report.failed_figures(medians))


def test_lb_run_whose_flows_arrived_is_measured(hosts) -> None:
    _, b = hosts
    flows = [FlowSpec("a", "b", "udp", 50031, 5003, 20, rate_pps=200)]
    results = run_traffic({"a": NsHost("a", b.ns), "b": b}, flows, quiet=1.0, deadline=5.0,
                          addr_of=lambda name: "127.0.0.1")
    figures = ModeRun("ecmp", "permutation", 1, flows=[r.summary() for r in results]).figures(LbPlan(), {0: 200.0})
    assert figures["complete"] == 1 and figures["lost"] == 0
    assert isinstance(figures["throughput_vs_ideal"], float) and figures["throughput_vs_ideal"] > 0
    assert report.failed_figures(summarise([figures])) == []


def test_memory_of_a_process_that_is_gone_is_failed_naming_it() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()                                   # exited and reaped: its /proc entry is gone
    assert checks.memory_mib({"s1": os.getpid(), "s2": gone.pid}) == dict.fromkeys(
        ("mean", "max", "total"), Failed("process gone: s2"))
    measured = checks.memory_mib({"s1": os.getpid(), "s2": os.getppid()})
    assert all(isinstance(v, (int, float)) and v > 0 for v in measured.values()), measured


def test_int_hop_whose_reports_carried_no_queue_or_latency_is_failed_not_zero(capsys) -> None:
    collector = IntCollector(port=0)
    hop = HopRecord(switch_id=1, ingress_port=1, egress_port=3, hop_latency_us=None, queue_id=None,
                    queue_occupancy=None)             # the switch could not fill them in
    inner = bytes(IP(src="10.0.0.2", dst="10.3.1.3", tos=(0x2A << 2) | 2) / UDP(sport=40000, dport=5001))
    stack = int_md_stack([hop], bitmap=demo_int.INT_BITMAP, remaining_hop_count=5, shim_field=0x0A << 2)
    assert collector.ingest(group_header(20, 1) + individual_report(inner + stack, in_type=4)) == 1
    flow = FlowKey("10.0.0.2", "10.3.1.3", 17, 40000, 5001)

    (row,) = demo_int._hop_rows(collector.flow(flow), {1: "p3e1"})
    latency, queue = Failed("no INT report carried this hop's hop latency"), \
        Failed("no INT report carried this hop's queue occupancy")
    assert (row["latency_mean_us"], row["latency_max_us"], row["queue_mean"], row["queue_max"]) == \
        (latency, latency, queue, queue)

    alone = demo_int.PhaseResult("alone", path=[row])
    assert demo_int._checks(alone, alone)["alone: no queue, no CE"] is False    # an unknown queue is not "none"
    demo_int._print_tables(flow, alone, alone, {"int_bytes": {"per_hop": 32, "per_packet": 48}})
    hop_line = next(line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("1  p3e1"))
    assert hop_line.split()[:4] == ["1", "p3e1", "1", "3"] and hop_line.count("failed [") == 8, hop_line
