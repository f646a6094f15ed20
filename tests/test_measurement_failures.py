"""A measurement that failed is reported as failed, with why, never as a number: the demo's
TCP figure (the real iperf3, server and client, in network namespaces made here) and its UDP
sender, through the demo's own summary table, JSON report and list of failed figures.

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

from aifabric import demo_fabric, report, traffic
from aifabric.report import Failed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

REFUSED = "iperf3: unable to connect to server: Connection refused"


@dataclass
class NsHost:
    """A host as the measurements see a Mininet host (name, popen, cmd), in a namespace."""

    name: str
    ns: str

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
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


def test_failed_figures_are_found_wherever_they_are_in_a_report() -> None:
    data = {"runs": [{"time_s": 1.5}, {"time_s": Failed("h3: no output")}], "plan": {"rate": 100},
            "cells": (0, Failed("x"))}
    assert report.failed_figures(data) == ["runs[1].time_s: h3: no output", "cells[1]: x"]
    assert report.failed_figures({"a": 0, "b": 0.0, "c": None, "d": "failed"}) == []
