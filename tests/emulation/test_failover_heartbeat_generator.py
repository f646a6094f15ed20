"""The link-heartbeat generator (emulation/failover_heartbeat_generator.py): its frames, its command
line, and the real process writing into a real veth pair at its interval."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from emulation import failover_heartbeat_generator as hbgen

SWITCH = "s97"      # a switch-like name: `aifabric clean` would find its generator link
INTERVAL_MS, WINDOW_S = 10.0, 1.0
SO_TIMESTAMPNS = 35     # Linux's (asm-generic/socket.h); Python's socket module does not name it


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
    gen = hbgen.HeartbeatGenerator({SWITCH: [4, 3]}, INTERVAL_MS, tmp_path, log_file=tmp_path / "gen.log")
    try:
        sock.bind((end, 0))
        sock.settimeout(0.1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)   # the kernel's arrival times
        gen.start()
        frames, stamps = [], []           # a second of frames from the first (its start is not timed)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and (not stamps or stamps[-1] - stamps[0] < WINDOW_S):
            try:
                frame, ancillary, _, _ = sock.recvmsg(2048, 64)
            except TimeoutError:
                continue
            seconds, nanoseconds = struct.unpack("qq", ancillary[0][2][:16])
            frames.append(frame)
            stamps.append(seconds + nanoseconds / 1e9)
        assert gen.running()
    finally:
        gen.stop()
        sock.close()
        subprocess.run(["ip", "link", "del", end], check=False)
    ports = [int.from_bytes(f[14:16], "big") for f in frames]
    # one frame per port and interval: never more (no burst), in pairs, and a port's frames
    # spaced by the interval in the median (a starved tick is late, the next one is on time;
    # the kernel's arrival times, so this test's own wake-ups do not count)
    assert abs(ports.count(3) - ports.count(4)) <= 1, ports
    assert ports.count(3) <= WINDOW_S * 1000 / INTERVAL_MS + 2, f"{ports.count(3)} frames of port 3 in {WINDOW_S} s"
    times = [t for t, p in zip(stamps, ports) if p == 3]
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    assert len(gaps) >= 5 and 0.5 <= gaps[len(gaps) // 2] * 1000 / INTERVAL_MS <= 1.5, gaps
    assert set(ports) == {3, 4} and all(f == hbgen.frame(p) for f, p in zip(frames, ports))
    assert not gen.running()
    assert "frames sent" in (tmp_path / "gen.log").read_text()      # it ended on SIGTERM, cleanly
    assert not Path(f"/sys/class/net/{hbgen.generator_interface(SWITCH)}").exists()
