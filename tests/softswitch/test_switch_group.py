"""``softswitch group FILE``: many devices in one process (softswitch/group.py).

A bad line, or two lines claiming the same device id, address or interface, is refused naming
the line, before anything starts; a group's devices each answer P4Runtime on their own address
with their own device id, take their own pipeline and stop together on SIGTERM; each runs its own
ports on AF_XDP sockets, and the group leaves no XDP program on them when it stops."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.switch import SwitchConnection
from emulation.p4switch import port_accepts
from emulation.testbed import CONNECT_TIMEOUT_S, Testbed, free_tcp_port
from softswitch.ctl import send_command
from softswitch.options import CliError
from softswitch.group import read_configs
from tests.scenarios.runner import load_p4info, program_files

SOFTSWITCH = str(Path(sys.executable).parent / "softswitch")


@pytest.mark.parametrize("lines, words", [
    (["--device-id 1 --no-p4", "--device-id 1 --no-p4 --grpc-server-addr 127.0.0.1:9"], "line 2: device id 1 is line 1's"),
    (["--device-id 1 --no-p4 --grpc-server-addr 127.0.0.1:9", "--device-id 2 --no-p4 --grpc-server-addr 127.0.0.1:9"],
     "line 2: P4Runtime address 127.0.0.1:9 is line 1's"),
    (["--device-id 1 --no-p4 -i 1@veth9", "", "# a comment", "--device-id 2 --no-p4 --grpc-server-addr 127.0.0.1:8 -i 2@veth9"],
     "line 4: interface veth9 is line 1's"),
    (["--device-id 1 --no-p4 --runtime-addr 127.0.0.1:7",
      "--device-id 2 --no-p4 --grpc-server-addr 127.0.0.1:8 --runtime-addr 127.0.0.1:7"], "line 2: run-time control address"),
    (["--device-id one --no-p4"], "line 1: argument --device-id: invalid int value: 'one'"),
    (["--device-id 1"], "line 1: no program"),
    (["", "# nothing"], "no devices"),
])
def test_a_bad_file_is_refused_naming_the_line(tmp_path: Path, lines: list[str], words: str):
    path = tmp_path / "switches"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CliError, match=words):
        read_configs(str(path))
    res = subprocess.run([SOFTSWITCH, "group", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and words.split(":")[-1].strip() in res.stderr, res.stderr


def test_the_devices_of_a_group_answer_each_on_its_own_address(tmp_path: Path):
    ports = [free_tcp_port() for _ in range(3)]
    path = tmp_path / "switches"
    path.write_text("".join(f"--device-id {n + 1} --no-p4 --grpc-server-addr 127.0.0.1:{port}\n"
                            for n, port in enumerate(ports)))
    json_path, p4info_path = program_files("fabric")
    info = load_p4info(p4info_path)
    group = subprocess.Popen([SOFTSWITCH, "group", str(path), "--log-file", str(tmp_path / "group.log")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert group.stdout.readline().startswith("softswitch group: 3 devices ready")
        for n, port in enumerate(ports):
            conn = SwitchConnection(f"s{n + 1}", f"127.0.0.1:{port}", device_id=n + 1)
            conn.connect(timeout=CONNECT_TIMEOUT_S)
            try:
                if n < 2:                          # the third keeps no pipeline: they are apart
                    conn.set_pipeline(info, json_path.read_bytes())
                assert (conn.pipeline_cookie() is not None) is (n < 2)
            finally:
                conn.close()
        group.send_signal(signal.SIGTERM)
        assert group.wait(timeout=30) == 0
        assert not any(port_accepts(port) for port in ports)
    finally:
        group.kill()
        group.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, namespaces, XDP)")
def test_a_group_s_devices_run_their_ports_on_af_xdp_and_leave_no_program(tmp_path: Path):
    """Two devices on two veths each (queueing.p4: 1 -> 2 on the first, 3 -> 4 on the second)."""
    from scenarios.queueing import _frame
    from test_af_xdp import push
    from test_native_dataplane import xdp_programs
    if not program_files("queueing")[0].exists():
        pytest.skip("tests/p4/build/queueing.json is not built")
    with Testbed(nports=4, prefix=f"gx{os.getpid() % 1000}") as tb:
        grpc, ctl = [free_tcp_port() for _ in range(2)], [free_tcp_port() for _ in range(2)]
        path = tmp_path / "switches"
        path.write_text("".join(
            f"--device-id {d + 1} --no-p4 --grpc-server-addr 127.0.0.1:{grpc[d]} --runtime-addr 127.0.0.1:{ctl[d]} "
            f"--native on --compiled off --port-io af_xdp "
            + " ".join(f"-i {n}@{tb.ports[n].switch_iface}" for n in ports) + "\n"
            for d, ports in enumerate(((1, 2), (3, 4)))))
        group = subprocess.Popen([SOFTSWITCH, "group", str(path), "--log-file", str(tmp_path / "group.log")],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert group.stdout.readline().startswith("softswitch group: 2 devices ready")
            for d in range(2):
                push(f"127.0.0.1:{grpc[d]}", d + 1)
                assert json.loads(send_command(f"127.0.0.1:{ctl[d]}", "packet_path"))["port_io"] == "af_xdp (copy mode)"
            ifaces = [hp.switch_iface for hp in tb.ports.values()]
            assert xdp_programs(ifaces) == ifaces
            for src, dst in ((1, 2), (3, 4)):
                for i in range(5):
                    tb.ports[src].send(_frame(i))
                assert len([f for f in tb.ports[dst].receive(timeout=3, count=5) if b"queue me" in f]) == 5
            group.send_signal(signal.SIGTERM)
            assert group.wait(timeout=30) == 0
            assert xdp_programs(ifaces) == []
        finally:
            group.kill()
            group.wait()
