"""QP scaling in the collectives' transport (`TransportConfig(qps=N)`): every message to a peer is
cut into N parts, each from a source port of its own, so ECMP hashes a peer pair as N flows.
Two ranks on real sockets in a network namespace of their own; the receiver's socket tells
which source port each packet came from. A lost packet is resent from its own queue pair's port."""
from __future__ import annotations

import collections
import os
import time

import pytest

from hostagent.collectives.reliable import HEADER, PAYLOAD, ReliableTransport, TransportConfig
from hostagent.netns import run_in_netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)")

PORT = 47700
TAG = 5
QPS = 4
MESSAGE = bytes(range(256)) * 550        # 140,800 bytes: 101 packets, 25 or 26 a queue pair
DEADLINE_S = 10.0


def _ports_seen(ns: str, qps: int, drop: float = 0.0, qp_ports: tuple[int, ...] = ()) -> tuple[collections.Counter, int]:
    """Data packets rank 1 took from each of rank 0's source ports for MESSAGE, and rank 0's resends."""
    peers = [("127.0.0.1", PORT), ("127.0.0.1", PORT + 1)]
    config = TransportConfig(rto_s=0.02, host_path="python", qps=qps)
    sender = run_in_netns(f"/var/run/netns/{ns}", lambda: ReliableTransport(
        0, peers, 3, TransportConfig(rto_s=0.02, host_path="python", qps=qps, drop_outgoing=drop, drop_seed=1,
                                     qp_ports=qp_ports)))
    receiver = run_in_netns(f"/var/run/netns/{ns}", lambda: ReliableTransport(1, peers, 3, config))
    seen: collections.Counter = collections.Counter()
    recv = receiver.endpoint.recv

    def counting(timeout: float):
        got = recv(timeout)
        if got is not None and len(got[0]) > HEADER.size + PAYLOAD // 2:      # a full data packet
            seen[got[1][1]] += 1
        return got
    receiver.endpoint.recv = counting
    try:
        deadline = time.monotonic() + DEADLINE_S
        sender.send(1, TAG, MESSAGE, deadline)
        assert receiver.recv(0, TAG, deadline) == MESSAGE
        sender.flush(deadline)
        return seen, sender.stats.retransmissions
    finally:
        sender.close()
        receiver.close()


def test_a_message_leaves_in_equal_parts_from_a_source_port_a_queue_pair(netns):
    seen, _ = _ports_seen(netns, QPS)
    full = len(MESSAGE) // PAYLOAD
    assert len(seen) == QPS, f"source ports seen: {dict(seen)}"
    assert PORT in seen                  # the first part leaves from the rank's own port
    assert max(seen.values()) - min(seen.values()) <= 1 and sum(seen.values()) == full, dict(seen)


def test_queue_pairs_leave_from_the_ports_they_are_given(netns):
    given = tuple(PORT + 10 + k for k in range(QPS - 1))      # as the lab chooses them with the fabric's hash
    seen, _ = _ports_seen(netns, QPS, qp_ports=given)
    assert set(seen) == {PORT, *given}, dict(seen)
    with pytest.raises(ValueError, match="2 qp_ports for 4 queue pairs"):
        TransportConfig(qps=QPS, qp_ports=given[:2])


def test_one_queue_pair_is_the_ranks_own_port_alone(netns):
    seen, _ = _ports_seen(netns, 1)
    assert list(seen) == [PORT], dict(seen)


def test_a_lost_packet_is_resent_from_its_queue_pairs_port(netns):
    seen, resent = _ports_seen(netns, QPS, drop=0.1)
    assert resent > 0, "nothing was lost: the test shows nothing"
    share = len(MESSAGE) // PAYLOAD // QPS       # every queue pair's packets came in, from its own port
    assert len(seen) == QPS and min(seen.values()) >= share, f"resends left from other ports: {dict(seen)}"


def test_queue_pairs_are_refused_beside_repath_and_rocev2():
    for other in ({"repath": True}, {"rocev2": True}):
        with pytest.raises(ValueError, match="qps spreads"):
            TransportConfig(qps=2, **other)
