"""The aifabric command: bad input fails at once with one line; an error halfway through
bring-up or a Ctrl-C during a demo leaves no process, namespace or interface behind."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topologies.fabric import fat_tree
from topologies.p4switch import cleanup, port_accepts

AIFABRIC = str(Path(sys.executable).parent / "aifabric")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([AIFABRIC, *args], capture_output=True, text=True, timeout=timeout)


def assert_nothing_left() -> None:
    left = cleanup()
    assert not left.killed and not left.links_deleted, f"left behind: {left}"


def error_line(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("...")]
    assert len(lines) == 1, f"expected one error line, got {res.stderr!r}"
    return lines[0]


@pytest.mark.parametrize("args, words", [
    (["demo", "--k", "3"], ["k=3", "odd"]),
    (["up", "--topo", "fattree", "--k", "0"], ["k=0"]),
    (["up", "--topo", "torus"], ["torus", "invalid choice"]),
    (["demo", "--target", "tofino"], ["tofino", "invalid choice"]),
    (["demo", "--p4-build", "/nonexistent/build"], ["/nonexistent/build", "does not exist"]),
])
def test_bad_input_is_one_line_and_starts_nothing(args, words):
    res = run(*args)
    assert res.returncode == 2, res
    line = error_line(res)
    for w in words:
        assert w in line, f"{w!r} not in {line!r}"
    assert_nothing_left()


def test_a_switch_failing_halfway_tears_everything_down():
    busy_switch = fat_tree(4).switches[4]
    if port_accepts(busy_switch.grpc_port):
        pytest.skip(f"port {busy_switch.grpc_port} is already in use on this machine")
    with socket.socket() as blocker:          # the switch's gRPC port is taken
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("127.0.0.1", busy_switch.grpc_port))
        blocker.listen()
        res = run("demo", "--target", "softswitch", timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert busy_switch.name in res.stderr and str(busy_switch.grpc_port) in res.stderr
    assert_nothing_left()


def test_ctrl_c_during_the_demo_tears_everything_down():
    proc = subprocess.Popen([AIFABRIC, "demo", "--target", "softswitch"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        for line in proc.stderr:                  # wait until the fabric is up and working
            if "reachability" in line:
                break
            assert time.monotonic() < deadline, "the demo never got to its checks"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "torn down" in err
    assert_nothing_left()
