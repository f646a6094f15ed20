"""The softswitch command line: bad input gives one line naming the problem, a non-zero exit
and nothing left behind; good input gives a switch that answers and stops cleanly."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topologies.testbed import Testbed

SOFTSWITCH = str(Path(sys.executable).parent / "softswitch")
CTL = str(Path(sys.executable).parent / "softswitch-ctl")
REPO = Path(__file__).resolve().parent.parent
BASIC_JSON = REPO / "tests/p4/build/basic_router.json"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (raw sockets, veths)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([SOFTSWITCH, *args], capture_output=True, text=True, timeout=timeout)


def _assert_one_line_error(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode != 0, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line, got: {res.stderr!r}"
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("args, words", [
    (["--no-p4", "-i", "1@no-such-if0", "--grpc-server-addr", "127.0.0.1:{port}"], ["no-such-if0", "does not exist"]),
    (["--no-p4", "-i", "1veth", "--grpc-server-addr", "127.0.0.1:{port}"], ["1veth", "PORT@IFACE"]),
    (["--no-p4", "-i", "x@lo", "--grpc-server-addr", "127.0.0.1:{port}"], ["'x'", "not a number"]),
    (["/nonexistent/prog.json", "--grpc-server-addr", "127.0.0.1:{port}"], ["/nonexistent/prog.json"]),
    ([], ["no program"]),
    (["--no-p4", "--cpu-port", "600", "--grpc-server-addr", "127.0.0.1:{port}"], ["--cpu-port", "600"]),
])
def test_bad_input_is_one_line_and_leaves_nothing(args, words):
    port = _free_port()
    res = run_cli(*[a.format(port=port) for a in args])
    _assert_one_line_error(res, *words)
    assert not _listening(port)


def test_bad_flag_value_is_one_line_too():
    res = run_cli("--no-p4", "--grpc-server-addr", "nonsense")
    _assert_one_line_error(res, "nonsense", "HOST:PORT")
    _assert_one_line_error(run_cli("--no-such-flag"), "--no-such-flag")


def test_malformed_json_names_the_problem(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"header_types": [ {"name": "h", "fields": [["f", -3]]} ]')
    res = run_cli(str(bad), "--grpc-server-addr", f"127.0.0.1:{_free_port()}")
    _assert_one_line_error(res, "not valid JSON")
    bad.write_text('{"header_types": [{"name": "h", "id": 0, "fields": [["f", -3]]}]}')
    res = run_cli(str(bad), "--grpc-server-addr", f"127.0.0.1:{_free_port()}")
    _assert_one_line_error(res, "field 'f'", "-3")


def test_busy_grpc_port_and_duplicate_ports_fail_cleanly():
    with Testbed(nports=1, prefix="clib") as tb:
        iface = tb.ports[1].switch_iface
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            res = run_cli("--no-p4", "-i", f"1@{iface}", "--grpc-server-addr", f"127.0.0.1:{port}")
            _assert_one_line_error(res, f"127.0.0.1:{port}")
        res = run_cli("--no-p4", "-i", f"1@{iface}", "-i", f"2@{iface}", "--grpc-server-addr",
                      f"127.0.0.1:{_free_port()}")
        _assert_one_line_error(res, iface, "twice")


def test_starts_answers_runtime_commands_and_stops_on_sigterm():
    with Testbed(nports=2, prefix="clig") as tb:
        grpc_port, ctl_port = _free_port(), _free_port()
        proc = subprocess.Popen([SOFTSWITCH, str(BASIC_JSON), "-i", f"1@{tb.ports[1].switch_iface}",
                                 "-i", f"2@{tb.ports[2].switch_iface}", "--", "--grpc-server-addr",
                                 f"127.0.0.1:{grpc_port}", "--runtime-addr", f"127.0.0.1:{ctl_port}",
                                 "--queue-rate", "100@2", "--log-level", "warn"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 20
            while not _listening(grpc_port):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "P4Runtime port never answered"
                time.sleep(0.05)
            ctl = lambda *c: subprocess.run([CTL, "--addr", f"127.0.0.1:{ctl_port}", *c],  # noqa: E731
                                            capture_output=True, text=True, timeout=10)
            assert '"rate_pps": 100' in ctl("get_queue", "2").stdout
            assert ctl("set_queue_rate", "250", "2").stdout.strip() == "ok"
            assert '"rate_pps": 250' in ctl("get_queue", "2").stdout
            assert ctl("set_queue_depth", "8", "2").stdout.strip() == "ok"
            assert '"depth": 8' in ctl("get_queue", "2").stdout
            bad = ctl("set_queue_rate", "fast")
            assert bad.returncode == 1 and bad.stdout.startswith("error")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        assert proc.returncode == 0
        assert not _listening(grpc_port) and not _listening(ctl_port)
