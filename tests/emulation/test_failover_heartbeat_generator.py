"""The link-heartbeat generator (emulation/failover_heartbeat_generator.py): its frames, its command
line, and the real process writing into a real veth pair at its interval."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from emulation import failover_heartbeat_generator as hbgen

SWITCH = "s97"      # a switch-like name: `aifabric clean` would find its generator link


def test_frame_names_its_port_in_a_minimal_ethernet_frame():
    f = hbgen.frame(300)
    assert len(f) == hbgen.MIN_FRAME
    assert f[:6] == b"\xff" * 6 and int.from_bytes(f[12:14], "big") == 0x88B6
    assert int.from_bytes(f[14:16], "big") == 300 and f[16:] == bytes(len(f) - 16)
    with pytest.raises(ValueError, match="512"):
        hbgen.frame(512)


@pytest.mark.parametrize("item", ["p0e0", "p0e0=", "=3", "p0e0=3,x", "p0e0=0", f"p0e0={hbgen.GEN_PORT}", "p0e0=512"])
def test_a_bad_plan_is_refused_naming_it(item, capsys):
    with pytest.raises(SystemExit) as exc:
        hbgen.main(["--interval-ms", "10", item])
    assert repr(item) in str(exc.value) and "SWITCH=PORT" in str(exc.value)


def test_a_bad_interval_is_refused(capsys):
    with pytest.raises(SystemExit):
        hbgen.main(["--interval-ms", "0", "p0e0=3"])
    assert "--interval-ms must be > 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="interval"):
        hbgen.HeartbeatGenerator({"p0e0": [3]}, 0, Path("/tmp"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veth pairs, raw sockets)")
def test_the_generator_writes_one_frame_per_port_and_interval_into_the_switch_end(tmp_path):
    end = hbgen.add_link(SWITCH)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88B6))
    gen = hbgen.HeartbeatGenerator({SWITCH: [4, 3]}, 10.0, tmp_path, log_file=tmp_path / "gen.log")
    try:
        sock.bind((end, 0))
        sock.settimeout(0.1)
        gen.start()
        frames, deadline = [], time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                frames.append(sock.recv(2048))
            except TimeoutError:
                pass
        assert gen.running()
    finally:
        gen.stop()
        sock.close()
        subprocess.run(["ip", "link", "del", end], check=False)
    ports = [int.from_bytes(f[14:16], "big") for f in frames]
    # about 100 a second each (1 s; the start and a loaded machine cost some)
    assert 50 <= ports.count(3) <= 110 and 50 <= ports.count(4) <= 110, f"{ports.count(3)}, {ports.count(4)}"
    assert set(ports) == {3, 4} and all(f == hbgen.frame(p) for f, p in zip(frames, ports))
    assert not gen.running()
    assert "frames sent" in (tmp_path / "gen.log").read_text()      # it ended on SIGTERM, cleanly
    assert not Path(f"/sys/class/net/{hbgen.generator_interface(SWITCH)}").exists()
