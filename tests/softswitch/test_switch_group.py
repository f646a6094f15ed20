"""``softswitch group FILE``: many devices in one process (softswitch/group.py).

A bad line, or two lines claiming the same device id, address or interface, is refused naming
the line, before anything starts; a group's devices each answer P4Runtime on their own address
with their own device id, take their own pipeline and stop together on SIGTERM."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.switch import SwitchConnection
from emulation.p4switch import port_accepts
from emulation.testbed import free_tcp_port
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
            conn.connect()
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
