"""Traffic classes on one port, through real frames on veths, on the Python and the native packet
paths (softswitch/classes.py, queues.py): the classes share their port's link in bits (a frame of
either class holds it for its own bytes), strict priority serves the highest class first, weighted
round robin shares the link by weight, a class's own depth, bit rate and counters are its own, and
run-time control sets them per class (BMv2's ``<port> [<priority>]`` arguments)."""
from __future__ import annotations

import os

import pytest

from lossless_bench import PATHS, SwitchBench, frame
from softswitch.queues import wire_us
from test_native_dataplane import bench, library, port_io, switch  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths, namespaces, raw sockets)")

LINK = 400_000          # bits/s: a 1000-byte frame holds the link 20.48 ms
SIZE = 1000


@pytest.fixture(params=PATHS)
def sw(request, bench, switch):
    b = SwitchBench(request.param, *bench, native_make=switch)
    yield b
    b.stop()


def burst(sw: SwitchBench, per_class: int) -> None:
    """``per_class`` frames in each of class 1 (from port 1, sequence numbers 100..) and class 0
    (from port 2, 0..), all for port 3, taken in by the switch in one loop turn."""
    sw.route(1, 3, 1)
    sw.route(2, 3, 0)
    sw.start()
    with sw.dp.lock:
        sw.send(2, [frame(i, SIZE) for i in range(per_class)])
        sw.send(1, [frame(100 + i, SIZE) for i in range(per_class)])


def test_strict_priority_serves_the_higher_class_first_on_a_link_both_share(sw):
    sw.dp.set_queue_bitrate(LINK, 3)
    burst(sw, 5)
    got = sw.seqs(3, 10, timeout=5.0)
    # the frame first in may leave at once (an idle link); then class 1 whole, then class 0
    rest = got[1:] if got[0] == 0 else got
    assert rest == [100, 101, 102, 103, 104, *range(1 if got[0] == 0 else 0, 5)], got
    # one link: every departure after the first waits for the frame before it, whatever its class
    deps = sorted(_recent(sw, 3, 0) + _recent(sw, 3, 1))
    gaps = [b[0] - a[0] for a, b in zip(deps, deps[1:])]
    assert len(gaps) == 9 and all(abs(g - wire_us(SIZE, LINK)) < 1e-6 for g in gaps), gaps


def _recent(sw: SwitchBench, port: int, priority: int) -> list[tuple[float, int]]:
    q = next(q for q in sw.dp.port_queues(port) if q.priority == priority)
    return list(q.recent)


def test_weighted_round_robin_shares_the_link_by_weight(sw):
    sw.dp.set_queue_bitrate(LINK, 3)
    sw.dp.set_queue_weight(3, 3, 1)
    sw.dp.set_queue_weight(1, 3, 0)
    burst(sw, 8)
    got = sw.seqs(3, 16, timeout=8.0)
    assert sorted(got) == [*range(8), *range(100, 108)]
    classes = [1 if s >= 100 else 0 for s in got]
    # the first may have left at once, alone; then, while class 1 has packets, 3 of every 4 are its
    both = classes[1:len(classes) - classes[::-1].index(1)]
    assert len(both) >= 8, classes
    for start in range(len(both) - 3):
        assert sum(both[start:start + 4]) == 3, f"class 1 should send 3 of every 4 frames: {classes}"
    c1, c0 = sw.klass(3, 1), sw.klass(3, 0)
    assert (c1["weight"], c0["weight"]) == (3, 1)
    assert (c1["tx_packets"], c0["tx_packets"]) == (8, 8) and c1["tx_bytes"] == 8 * SIZE


def test_a_class_has_its_own_depth_and_counters(sw):
    sw.dp.set_queue_bitrate(LINK, 3)
    sw.dp.set_queue_depth(2, 3, 0)                 # class 0 alone: 2 packets deep
    burst(sw, 6)
    got = sw.seqs(3, 12, timeout=6.0)
    assert sorted(s for s in got if s >= 100) == list(range(100, 106))     # class 1 keeps the default depth
    assert 2 <= len([s for s in got if s < 100]) <= 3                    # 2 queued (and 1 that left at once)
    c0, c1 = sw.klass(3, 0), sw.klass(3, 1)
    assert c0["depth"] == 2 and c1["depth"] == 64
    assert c0["drops"] == 6 - c0["tx_packets"] and c1["drops"] == 0
    assert c0["tx_bytes"] == c0["tx_packets"] * SIZE


def test_a_class_shaper_paces_it_below_the_link(sw):
    sw.dp.set_queue_bitrate(4 * LINK, 3)           # the link, 5.12 ms a frame
    sw.dp.set_queue_bitrate(LINK, 3, 1)            # class 1 alone at a quarter of it
    burst(sw, 4)
    got = sw.seqs(3, 8, timeout=5.0)
    assert sorted(got) == [*range(4), *range(100, 104)]
    deps = [d for d, _ in _recent(sw, 3, 1)]
    # a class-1 frame leaves once its shaper is free, and the link (a class-0 frame may hold it)
    slowest = wire_us(SIZE, LINK) + wire_us(SIZE, 4 * LINK)
    assert all(wire_us(SIZE, LINK) - 1e-6 <= b - a <= slowest + 1e-6 for a, b in zip(deps, deps[1:])), deps
    assert sw.klass(3, 1)["bitrate"] == LINK and sw.klass(3, 0)["bitrate"] == 0


def test_settings_per_class_port_and_every_port_and_their_bounds(sw):
    dp = sw.dp
    dp.set_queue_depth(8, 3)                       # every class of port 3
    dp.set_queue_depth(4, 3, 5)                    # class 5 alone
    assert [c["depth"] for c in dp.class_stats(3)] == [8, 8, 4, 8, 8, 8, 8, 8]
    dp.set_queue_depth(16, 3)                      # the port's setting is its classes' again
    assert {c["depth"] for c in dp.class_stats(3)} == {16}
    dp.set_queue_rate(100, 3, 2)
    dp.set_queue_bitrate(LINK, 3, 2)               # clears the class's packet rate
    c2 = sw.klass(3, 2)
    assert (c2["rate_pps"], c2["bitrate"]) == (0, LINK)
    with pytest.raises(ValueError, match="priority 8 is outside 0..7"):
        dp.set_queue_weight(1, 3, 8)
    with pytest.raises(ValueError, match="queue weight 1001 is outside 0..1000"):
        dp.set_queue_weight(1001, 3, 1)
    with pytest.raises(ValueError, match="give the port before priority 1"):
        dp.set_queue_weight(1, None, 1)
