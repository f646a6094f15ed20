"""The softswitch command line: bad input gives one line naming the problem, a non-zero exit
and nothing left behind; good input gives a switch that answers and stops cleanly."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from emulation.testbed import Testbed

SOFTSWITCH = str(Path(sys.executable).parent / "softswitch")
CTL = str(Path(sys.executable).parent / "softswitch-ctl")
REPO = Path(__file__).resolve().parents[2]
BASIC_JSON = REPO / "tests/p4/build/basic_router.json"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (raw sockets, veths)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([SOFTSWITCH, *args], capture_output=True, text=True, timeout=timeout)


def run_ctl(*args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=timeout)


def _assert_one_line_error(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode != 0, res
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line, got: {res.stderr!r}"
    assert "Traceback" not in res.stderr
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
    (["--no-p4", "--device-id", "-1", "--grpc-server-addr", "127.0.0.1:{port}"], ["--device-id -1", "uint64"]),
    (["--no-p4", "--device-id", str(2**64), "--grpc-server-addr", "127.0.0.1:{port}"], [f"--device-id {2**64}"]),
    (["--no-p4", "--queue-rate", str(10**30), "--grpc-server-addr", "127.0.0.1:{port}"], ["--queue-rate", str(10**30)]),
    (["--no-p4", "-i", "1@lo", "--queue-rate", "1000@99", "--grpc-server-addr", "127.0.0.1:{port}"],
     ["1000@99", "port 99", "ports: 1"]),
    (["--no-p4", "--queue-depth", "0", "--grpc-server-addr", "127.0.0.1:{port}"], ["--queue-depth", "depth 0"]),
    (["--no-p4", "--queue-bitrate", "999", "--grpc-server-addr", "127.0.0.1:{port}"],
     ["--queue-bitrate", "999 bits/s", "1000..400000000000"]),
    (["--no-p4", "--priority-queues", "9", "--grpc-server-addr", "127.0.0.1:{port}"],
     ["--priority-queues", "9 priority queues", "1..8"]),
    (["--no-p4", "--log-file", "/nonexistent-dir/sw.log", "--grpc-server-addr", "127.0.0.1:{port}"],
     ["cannot write log file /nonexistent-dir/sw.log", "directory /nonexistent-dir does not exist"]),
    (["--no-p4", "--runtime-addr", "127.0.0.1:abc", "--grpc-server-addr", "127.0.0.1:{port}"],
     ["127.0.0.1:abc", "port 'abc'"]),
])
def test_bad_input_is_one_line_and_leaves_nothing(args, words):
    port = _free_port()
    res = run_cli(*[a.format(port=port) for a in args])
    assert res.returncode == 2, res
    _assert_one_line_error(res, *words)
    assert not _listening(port)


@pytest.mark.parametrize("args, words", [
    (["--addr", "localhost", "stats"], ["'localhost'", "HOST:PORT"]),
    (["--addr", "127.0.0.1:abc", "stats"], ["'127.0.0.1:abc'", "port 'abc'"]),
    (["--addr", "127.0.0.1:0", "stats"], ["'127.0.0.1:0'", "1..65535"]),
    (["--addr", "127.0.0.1:65536", "stats"], ["'127.0.0.1:65536'", "1..65535"]),
    (["--addr", ":9090", "stats"], ["':9090'", "HOST:PORT"]),
    (["--addr", "127.0.0.1:9090", ""], ["empty command"]),
    (["--addr", "127.0.0.1:9090", "stats", "x" * 5000], ["4096 bytes"]),
])
def test_ctl_bad_input_is_one_line_exit_2(args, words):
    res = run_ctl(*args)
    assert res.returncode == 2, res
    _assert_one_line_error(res, *words)


def test_ctl_unreachable_switch_is_one_line_exit_2():
    port = _free_port()          # nothing listens there
    res = run_ctl("--addr", f"127.0.0.1:{port}", "stats")
    assert res.returncode == 2, res
    _assert_one_line_error(res, f"127.0.0.1:{port}", "cannot reach")


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


@contextmanager
def _running_switch(tb: Testbed, *extra: str) -> Iterator[tuple[subprocess.Popen, int, int]]:
    """softswitch on the test bench's ports with a runtime control port: (process, gRPC port,
    control port), ready; stopped with SIGTERM on exit."""
    grpc_port, ctl_port = _free_port(), _free_port()
    ifaces = [a for n, p in sorted(tb.ports.items()) for a in ("-i", f"{n}@{p.switch_iface}")]
    proc = subprocess.Popen([SOFTSWITCH, str(BASIC_JSON), *ifaces, "--", "--grpc-server-addr",
                             f"127.0.0.1:{grpc_port}", "--runtime-addr", f"127.0.0.1:{ctl_port}",
                             "--log-level", "warn", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        # both ports: once, in a full test run, the P4Runtime port answered and the control port
        # then refused the test's connection (cause not found; a port picked free here can be
        # taken by another process before the switch binds it)
        while not (_listening(grpc_port) and _listening(ctl_port)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "P4Runtime or control port never answered"
            time.sleep(0.05)
        yield proc, grpc_port, ctl_port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_starts_answers_runtime_commands_and_stops_on_sigterm():
    with Testbed(nports=2, prefix="clig") as tb:
        with _running_switch(tb, "--queue-rate", "100@2", "--queue-bitrate", "10000000@1",
                             "--priority-queues", "4") as (proc, grpc_port, ctl_port):
            ctl = lambda *c: run_ctl("--addr", f"127.0.0.1:{ctl_port}", *c)  # noqa: E731
            assert '"rate_pps": 100, "bitrate": 0' in ctl("get_queue", "2").stdout
            assert '"rate_pps": 0, "bitrate": 10000000' in ctl("get_queue", "1").stdout
            assert '"priority_queues": 4' in ctl("get_queue", "2").stdout
            assert ctl("set_queue_bitrate", "40000000000", "2").stdout.strip() == "ok"
            assert '"rate_pps": 0, "bitrate": 40000000000' in ctl("get_queue", "2").stdout
            assert ctl("set_queue_rate", "250", "2").stdout.strip() == "ok"
            assert '"rate_pps": 250, "bitrate": 0' in ctl("get_queue", "2").stdout
            assert ctl("set_queue_depth", "8", "2").stdout.strip() == "ok"
            assert '"depth": 8' in ctl("get_queue", "2").stdout
            bad = ctl("set_queue_rate", "fast")
            assert bad.returncode == 1 and bad.stdout.startswith("error")
        assert proc.returncode == 0
        assert not _listening(grpc_port) and not _listening(ctl_port)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def _answer(sock: socket.socket) -> bytes:
    """What the server sends until it closes (a reset after its answer counts as closed)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_control_port_bounds_lines_and_refuses_bad_values():
    with Testbed(nports=2, prefix="clic") as tb:
        with _running_switch(tb) as (proc, _, ctl_port):
            rss_before = _rss_kib(proc.pid)
            with socket.create_connection(("127.0.0.1", ctl_port), timeout=10) as s:
                try:                              # 10 MB, no newline: refused after 4 KiB
                    for _ in range(160):
                        s.sendall(b"x" * 65536)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                answer = _answer(s)
            assert answer.startswith(b"error:") and b"4096 bytes" in answer, answer
            assert answer.count(b"\n") == 1, answer
            grown_kib = _rss_kib(proc.pid) - rss_before
            assert grown_kib < 4096, f"the switch grew by {grown_kib} KiB reading one line"

            with socket.create_connection(("127.0.0.1", ctl_port), timeout=10) as s:
                f = s.makefile("rwb")
                for line, words in ((b"\n", [b"empty command"]), (b"   \n", [b"empty command"]),
                                    (b"set_queue_rate 1000 99\n", [b"port 99", b"ports: 1, 2"]),
                                    (f"set_queue_rate {10**30} 1\n".encode(), [str(10**30).encode(), b"10000000"]),
                                    (b"set_queue_bitrate 999 1\n", [b"bit rate 999 bits/s", b"1000..400000000000"]),
                                    (b"set_queue_bitrate 1000 99\n", [b"port 99", b"ports: 1, 2"]),
                                    (b"set_queue_depth 0 1\n", [b"depth 0"]),
                                    (b"get_queue 99\n", [b"port 99"])):
                    f.write(line)
                    f.flush()
                    reply = f.readline()            # the socket timeout fails the test if none comes
                    assert reply.startswith(b"error:"), (line, reply)
                    for w in words:
                        assert w in reply, (line, reply)
            ok = run_ctl("--addr", f"127.0.0.1:{ctl_port}", "get_queue", "1")
            assert ok.returncode == 0 and '"port": 1' in ok.stdout, ok
        assert proc.returncode == 0
