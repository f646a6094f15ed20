"""A congestion control in the collectives' reliable transport (hostagent.collectives.peer_cc).

Two ranks in a network namespace of their own whose loopback is a bottleneck (TBF at
``RATE_BPS``, a queue of ``QUEUE_PACKETS``): one sends a message to the other while the
bottleneck's queue is sampled. Without a control the transport keeps its whole window in
flight, and the window waits in the queue; Swift holds the delay near its target and TIMELY
the RTT under its T_high, so the queue they leave must be a fraction of what the same message
queues without them. The controls' thresholds are scaled to a fat tree's store-and-forward RTT
at that rate, as `aifabric train --congestion` scales them.

Also: an RTT sample given to a control leaves out the time the receiver held its
acknowledgement back (delayed acknowledgements), or every sample would carry up to
``ack_delay_s`` of the protocol's own waiting.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time

import pytest

from hostagent.collectives.peer_cc import PeerControls
from hostagent.collectives.reliable import ACK_FRAME_BYTES, DATA_FRAME_BYTES, ReliableTransport, TransportConfig
from hostagent.congestion import CcSettings
from hostagent.netns import run_in_netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace, tc)")

PORT = 47600
TAG = 9
RATE_BPS = 20e6
QUEUE_PACKETS = 200                       # deeper than the transport's window: nothing is dropped
MESSAGE = bytes(range(256)) * 8000        # 2 MB: 1,463 packets, ~0.85 s at the rate
# the controls' reference RTT: a frame and its acknowledgement over a fat tree's longest path (six
# links), as `aifabric train` scales them; with this bottleneck's own two links (1.2 ms, two
# frames' times) one RTT sample 4 ms late makes TIMELY's gradient 2.7 and its rate its floor
PATH_LINKS = 6
BASE_RTT_S = PATH_LINKS * (DATA_FRAME_BYTES + ACK_FRAME_BYTES) * 8 / RATE_BPS
DEADLINE_S = 60.0
SAMPLE_S = 0.01


def _bottleneck(ns: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                    f"{int(RATE_BPS)}bit", "burst", "3000", "limit", str(QUEUE_PACKETS * DATA_FRAME_BYTES)],
                   check=True)


def _backlog(ns: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev", "lo"],
                         capture_output=True, text=True, check=True).stdout
    return sum(q.get("qlen", 0) for q in json.loads(out))


def _pair(ns: str, cc: CcSettings | None) -> list[ReliableTransport]:
    peers = [("127.0.0.1", PORT), ("127.0.0.1", PORT + 1)]
    config = TransportConfig(rto_s=0.05, host_path="python", cc=cc)
    return run_in_netns(f"/var/run/netns/{ns}", lambda: [ReliableTransport(r, peers, 2, config) for r in (0, 1)])


def _queue_while_sending(ns: str, cc: CcSettings | None) -> tuple[list[int], dict]:
    """The bottleneck's queue (packets) sampled while rank 0 sends MESSAGE, and rank 0's stats."""
    pair = _pair(ns, cc)
    samples: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(_backlog(ns))
            time.sleep(SAMPLE_S)
    sampler = threading.Thread(target=sample, daemon=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        sampler.start()
        pair[0].send(1, TAG, MESSAGE, deadline)
        assert pair[1].recv(0, TAG, deadline) == MESSAGE
        pair[0].flush(deadline)
        return samples, pair[0].host_path_stats()
    finally:
        done.set()
        sampler.join()
        for t in pair:
            t.close()


@pytest.mark.parametrize("control", ["swift", "timely"])
def test_a_control_keeps_the_bottleneck_queue_a_fraction_of_the_window(netns, control):
    _bottleneck(netns)
    plain, plain_stats = _queue_while_sending(netns, None)
    assert "cc" not in plain_stats
    controlled, stats = _queue_while_sending(netns, CcSettings(control, RATE_BPS, BASE_RTT_S))
    assert stats["cc"] == control and stats["cc_samples"] > 0, stats
    busy_plain = [q for q in plain if q]
    busy = [q for q in controlled if q] or [0]
    assert busy_plain and statistics.median(busy_plain) > 10, (
        f"without a control the window did not queue at the bottleneck: {plain}")
    assert statistics.median(busy) <= statistics.median(busy_plain) / 3, (
        f"{control}: median queue {statistics.median(busy)} packets, without a control "
        f"{statistics.median(busy_plain)} ({stats})")


def test_a_control_is_not_told_the_time_an_acknowledgement_was_held_back(netns, monkeypatch):
    """The acknowledgement timer's wait is the receiver's, written into the acknowledgement and
    taken off the sample. It runs where a DATA_ACKREQ did not come (lost): here the sender asks
    for none, so every acknowledgement waits out the timer."""
    rtts: list[float] = []
    acked = PeerControls.acked
    monkeypatch.setattr(PeerControls, "acked", lambda self, peer, rtt_s, *a: (rtts.append(rtt_s),
                                                                             acked(self, peer, rtt_s, *a)))
    monkeypatch.setattr(ReliableTransport, "_asks_ack", lambda self, dst, frag, count: False)
    pair = _pair(netns, CcSettings("swift", 1e9, 0.001))      # no bottleneck: loopback's RTT
    try:
        for i in range(20):      # one packet a message: each acknowledged by the delay timer alone
            deadline = time.monotonic() + DEADLINE_S
            pair[0].send(1, TAG + i, b"x", deadline)
            pair[1].recv(0, TAG + i, deadline)
            pair[0].flush(deadline)
        ack_delay_s = pair[1].ack_delay_s
    finally:
        for t in pair:
            t.close()
    assert len(rtts) >= 10, rtts
    assert statistics.median(rtts) < ack_delay_s / 2, (
        f"RTT samples {statistics.median(rtts) * 1e3:.2f} ms (median) carry the receiver's "
        f"{ack_delay_s * 1e3:.0f} ms acknowledgement delay")


def test_the_packet_that_ends_a_message_or_fills_a_window_asks_for_its_acknowledgement(netns, monkeypatch):
    """Without it a control's window below the transport's acknowledgement batch (ACK_EVERY)
    would wait out the receiver's timer every window: a one-packet message's round trip is then
    the loopback's, not the timer's."""
    asked: list[bool] = []
    asks = ReliableTransport._asks_ack
    monkeypatch.setattr(ReliableTransport, "_asks_ack", lambda self, *a: asked.append(asks(self, *a)) or asked[-1])
    pair = _pair(netns, CcSettings("swift", 1e9, 0.001))
    try:
        times = []
        for i in range(10):
            start = time.monotonic()
            deadline = start + DEADLINE_S
            pair[0].send(1, TAG + i, b"x", deadline)
            pair[0].flush(deadline)
            times.append(time.monotonic() - start)
        took = statistics.median(times)
        ack_delay_s = pair[1].ack_delay_s
    finally:
        for t in pair:
            t.close()
    assert asked and all(asked), asked
    assert took < ack_delay_s / 2, f"a message took {took * 1e3:.1f} ms: its acknowledgement waited for the timer"
