"""Failure injection (aifabric.lab.failures) and its control channel (aifabric.lab.control_socket).

Without a fabric: requests are checked strictly, and the CLI says when no fabric runs. On a
small leaf-spine (2 leaves, 2 spines, 2 hosts per leaf; softswitch and, where installed, BMv2):
a failed link's interfaces go down and come back, every pair reaches while a spine link is down
when the controller is told (``inform_controller``), a failed switch's process (and only it) dies
and a restored one forwards again for every pair; the CLI reaches the lab over the control
socket, names unknown switches and missing links, and the socket refuses malformed requests.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aifabric.lab import checks
from aifabric.lab.control_socket import MAX_REQUEST, ControlServer, RequestError, parse_request
from aifabric.lab.failures import FailureError, Failures, blackholed, interface_up
from aifabric.lab.lab import Lab
from controller.failover import HeartbeatConfig
from topologies.fabric import leaf_spine
from emulation.p4switch import port_accepts
from failure_waits import rerouted_back
from targets import FABRIC_TARGETS

REPO = Path(__file__).resolve().parents[2]


def aifabric(*args: str, socket_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AIFABRIC_CONTROL_SOCKET": str(socket_path)}
    return subprocess.run([sys.executable, "-m", "aifabric.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO, check=False)


@pytest.mark.parametrize("raw, why", [
    (b"not json", "not one line of JSON"),
    (b'["fail_switch", "s0"]', "exactly"),
    (b'{"op": "fail_switch", "args": ["s0"], "then": "rm -rf /"}', "exactly"),
    (b'{"op": "__import__", "args": ["os"]}', "unknown op"),
    (b'{"op": "fail_link", "args": ["s0"]}', "takes 2"),
    (b'{"op": "fail_switch", "args": ["s0; reboot"]}', "bad node name"),
    (b'{"op": "fail_switch", "args": [7]}', "bad node name"),
    (b'{"op": "fail_switch", "args": ["' + b"a" * MAX_REQUEST + b'"]}', "longer than"),
])
def test_bad_requests_are_refused(raw, why):
    with pytest.raises(RequestError, match=why):
        parse_request(raw)


def test_good_request_parses():
    req = parse_request(b'{"op": "restore_link", "args": ["l0", "s1"]}')
    assert (req.op, req.args) == ("restore_link", ("l0", "s1"))


def test_cli_says_no_fabric_runs(tmp_path):
    result = aifabric("fail", "switch", "s0", socket_path=tmp_path / "none.sock")
    assert result.returncode == 2
    assert "no fabric running" in result.stderr


def test_cli_refuses_bad_names_before_sending(tmp_path):
    result = aifabric("fail", "link", "l0", "s0;id", socket_path=tmp_path / "none.sock")
    assert result.returncode == 2 and "bad node name 's0;id'" in result.stderr


def _raw(path: Path, data: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(data)
        return json.loads(s.makefile("rb").readline())


def _reach_all(lab: Lab, may_retry: set[tuple[str, str]] = frozenset()) -> None:
    """Every pair reached; only pairs in ``may_retry`` may have lost their first echo request."""
    reach = checks.all_pairs(lab, "ipv4")
    assert reach.reached == reach.pairs == 12, f"unreached {reach.failures()}"
    lost_first = set(reach.needed_retry) - set(may_retry)
    assert not lost_first, f"pairs whose first echo request was lost: {sorted(lost_first)}"


def _across_leaves(lab: Lab) -> set[tuple[str, str]]:
    """Host pairs on different leaves: the ones whose paths may cross a spine link."""
    hosts = lab.fabric.hosts
    return {(a.name, b.name) for a in hosts for b in hosts if a.switch != b.switch}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")
@pytest.mark.parametrize("target", FABRIC_TARGETS)
def test_fail_and_restore_links_and_switches(target, tmp_path):
    fabric = leaf_spine(2, 2, 2)
    busy = [s.name for s in fabric.switches if port_accepts(s.grpc_port)]
    assert not busy, f"gRPC ports of {busy} are taken: another fabric is running"
    sock = tmp_path / "run" / "control.sock"
    with Lab(fabric, target=target, log_dir=tmp_path) as lab:
        failures = Failures(lab)
        with ControlServer(failures, sock):
            assert os.stat(sock).st_mode & 0o777 == 0o600
            assert os.stat(sock.parent).st_mode & 0o777 == 0o700

            # a link, through the CLI: both interfaces down, then up, and every pair reaches again
            # (on BMv2 the link's ends drop what they send instead: see Failures.link_mode)
            cut = (lambda i: not interface_up(None, i)) if target == "softswitch" else blackholed
            result = aifabric("fail", "link", "l0", "s0", socket_path=sock)
            assert result.returncode == 0, result.stderr
            assert cut("l0-eth3") and cut("s0-eth1")
            assert not cut("l0-eth4")
            result = aifabric("restore", "link", "s0", "l0", socket_path=sock)
            assert result.returncode == 0, result.stderr
            assert not cut("l0-eth3") and not cut("s0-eth1")
            _reach_all(lab)

            # a host's link: the host end lives in the host's namespace
            failures.fail_link("l1h1", "l1")
            host_pid = lab.host("l1h1").shell.pid
            assert not interface_up(host_pid, "l1h1-eth0")
            assert "state DOWN" in subprocess.run(["ip", "link", "show", "l1-eth2"], capture_output=True,
                                                  text=True, check=True).stdout     # down, or no carrier
            failures.restore_link("l1", "l1h1")
            assert interface_up(host_pid, "l1h1-eth0")
            _reach_all(lab)     # also from and to l1h1: its routes are back

            # told at once (inform_controller), the controller routes around a link while it is down
            oracle = Failures(lab, inform_controller=True)
            event = oracle.fail_link("l0", "s1")
            assert lab.controller.model.down_links() == [("l0", "s1")]
            assert "controller_s" in event.detail
            _reach_all(lab)
            oracle.restore_link("l0", "s1")
            assert lab.controller.model.down_links() == []
            _reach_all(lab)

            # names the fabric does not have, and malformed requests, change nothing
            result = aifabric("fail", "switch", "nosuch", socket_path=sock)
            assert result.returncode == 1 and "unknown switch 'nosuch'" in result.stderr
            result = aifabric("fail", "switch", "l0h0", socket_path=sock)
            assert result.returncode == 1 and "a host, not a switch" in result.stderr
            result = aifabric("fail", "link", "l0", "l1", socket_path=sock)
            assert result.returncode == 1 and "no link between l0 and l1" in result.stderr
            for raw in (b"junk\n", b'{"op": "fail_switch", "args": ["s1"], "x": 1}\n', b"{" * (MAX_REQUEST + 1)):
                answer = _raw(sock, raw)
                assert answer["ok"] is False, answer
            pids = lab.switch_pids()
            assert all(lab.switch(n).process.poll() is None for n in pids)

            # a switch: exactly its process dies; restored, it forwards for every pair again
            failures.fail_switch("s1")
            assert lab.switch("s1").process.poll() is not None
            assert not port_accepts(fabric.switch("s1").grpc_port)
            assert {n: lab.switch(n).process.pid for n in pids if n != "s1"} == \
                   {n: p for n, p in pids.items() if n != "s1"}
            with pytest.raises(FailureError, match="s1 is not running"):
                failures.fail_switch("s1")
            result = aifabric("restore", "switch", "s1", socket_path=sock)
            assert result.returncode == 0, result.stderr
            assert lab.switch("s1").process.pid != pids["s1"]
            assert lab.controller.status()["s1"].pipeline_pushes == 2
            _reach_all(lab)
            assert [e.action for e in failures.events] == [
                "fail_link", "restore_link", "fail_link", "restore_link", "fail_switch", "restore_switch"]
            assert all(e.start <= e.end for e in failures.events)
        assert not sock.exists()


def _wait(condition, what: str, timeout: float = 20.0) -> None:
    """Until ``condition()`` holds; the test fails naming ``what`` otherwise (no time is asserted)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")
@pytest.mark.parametrize("target", FABRIC_TARGETS)
def test_all_pairs_reach_while_a_spine_link_is_down_with_heartbeats(target, tmp_path):
    """The failover handler (controller.failover, heartbeats) finds the failed link by itself and
    every pair reaches while it is down; restored, the handler sees it alive and all pairs reach."""
    fabric = leaf_spine(2, 2, 2)
    with Lab(fabric, target=target, log_dir=tmp_path, failover=HeartbeatConfig()) as lab:
        handler = lab.failure_handler
        _wait(lambda: handler.link_up("l0", "s1"), "l0-s1 alive")
        reroutes = len(handler.reroutes)
        failures = Failures(lab)
        failures.fail_link("l0", "s1")
        _wait(lambda: not handler.link_up("l0", "s1"), "l0-s1 found dead by the heartbeats")
        # until the reroute takes s1 out of l1's choices, what s1 gets for l0 is lost: the pings
        # that must all be answered the first time come after it
        _wait(lambda: len(handler.reroutes) > reroutes, "the reroute around l0-s1")
        assert lab.controller.wait_in_sync(30)
        # seen after the reroute: 3 of the 8 pairs across the leaves lost their first echo
        # request (not yet explained; see the issue); pairs on one leaf never cross a spine
        _reach_all(lab, may_retry=_across_leaves(lab))
        reroutes = len(handler.reroutes)
        failures.restore_link("l0", "s1")
        _wait(lambda: handler.link_up("l0", "s1"), "l0-s1 alive again")
        # alive again starts a reroute back; pairs across the leaves lost their first echo request
        # while it ran (seen on a busy machine): every pair must reach once the routes are back
        _wait(lambda: rerouted_back(handler, reroutes), "the reroute back over l0-s1")
        assert lab.controller.wait_in_sync(30)
        _reach_all(lab)
