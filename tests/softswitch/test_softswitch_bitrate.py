"""Egress queues paced in bits per second, as a link (softswitch/queues.py): a frame of L bytes
holds the link for (max(L, 60) + 4 + 8 + 12) * 8 / bitrate seconds, and the next frame departs
when the link is free of it (or when it arrives, if later).

Checked on both packet paths (the native one on both port I/Os, AF_PACKET and AF_XDP) against
that arithmetic, written out here, on the departure times the data plane records as it serves
each frame (the queue's last departures, ``recent``, and ``next_free``), not on a wall clock: a
burst of frames of several sizes, each queued between two readings of the switch's clock, so that
a frame that came after the link was free is told from one that waited; the frames then leave in
order and none before its departure time (its egress timestamp, or the switch's clock when it is
received). Also: a truncated frame paced by the
bytes it keeps, a port switched between bits and packets per second, the bounds of a bit rate,
and the command line's flag (softswitch-ctl's command: test_softswitch_cli.py; a data plane
replaced keeping the settings: test_native_dataplane.py)."""
from __future__ import annotations

import math
import os
import time

import pytest

from softswitch.options import CliError, parse_config
from softswitch.queues import check_bitrate, wire_bytes
from scenarios.replication import TRUNCATE, TRUNCATE_LEN, _frame as replication_frame
from test_native_dataplane import bench, frame, library, ours, port_io, seq_of, switch  # noqa: F401 (fixtures)
from test_softswitch_departure import REPO, _frame, _switch

BITRATE = 100_000      # bits/s: a short frame holds the link 6.72 ms, a 1500-byte one 121.92 ms
RATE_PPS = 50
# a 1500-byte frame first: the frames after it arrive while it holds the link, and wait
SIZES = (1500, 42, 60, 64, 300, 1500)


def link_us(length: int, bits_per_s: int) -> float:
    """The link's time for a frame, from the Ethernet arithmetic (not queues.wire_bytes): padded
    to 60 bytes, then FCS 4, preamble and SFD 8, inter-frame gap 12."""
    return (max(length, 60) + 4 + 8 + 12) * 8 / bits_per_s * 1e6


class PythonPath:
    """The Python packet path on test_softswitch_departure's switch (ingress port 1 to port 2;
    frames handed to it and sent to a list); tests/p4/queueing.p4 writes each frame's egress
    timestamp into it."""

    def __init__(self):
        self.dp, self._sent = _switch()
        self._frame = _frame

    def truncating(self) -> int:
        """From now on, frames from port 1 are truncated (replication.p4's truncate()): the
        length they keep."""
        self.dp, self._sent = _switch(REPO / "tests/p4/build/replication.json")
        self._frame = lambda seq, size: replication_frame(TRUNCATE, bytes(size - len(replication_frame(0, b""))))
        return TRUNCATE_LEN

    def queue(self, port: int = 2):
        return self.dp.queue(port)

    def send(self, seq: int, size: int) -> tuple[int, int]:
        """The switch's clock (us) before and after frame ``seq`` of ``size`` bytes was queued."""
        before = self.dp.now_us()
        self.dp._path.arrival(1, self._frame(seq, size))
        return before, self.dp.now_us()

    def departed(self, count: int) -> list[tuple[int, int, int]]:
        """(sequence number, length, departed at: its egress timestamp) of the ``count`` frames
        that left port 2, the loop's look at the queues played until they did."""
        deadline = time.monotonic() + 10
        while self.dp.queued and time.monotonic() < deadline:
            time.sleep(0.001)
            self.dp._drain_queues()
        q = 14 + 31        # the frame's payload after Ethernet and queueing.p4's header
        return [(int.from_bytes(f[q:q + 4], "big"), len(f) - 31, int.from_bytes(f[14 + 22:14 + 28], "big"))
                for port, f in self._sent[:count] if port == 2]


class NativePath:
    """The native data plane on veths (test_native_dataplane's stub: ingress port 1 to port 2),
    its loop running."""

    def __init__(self, make, io: str):
        self.s = make(port_io=io)
        self.dp = self.s.dp
        self.s.rule_in(1).egress = 2
        self.dp.start()
        self._sent = 0

    def truncating(self) -> int:
        """From now on, frames from port 1 are truncated (the stub's truncate()): the length
        they keep."""
        self.s.rule_in(1).truncate = TRUNCATE_LEN
        return TRUNCATE_LEN

    def queue(self, port: int = 2):
        return self.dp.port_queues(port)[0]

    def send(self, seq: int, size: int) -> tuple[int, int]:
        """The switch's clock (us) before frame ``seq`` was sent and after the loop counted it
        in (it counts a frame once it is queued, or has left)."""
        dp = self.dp
        before = dp.now_us()
        self.s.send(1, [frame(seq, size)])
        self._sent += 1
        deadline = time.monotonic() + 5
        while dp.port_counters(1)[0] < self._sent and time.monotonic() < deadline:
            time.sleep(0.0002)
        assert dp.port_counters(1)[0] == self._sent, "the switch did not take the frame in"
        return before, dp.now_us()

    def departed(self, count: int) -> list[tuple[int, int, int]]:
        """(sequence number, length, departed by: the switch's clock once it was received) of
        the ``count`` frames port 2's host receives."""
        hp, got = self.s.tb.ports[2], []
        deadline = time.monotonic() + 10
        while len(got) < count and time.monotonic() < deadline:
            frames = ours(hp.receive(timeout=0.5, count=1, quiet=0.0))
            now = self.dp.now_us()
            got += [(seq_of(f), len(f), now) for f in frames]
        return got


@pytest.fixture(params=["python", "native-packet", "native-af_xdp"])
def path(request):
    if request.param == "python":
        return PythonPath()
    if os.geteuid() != 0:
        pytest.skip("needs root (veths, namespaces, raw sockets)")
    return NativePath(request.getfixturevalue("switch"), request.param.removeprefix("native-"))


def departures(path, count: int) -> list[tuple[float, int]]:
    """(departure, bytes) of the last ``count`` frames the queue served."""
    got = list(path.queue().recent)[-count:]
    assert len(got) == count, f"the queue remembers {len(got)} departures, not {count}"
    return got


def assert_departs_after(departure: float, prev_free: float, clock: tuple[int, int], length: int) -> bool:
    """A frame queued within ``clock`` (the switch's clock before and after) departs at
    max(its arrival, ``prev_free``); True when it had to wait: then exactly when the link was free
    (a frame that surely came before that), else within that window."""
    before, after = clock
    if prev_free >= after:
        assert departure == prev_free, \
            f"a {length}-byte frame departs at {departure}, not when the link is free: {prev_free}"
        return True
    assert max(prev_free, before) <= departure <= after, \
        f"a {length}-byte frame that came within {clock} departs at {departure} (the link free at {prev_free})"
    return False


def assert_chain(path, free: float, clocks: list[tuple[int, int]], sizes, link) -> int:
    """The frames queued within ``clocks`` left one after the other, each holding the link
    ``link(bytes)`` us from its departure (``free``: when the link was free before the first);
    the queue's ``next_free`` is the last one's end. How many had to wait."""
    waited = 0
    for (departure, length), clock, size in zip(departures(path, len(clocks)), clocks, sizes):
        assert length == size, f"a frame left holding the link for {length} bytes, not {size}"
        waited += assert_departs_after(departure, free, clock, length)
        free = departure + link(length)
    q = path.queue()
    assert abs(q.next_free - free) <= 4 * math.ulp(free), f"the link is free at {q.next_free}, not {free}"
    return waited


def test_a_burst_leaves_a_frame_after_the_other_by_its_bytes_on_the_wire(path):
    path.dp.set_queue_bitrate(BITRATE, 2)
    q = path.queue()
    assert (q.bitrate, q.rate_pps) == (BITRATE, 0)
    free = q.next_free
    clocks = [path.send(seq, size) for seq, size in enumerate(SIZES)]
    left = path.departed(len(SIZES))
    assert [(seq, length) for seq, length, _ in left] == list(enumerate(SIZES))     # in order, whole
    waited = assert_chain(path, free, clocks, SIZES, lambda n: link_us(n, BITRATE))
    assert waited >= 1, "no frame came while the link was busy: the pace was never tested"
    early = [(seq, at, d) for (seq, _, at), (d, _) in zip(left, departures(path, len(SIZES))) if at < d]
    assert not early, f"frames (seq, left at, departure) left before their departure time: {early}"


def test_a_port_switches_between_bits_and_packets_per_second(path):
    dp = path.dp
    dp.set_queue_bitrate(BITRATE, 2)
    path.send(0, 1500)
    path.departed(1)
    q = path.queue()
    last = q.last_departure
    assert q.next_free - last == pytest.approx(link_us(1500, BITRATE), abs=4 * math.ulp(q.next_free))
    dp.set_queue_rate(RATE_PPS, 2)                     # clears the bit rate; from the last departure
    q = path.queue()
    assert (q.rate_pps, q.bitrate) == (RATE_PPS, 0) and q.last_departure == last
    assert q.next_free - last == pytest.approx(1e6 / RATE_PPS, abs=4 * math.ulp(q.next_free))
    assert path.queue(3).bitrate == 0                  # another port keeps its own (the default)
    free = q.next_free
    clocks = [path.send(seq, size) for seq, size in enumerate((42, 1500), start=1)]
    path.departed(2)
    assert_chain(path, free, clocks, (42, 1500), lambda n: 1e6 / RATE_PPS)     # a packet's time, whatever its size
    dp.set_queue_bitrate(BITRATE)                      # every port and the default: the rate cleared
    q = path.queue()
    assert (q.rate_pps, q.bitrate, path.queue(3).bitrate) == (0, BITRATE, BITRATE)
    free = q.next_free
    assert free - q.last_departure == pytest.approx(link_us(1500, BITRATE), abs=4 * math.ulp(free))
    clock = path.send(3, 42)
    path.departed(1)
    assert_chain(path, free, [clock], (42,), lambda n: link_us(n, BITRATE))


def test_a_truncated_frame_holds_the_link_for_the_bytes_it_keeps(path):
    kept = path.truncating()
    path.dp.set_queue_bitrate(BITRATE, 2)
    free = path.queue().next_free
    clock = path.send(0, 1500)
    path.departed(1)
    assert_chain(path, free, [clock], (kept,), lambda n: link_us(n, BITRATE))


@pytest.mark.parametrize("length, wire", [(0, 84), (42, 84), (60, 84), (61, 85), (64, 88), (1500, 1524)])
def test_wire_bytes_are_what_ethernet_spends(length, wire):
    assert wire_bytes(length) == wire


@pytest.mark.parametrize("bits_per_s", [-1, 1, 999, 400_000_000_001, 10**30])
def test_a_bit_rate_out_of_bounds_is_named(bits_per_s):
    with pytest.raises(ValueError, match=rf"queue bit rate {bits_per_s} bits/s is outside 1000\.\.400000000000"):
        check_bitrate(bits_per_s)
    dp, _ = _switch()
    with pytest.raises(ValueError, match=rf"queue bit rate {bits_per_s} bits/s"):
        dp.set_queue_bitrate(bits_per_s, 2)
    assert dp.queue(2).bitrate == 0


def test_the_command_line_sets_bit_rates_and_refuses_both_paces_for_one_port():
    cfg, _ = parse_config(["--no-p4", "-i", "1@a", "-i", "2@b", "--queue-bitrate", "10000000000",
                           "--queue-bitrate", "1000000@2", "--queue-rate", "100@1"])
    assert (cfg.queue_bitrate, cfg.queue_rate, cfg.port_queue_bitrates, cfg.port_queue_rates) == \
        (10_000_000_000, 0, {2: 1_000_000}, {1: 100})
    with pytest.raises(CliError, match="--queue-bitrate 999@2: queue bit rate 999 bits/s is outside"):
        parse_config(["--no-p4", "-i", "2@b", "--queue-bitrate", "999@2"])
    with pytest.raises(CliError, match="--queue-bitrate 1000@9: port 9 is not a port of this switch"):
        parse_config(["--no-p4", "-i", "2@b", "--queue-bitrate", "1000@9"])
    with pytest.raises(CliError, match="--queue-rate 100@2 and --queue-bitrate 1000@2: port 2's queues are paced"):
        parse_config(["--no-p4", "-i", "2@b", "--queue-rate", "100@2", "--queue-bitrate", "1000@2"])
    with pytest.raises(CliError, match="--queue-rate 0 and --queue-bitrate 1000: every port's queues"):
        parse_config(["--no-p4", "--queue-rate", "0", "--queue-bitrate", "1000"])
