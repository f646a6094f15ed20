"""The reliable transport's two host paths (hostagent.collectives.host_path). The native engine
speaks the Python reference's protocol byte for byte (each path checked against a bare UDP socket
standing for its peer), so a group mixing native and Python ranks runs every collective (RoCEv2
framing too); lost
packets are sent again and counted; a rank killed mid-call is named by every other; malformed
datagrams are counted stale and never stop a transport; where the engine cannot be built, auto
falls back to Python and says why, in stats and in a rank program's report."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from conftest import HOST_PATHS, native_missing
from loopback_ranks import fresh_net, run_parallel
from test_collectives import MATRIX, assert_equal, check_cell, tensor

from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.host_path import ENV, HostPathUnavailable, open_transport
from hostagent.collectives.native.binding import CACHE_ENV
from hostagent.collectives.reliable import (HEADER, MAGIC, PAYLOAD, SACK, Kind, ReliableTransport,
                                            TransportConfig)

PORT = 47700
GROUP = 9


@pytest.fixture(params=HOST_PATHS)
def path(request: pytest.FixtureRequest) -> str:
    if request.param == "native" and (why := native_missing()):
        pytest.skip(f"native host path: {why}")
    return request.param


def bare_peer(address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(3.0)
    return sock


def datagrams(sock: socket.socket, kind: Kind, count: int, within_s: float = 3.0) -> list[bytes]:
    """The next `count` datagrams of `kind` (heartbeats and the rest passed over)."""
    got, deadline = [], time.monotonic() + within_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count} {kind.name} datagrams within {within_s} s"
        data = sock.recv(65536)
        if data[2] == kind:
            got.append(data)
    return got


def packet(kind: Kind, src: int, seq: int, tag: int = 0, frag: int = 0, count: int = 0, body: bytes = b"",
           group: int = GROUP) -> bytes:
    return HEADER.pack(MAGIC, kind, group, src, seq, tag, frag, count) + body


@contextmanager
def facing_a_bare_peer(path: str, rank: int, rto_s: float) -> Iterator[tuple[ReliableTransport, socket.socket, list]]:
    """Rank `rank` of two on host path `path`, and a bare UDP socket where the other rank is."""
    net = fresh_net()
    peers = [(net + "10", PORT), (net + "11", PORT)]
    peer = bare_peer(peers[1 - rank])
    t = open_transport(rank, peers, GROUP, TransportConfig(host_path=path, rto_s=rto_s))
    try:
        assert t.host_path == path
        yield t, peer, peers
    finally:
        t.close()
        peer.close()


def test_data_leaves_as_the_reference_cuts_it_and_acknowledgements_are_read_as_it_writes_them(path: str) -> None:
    with facing_a_bare_peer(path, 0, rto_s=5.0) as (t, peer, peers):
        message, tag = bytes(range(256)) * 11, 0x1234_0000_0001      # 2,816 bytes: two full packets and 16 bytes
        t.send(1, tag, message, time.monotonic() + 2.0)
        assert datagrams(peer, Kind.DATA, 3) == [
            packet(Kind.DATA, 0, seq, tag, seq, 3, message[seq * PAYLOAD:(seq + 1) * PAYLOAD]) for seq in range(3)]
        peer.sendto(packet(Kind.ACK, 1, 1, body=SACK.pack(2) + SACK.pack(1)), peers[0])   # floor 1, then 2 and 1
        t.flush(time.monotonic() + 1.0)     # all three taken as acknowledged: no resend (the timeout is 5 s)
        assert t.stats.retransmissions == 0


def test_acknowledgements_are_cumulative_selective_delayed_and_at_once_for_a_copy(path: str) -> None:
    body = [bytes([i]) * PAYLOAD for i in range(2)] + [b"end"]
    with facing_a_bare_peer(path, 1, rto_s=1.5) as (t, peer, peers):     # acknowledgements delayed 0.5 s
        peer.sendto(packet(Kind.DATA, 0, 0, 7, 0, 3, body[0]), peers[1])
        peer.sendto(packet(Kind.DATA, 0, 2, 7, 2, 3, body[2]), peers[1])
        sent = time.monotonic()
        assert datagrams(peer, Kind.ACK, 1) == [packet(Kind.ACK, 1, 1, body=SACK.pack(2))]
        assert time.monotonic() - sent >= 0.3, "acknowledged before its delay"
        peer.sendto(packet(Kind.DATA, 0, 0, 7, 0, 3, body[0]), peers[1])      # a copy: acknowledged at once
        copied = time.monotonic()
        assert datagrams(peer, Kind.ACK, 1) == [packet(Kind.ACK, 1, 1, body=SACK.pack(2))]
        assert time.monotonic() - copied < 0.3, "a copy's acknowledgement waited for the delay"
        assert t.stats.duplicates == 1
        peer.sendto(packet(Kind.DATA, 0, 1, 7, 1, 3, body[1]), peers[1])
        assert t.recv(0, 7, time.monotonic() + 2.0) == b"".join(body)
        assert datagrams(peer, Kind.ACK, 1) == [packet(Kind.ACK, 1, 3)]


def test_lost_packets_are_sent_again_counted_and_every_message_arrives(path: str) -> None:
    net = fresh_net()
    peers = [(net + "10", PORT), (net + "11", PORT)]
    a = open_transport(0, peers, GROUP, TransportConfig(host_path=path, rto_s=0.02, drop_outgoing=0.1, drop_seed=4))
    b = open_transport(1, peers, GROUP, TransportConfig(host_path=path, rto_s=0.02))
    try:
        messages = [np.random.default_rng(i).integers(0, 255, 10_000 + i, dtype=np.uint8) for i in range(20)]
        deadline = time.monotonic() + 20.0
        for i, m in enumerate(messages):
            a.send(1, i, m, deadline)
        for i, m in enumerate(messages):
            assert b.recv(0, i, deadline) == m.tobytes(), f"message {i}"
        a.flush(deadline)
        s = a.stats
        assert s.dropped_on_purpose >= 10, s
        assert s.retransmissions >= s.dropped_on_purpose * 0.5, s
    finally:
        a.close()
        b.close()


def test_malformed_datagrams_are_counted_stale_and_never_stop_the_transport(path: str) -> None:
    net = fresh_net()
    peers = [(net + str(10 + r), PORT) for r in range(3)]
    junk_from = bare_peer(peers[0])
    t = open_transport(1, peers, GROUP, TransportConfig(host_path=path, rto_s=5.0))
    junk = [b"", b"C", b"XL" + bytes(40), packet(Kind.DATA, 0, 0, 1, 0, 1)[:HEADER.size - 1],
            packet(Kind.DATA, 0, 0, 1, 0, 1, b"x", group=GROUP + 1),      # another group
            packet(Kind.DATA, 7, 0, 1, 0, 1, b"x"),                         # no rank 7 in a group of 3
            packet(Kind.DATA, 1, 0, 1, 0, 1, b"x"),                         # from itself
            packet(9, 0, 0),                                                # no such kind
            packet(Kind.DATA, 0, 0, 1, 1, 1, b"x"),                         # fragment 1 of 1
            packet(Kind.DATA, 0, 0, 1, 0, 0, b"x"),                         # of no fragments
            packet(Kind.DATA, 0, 0, 1, 0, 1, bytes(PAYLOAD + 1)),           # longer than a packet carries
            packet(Kind.DATA, 0, 0, 1, 0, 2, b"short")]                     # a fragment short of the last
    partial = packet(Kind.DATA, 0, 0, 2, 0, 2, bytes(PAYLOAD))              # good: half of tag 2 ...
    mismatch = packet(Kind.DATA, 0, 1, 2, 2, 3, b"x")                      # ... whose "last of 3" says 3
    good = packet(Kind.DATA, 0, 1, 5, 0, 1, b"still here")
    try:
        for data in [*junk, partial, mismatch, good]:
            junk_from.sendto(data, peers[1])
        assert t.recv(0, 5, time.monotonic() + 3.0) == b"still here"
        deadline = time.monotonic() + 2.0
        while t.stats.packets_received < len(junk) + 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        s = t.stats
        assert (s.packets_received, s.stale) == (len(junk) + 3, len(junk) + 1), s
    finally:
        t.close()
        junk_from.close()


# --- groups of native and Python ranks --------------------------------------------------------

MIXED = ("native", "python", "native", "python", "native")


def mixed_group(net: str, port: int, **transport) -> list[ProcessGroup]:
    peers = [(net + str(10 + r), port) for r in range(len(MIXED))]
    racks = [list(range(i, min(i + 2, len(MIXED)))) for i in range(0, len(MIXED), 2)]
    return [ProcessGroup(r, peers, groups=racks, timeout_s=20.0,
                         transport=TransportConfig(host_path=p, drop_seed=r, **transport)) for r, p in enumerate(MIXED)]


@pytest.fixture(scope="module")
def mixed() -> list[ProcessGroup]:
    if why := native_missing():
        pytest.skip(f"native host path: {why}")
    pgs = mixed_group(fresh_net(), PORT)
    yield pgs
    for pg in pgs:
        pg.close()


SOFTWARE = [(op, algo) for op, algo in MATRIX if algo != "in_network"]


@pytest.mark.parametrize("op,algo", SOFTWARE, ids=[f"{o.name.lower()}-{a}" for o, a in SOFTWARE])
def test_a_group_of_native_and_python_ranks_runs_every_collective(mixed: list[ProcessGroup], op, algo: str) -> None:
    assert [pg.stats()["host_path"] for pg in mixed] == list(MIXED)
    check_cell(mixed, len(MIXED), op, algo)


def test_a_mixed_group_barriers_sends_and_recovers_loss(mixed: list[ProcessGroup]) -> None:
    assert all(r is None for r in run_parallel([pg.barrier for pg in mixed]))
    x = tensor("float16", 0, 3000)
    got = run_parallel([lambda: mixed[1].send(x, 2, tag=3), lambda: mixed[2].recv(1, tag=3)])
    assert_equal(got[1], x, "python to native")
    lossy = mixed_group(fresh_net(), PORT + 1, drop_outgoing=0.02)
    try:
        terms = [tensor("int32", r, 200_000, seed=3) for r in range(len(MIXED))]
        for r, got in enumerate(run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, algo="ring") for pg, t in zip(lossy, terms)])):
            assert_equal(got, np.sum(terms, axis=0, dtype=np.int32), f"lossy ring rank {r}")
        for kind in ("native", "python"):
            stats = [pg.stats() for pg in lossy if pg.stats()["host_path"] == kind]
            assert sum(s["dropped_on_purpose"] for s in stats) > 0 and sum(s["retransmissions"] for s in stats) > 0, (kind, stats)
    finally:
        for pg in lossy:
            pg.close()


# --- rank programs: a rank killed, the path reported ---------------------------------------------

def runner(rank: int, ips: list[str], *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hostagent.collectives.runner", "--rank", str(rank), "--peers",
                             ",".join(ips), "--port", str(PORT + 2), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def report(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=120)
    assert out.strip(), f"no report (exit {proc.returncode}): {err[-2000:]}"
    return json.loads(out.strip().splitlines()[-1])


def bound(address: tuple[str, int]) -> bool:
    """Some process of this machine has a UDP socket bound to `address` (/proc/net/udp)."""
    ip, port = address
    needle = f"{struct.unpack('<I', socket.inet_aton(ip))[0]:08X}:{port:04X}"
    return any(line.split()[1] == needle for line in Path("/proc/net/udp").read_text().splitlines()[1:])


@pytest.mark.parametrize("paths", [("native", "native", "native"), ("native", "python", "native")], ids="-".join)
def test_a_rank_killed_mid_call_is_named_by_every_other(paths: tuple[str, ...]) -> None:
    """Three rank programs in long all_reduces; rank 2 is killed (SIGKILL): ranks 0 and 1 each fail
    their call naming rank 2, not the neighbour they waited on (in time: well before the deadline).
    All native, each survivor must notice the silence itself; mixed, a native and a Python rank
    notice it or hear it in the other's ABORT."""
    if why := native_missing():
        pytest.skip(f"native host path: {why}")
    net = fresh_net()
    ips = [net + str(10 + r) for r in range(3)]
    common = ["--calls", "all_reduce:ring", "--elements", "1000000", "--repeat", "400", "--timeout", "30",
              "--silent-after", "1.0"]
    procs = [runner(r, ips, *common, "--host-path", p) for r, p in enumerate(paths)]
    try:
        started = time.monotonic() + 60.0      # every group made (its socket bound) ...
        while not all(bound((ip, PORT + 2)) for ip in ips):
            assert time.monotonic() < started and all(p.poll() is None for p in procs), "the ranks did not start"
            time.sleep(0.05)
        time.sleep(1.5)                         # ... heard by the others, and calling
        assert procs[2].poll() is None, procs[2].communicate()
        os.kill(procs[2].pid, signal.SIGKILL)
        killed = time.monotonic()
        for r in (0, 1):
            got = report(procs[r])
            assert not got["ok"], got
            error = next(c["error"] for c in got["calls"] if not c["ok"])
            assert "rank 2 is silent" in error, f"rank {r}: {error}"
        assert time.monotonic() - killed < 15.0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


def test_auto_falls_back_to_python_saying_why_when_the_engine_cannot_build(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(ENV, raising=False)
    net = fresh_net()
    peers = [(net + "10", PORT), (net + "11", PORT)]
    if native_missing() is None:                # where it builds, auto is native
        t = open_transport(0, peers, GROUP)
        assert t.host_path == "native" and "auto: the machine's C compiler built it" in t.host_path_reason
        t.close()
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    pgs = [ProcessGroup(r, peers, timeout_s=10.0) for r in range(2)]
    try:
        for pg in pgs:
            s = pg.stats()
            assert s["host_path"] == "python", s
            assert "auto: the native engine did not build: no C compiler: 'no-such-cc'" in s["host_path_reason"], s
        x = [np.arange(100, dtype=np.int32) * (r + 1) for r in range(2)]
        for got in run_parallel([lambda pg=pg, v=v: pg.all_reduce(v) for pg, v in zip(pgs, x)]):
            assert_equal(got, x[0] + x[1], "all_reduce on the fallback")
    finally:
        for pg in pgs:
            pg.close()
    with pytest.raises(HostPathUnavailable, match="host path native .* cannot run: .*no C compiler"):
        open_transport(0, peers, GROUP, TransportConfig(host_path="native"))


def test_rank_programs_report_the_path_they_ran_and_why(tmp_path) -> None:
    """Rank 0 where the engine cannot build (auto: Python, saying why), rank 1 asked for native."""
    if why := native_missing():
        pytest.skip(f"native host path: {why}")
    net = fresh_net()
    ips = [net + "10", net + "11"]
    common = ["--calls", "all_reduce:ring,all_gather:ring", "--elements", "5000", "--timeout", "20"]
    procs = [runner(0, ips, *common, env={"CC": "no-such-cc", CACHE_ENV: str(tmp_path), ENV: "auto"}),
             runner(1, ips, *common, "--host-path", "native")]
    reports = [report(p) for p in procs]
    assert all(r["ok"] for r in reports), reports
    assert reports[0]["stats"]["host_path"] == "python" and "no C compiler" in reports[0]["stats"]["host_path_reason"]
    assert reports[1]["stats"]["host_path"] == "native"
    assert reports[1]["stats"]["host_path_reason"].startswith("asked for (host_path=native)")


def test_choices_that_cannot_be_are_refused(monkeypatch) -> None:
    with pytest.raises(ValueError, match="host_path 'fast' is not one of auto, native, python"):
        TransportConfig(host_path="fast")
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(ValueError, match="AIFABRIC_HOST_PATH='fast' is not one of"):
        open_transport(0, [("127.0.0.1", PORT)])


def test_a_mixed_rocev2_group_sums_with_every_algorithm(mixed: list[ProcessGroup]) -> None:
    """Native and Python ranks framing RoCEv2-like, each on its own address's port 4791."""
    net = fresh_net()
    peers = [(net + str(10 + r), PORT + 4) for r in range(len(MIXED))]
    pgs = [ProcessGroup(r, peers, group_id=5, timeout_s=20.0, transport=TransportConfig(rocev2=True, host_path=p))
           for r, p in enumerate(MIXED)]
    try:
        terms = [tensor("int32", r, 20_000, seed=9) for r in range(len(MIXED))]
        for algo in ("ring", "tree", "halving_doubling"):
            for r, got in enumerate(run_parallel([lambda pg=pg, t=t: pg.all_reduce(t, algo=algo) for pg, t in zip(pgs, terms)])):
                assert_equal(got, np.sum(terms, axis=0, dtype=np.int32), f"rocev2 {algo} rank {r}")
        assert [pg.stats()["host_path"] for pg in pgs] == list(MIXED)
        assert all(pg.stats()["rocev2_malformed"] == 0 and pg.stats()["stale"] == 0 for pg in pgs)
    finally:
        for pg in pgs:
            pg.close()
