"""Repathing (hostagent.collectives.repath): a flow of the collectives that loses packets moves to
another path by itself. Two ranks on real sockets in a network namespace of their own, whose
nftables drop one direction of one flow by its ports, as a failed link drops what ECMP hashed
onto it; another source port is another path there, as it is in the fabric (where the
whole-fabric test, tests/fabric/test_train_fabric.py, fails a core link under a job).

- rank 0's packets to rank 1 dropped: with repath the message arrives and rank 0's flow moved;
  without, the call fails (the drop really cuts the flow);
- rank 1's acknowledgements to rank 0 dropped: rank 1 sees rank 0 resend, moves its own flow,
  and the message is acknowledged;
- rank 0 sending nothing but heartbeats on a cut path: with repath they go out on every path in
  turn, so rank 1 hears rank 0 alive (a call times out, naming it alive); without, rank 0 is
  declared silent.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from hostagent.collectives.reliable import CallTimeout, CollectiveError, PeerSilent, ReliableTransport, TransportConfig
from hostagent.collectives.repath import PeerPaths
from hostagent.netns import run_in_netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace, nftables)")

PORT = 47500
TAG = 7
MESSAGE = bytes(range(256)) * 400       # 100 KB: 74 packets
DEADLINE_S = 5.0      # a deadline: the moved flow delivers within a few retransmission timeouts
SILENT_AFTER_S = 1.0


def test_a_flow_moves_to_the_next_path_it_has_not_left_and_only_once_a_timeout():
    paths = PeerPaths(2, paths=3)
    assert paths.move(1, now=10.0, hold_s=0.5) and paths.current == [0, 1]
    assert not paths.move(1, now=10.2, hold_s=0.5) and paths.current == [0, 1]     # the same loss
    assert paths.move(1, now=11.0, hold_s=0.5) and paths.current == [0, 2]
    assert paths.move(1, now=12.0, hold_s=0.5) and paths.current == [0, 0]         # every path left: over again
    assert paths.move(1, now=13.0, hold_s=0.5) and paths.current == [0, 1]
    assert paths.moves == 4
    assert [paths.beat_path() for _ in range(4)] == [1, 2, 0, 1]


def _cut(ns: str, sport: int, dport: int) -> None:
    """Drop UDP from port ``sport`` to port ``dport`` in ``ns``, counted."""
    rules = (f"table inet cut {{\n chain out {{\n type filter hook output priority 0;\n"
             f" udp sport {sport} udp dport {dport} counter drop\n }}\n}}\n")
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)


def _dropped(ns: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "table", "inet", "cut"],
                         capture_output=True, text=True, check=True).stdout
    return sum(e["counter"]["packets"] for item in json.loads(out)["nftables"] if "rule" in item
               for e in item["rule"]["expr"] if "counter" in e)


def _pair(ns: str, repath: bool) -> list[ReliableTransport]:
    peers = [("127.0.0.1", PORT), ("127.0.0.1", PORT + 1)]
    config = TransportConfig(rto_s=0.02, silent_after_s=SILENT_AFTER_S, repath=repath, host_path="python")
    return run_in_netns(f"/var/run/netns/{ns}", lambda: [ReliableTransport(r, peers, 1, config) for r in (0, 1)])


def _send(pair: list[ReliableTransport]) -> bytes:
    deadline = time.monotonic() + DEADLINE_S
    pair[0].send(1, TAG, MESSAGE, deadline)
    got = pair[1].recv(0, TAG, deadline)
    pair[0].flush(deadline)          # every packet acknowledged
    return got


@pytest.mark.parametrize("repath", [True, False], ids=["repath", "no-repath"])
def test_a_flow_whose_path_drops_its_packets_moves_and_delivers(netns, repath):
    _cut(netns, PORT, PORT + 1)
    pair = _pair(netns, repath)
    try:
        if repath:
            assert _send(pair) == MESSAGE
            assert pair[0].host_path_stats()["repaths"] >= 1
        else:
            with pytest.raises(CollectiveError):
                _send(pair)
    finally:
        for t in pair:
            t.close()
    assert _dropped(netns) > 0


def test_a_receiver_whose_acknowledgements_are_dropped_moves_its_own_flow(netns):
    _cut(netns, PORT + 1, PORT)
    pair = _pair(netns, repath=True)
    try:
        assert _send(pair) == MESSAGE
        assert pair[1].host_path_stats()["repaths"] >= 1, "the receiver did not move: its acknowledgements stayed cut"
    finally:
        for t in pair:
            t.close()
    assert _dropped(netns) > 0


@pytest.mark.parametrize("repath", [True, False], ids=["repath", "no-repath"])
def test_heartbeats_on_every_path_keep_a_peer_alive_behind_a_cut_path(netns, repath):
    _cut(netns, PORT, PORT + 1)
    pair = _pair(netns, repath)
    try:
        time.sleep(SILENT_AFTER_S)        # rank 1 has had time to hear rank 0, or to give it up
        waited = 3 * SILENT_AFTER_S
        with pytest.raises(CollectiveError) as err:
            pair[1].recv(0, TAG, time.monotonic() + waited)
        assert isinstance(err.value, CallTimeout if repath else PeerSilent), err.value
    finally:
        for t in pair:
            t.close()
