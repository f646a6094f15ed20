"""The aifabric command: bad input fails at once with one line; an error halfway through
bring-up or a Ctrl-C during a demo leaves no process, namespace or interface behind."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topologies.fabric import fat_tree
from aifabric.cli.validate import prepare_output
from teardown_check import assert_torn_down
from emulation.p4switch import BMV2, port_accepts

AIFABRIC = str(Path(sys.executable).parent / "aifabric")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([AIFABRIC, *args], capture_output=True, text=True, timeout=timeout)


def assert_nothing_left() -> None:
    assert_torn_down(fat_tree(4))     # what `aifabric demo` runs


def error_line(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("...")]
    assert len(lines) == 1, f"expected one error line, got {res.stderr!r}"
    return lines[0]


def _processes_naming(text: str) -> list[str]:
    """Command lines of the running processes that mention ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and int(entry.name) != os.getpid() and text in argv:
            found.append(argv)
    return found


@pytest.mark.parametrize("args, words", [
    (["demo", "--k", "3"], ["k=3", "odd"]),
    (["up", "--topo", "fattree", "--k", "0"], ["k=0"]),
    (["up", "--topo", "torus"], ["torus", "invalid choice"]),
    (["demo", "--target", "tofino"], ["tofino", "invalid choice"]),
    (["demo", "--p4-build", "/nonexistent/build"], ["/nonexistent/build", "does not exist"]),
    (["demo", "--k", "100"], ["--k 100", "12500 switches", "GiB", "available"]),
    (["up", "--k", "100"], ["--k 100", "12500 switches", "GiB"]),
    (["up", "--topo", "leafspine", "--leaves", "254", "--spines", "200", "--hosts-per-leaf", "50"],
     ["--leaves 254", "454 switches", "GiB"]),
    (["up", "--topo", "rail", "--gpus", "0"], ["rail-optimised gpus=0"]),
    (["up", "--topo", "dualplane", "--hosts-per-leaf", "300"], ["dual-plane", "300 hosts on one switch"]),
    (["up", "--topo", "dragonfly", "--groups", "1"], ["dragonfly groups=1"]),
    (["demo", "int", "--seconds", "-1"], ["--seconds -1", "> 0"]),
    (["demo", "int", "--seconds", "3600"], ["--seconds 3600", "at most"]),
    (["demo", "int", "--seconds", "nan"], ["--seconds nan"]),
    pytest.param(["demo", "--target", "bmv2"], ["bmv2", BMV2, "not on PATH"],
                 marks=pytest.mark.skipif(shutil.which(BMV2) is not None, reason=f"{BMV2} is installed")),
    (["up", "--metrics", "127.0.0.1:9100"], ["--metrics needs --int"]),
    (["up", "--int", "--metrics", "localhost"], ["--metrics", "'localhost'", "HOST:PORT"]),
    (["up", "--int", "--metrics", "127.0.0.1:abc"], ["--metrics", "'127.0.0.1:abc'", "port 'abc'"]),
    (["up", "--int", "--metrics", "127.0.0.1:{busy}"], ["--metrics 127.0.0.1:{busy}", "cannot listen"]),
    (["demo", "--json", "{tmp}/a-file/figures.json"], ["--json {tmp}/a-file/figures.json", "not a directory"]),
    (["demo", "--json", "/proc/no-such-dir/figures.json"], ["--json /proc/no-such-dir/figures.json", "cannot create"]),
    (["demo", "int", "--png", "{tmp}"], ["--png {tmp}", "is a directory"]),
    (["up", "--controller", "none", "--int"], ["--controller none", "--int needs our controller"]),
    (["up", "--controller", "none", "--failover"], ["--controller none", "--failover needs our controller"]),
    (["up", "--failover", "--heartbeat-ms", "0"], ["--heartbeat-ms 0", "interval_ms must be > 0"]),
    (["up", "--failover", "--heartbeat-multiplier", "0"], ["--heartbeat-multiplier 0", "multiplier must be >= 1"]),
    (["up", "--failover", "--link-heartbeat-ms", "-1"], ["--link-heartbeat-ms -1", "link_interval_ms must be > 0"]),
    (["up", "--failover", "--target", "softswitch", "--link-heartbeat-multiplier", "0"],
     ["--link-heartbeat-ms 10 --link-heartbeat-multiplier 0", "link_multiplier must be >= 1"]),
    (["up", "--no-reroute"], ["--no-reroute needs --failover"]),
    (["up", "--describe", "{tmp}"], ["--describe {tmp}", "is a directory"]),
    (["up", "--controller", "none", "--web", "8080"], ["--web needs our controller"]),
    (["up", "--web", "127.0.0.1:{busy}"], ["--web 127.0.0.1:{busy}", "cannot listen"]),
])
def test_bad_input_is_one_line_and_starts_nothing(args, words, tmp_path):
    """Refused before bring-up: one line and nothing else on stderr (no progress line: the lab
    never started), and no switch ever used this run's directory. Scoped to its own run
    directory, so fabrics other people run on the machine neither disturb it nor get torn down."""
    run_dir = tmp_path / "run"
    (tmp_path / "a-file").write_text("")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        fill = {"tmp": tmp_path, "busy": busy.getsockname()[1]}
        res = subprocess.run([AIFABRIC, *[a.format(**fill) for a in args]], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "AIFABRIC_RUN_DIR": str(run_dir)})
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, f"expected one line, got {res.stderr!r}"
    for w in words:
        assert w.format(**fill) in lines[0], f"{w!r} not in {lines[0]!r}"
    assert not run_dir.exists() or not any(run_dir.rglob("*")), list(run_dir.rglob("*"))
    assert not _processes_naming(str(run_dir))


def test_output_paths_get_their_directories(tmp_path):
    target = tmp_path / "out" / "deeper" / "figures.json"
    assert prepare_output("--json", str(target)) == target
    assert target.parent.is_dir() and not target.exists()
    (tmp_path / "a-dir").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        prepare_output("--json", str(tmp_path / "a-dir"))


@pytest.mark.slow
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


@pytest.mark.slow
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
