"""The collectives' transport carried RoCEv2-like (TransportConfig(rocev2=True)), on loopback
addresses: what reaches port 4791 is a BTH naming the group's flow to that peer, ECN-capable,
with the transport's packet behind it; collectives over it (two groups of each rank sharing the host's
port 4791) give numpy's results; a rate given for a queue pair by a rate-control message
paces that queue pair's datagrams and no other's. Every test runs once per host path (conftest.py)."""
from __future__ import annotations

import random
import socket
import time

import numpy as np
import pytest
from loopback_ranks import fresh_net, run_parallel

from hostagent.collectives import rocev2
from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.host_path import open_transport
from hostagent.collectives.reliable import HEADER, MAGIC, PAYLOAD, Kind, TransportConfig
from hostagent.collectives.rocev2 import frame, qp_for, unframe
from hostagent.traffic.flows import ROCEV2_PORT
from hostagent.traffic.ratecontrol import RateClient, frame_bytes

pytestmark = pytest.mark.usefixtures("host_path")  # every test once per host path (conftest.py)

PORT = 47400


def test_framing_round_trip_and_what_is_refused() -> None:
    qp = qp_for(5, 3)
    assert qp == 5 << 10 | 3
    assert unframe(frame(qp, b"payload")) == (qp, b"payload")
    with pytest.raises(rocev2.MalformedBth, match="shorter"):
        unframe(b"\x04" * 5)
    with pytest.raises(rocev2.MalformedBth, match="opcode 0x81"):     # a CNP is the agents', not ours
        unframe(b"\x81" + frame(qp, b"x")[1:])
    with pytest.raises(ValueError, match="24 bits"):
        qp_for(1 << 14, 0)


def test_on_the_wire_a_bth_to_port_4791_ecn_capable_from_the_groups_port() -> None:
    """Every datagram rank 0 sends rank 1 (heartbeats, then the message) is the transport's packet
    behind the BTH of queue pair (7, 1), ECT(0), from the group's port, to rank 1's port 4791."""
    net = fresh_net()
    peers = [(net + "1", PORT), (net + "2", PORT)]
    sniff = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)      # stands where rank 1's port 4791 is
    sniff.bind((net + "2", ROCEV2_PORT))
    sniff.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sniff.settimeout(2.0)
    t = open_transport(0, peers, 7, TransportConfig(rocev2=True, rto_s=5.0))
    try:
        t.send(1, 0x33, b"CL-packet", time.monotonic() + 2.0)
        packets = []
        while not packets or packets[-1][2] != Kind.DATA:
            data, ancillary, _, addr = sniff.recvmsg(2048, socket.CMSG_SPACE(4))
            qp, packet = unframe(data)
            assert qp == qp_for(7, 1) and data[0] == rocev2.OPCODE_SEND_ONLY and data[2:4] == b"\xff\xff", data
            assert addr == peers[0]                                  # left from the group's own port
            tos = [c for lvl, typ, c in ancillary if lvl == socket.IPPROTO_IP and typ == socket.IP_TOS]
            assert tos and tos[0][0] & 3 == rocev2.ECT0              # ECT(0)
            packets.append(packet)
    finally:
        t.close()
        sniff.close()
    assert packets[-1] == HEADER.pack(MAGIC, Kind.DATA, 7, 0, 0, 0x33, 0, 1) + b"CL-packet"
    assert all(p == HEADER.pack(MAGIC, Kind.HEARTBEAT, 7, 0, 0, 0, 0, 0) for p in packets[:-1])


def test_collectives_of_two_groups_sharing_the_port_are_exact() -> None:
    """Two process groups per rank (their own ports and ids, as aifabric train's ranks have),
    all_reducing at once: their packets meet on each host's one port 4791 and must not mix."""
    net, n = fresh_net(), 4
    config = TransportConfig(rocev2=True)
    groups = [[ProcessGroup(r, [(net + str(10 + i), PORT + g) for i in range(n)], group_id=g + 1, timeout_s=10.0,
                            transport=config) for r in range(n)] for g in range(2)]
    try:
        xs = [[np.random.default_rng([g, r]).integers(-1000, 1000, 5000).astype(np.int32) for r in range(n)]
              for g in range(2)]
        works = [[groups[g][r].all_reduce(xs[g][r], algo="ring", async_op=True) for g in range(2)] for r in range(n)]
        results = run_parallel([lambda r=r: [w.wait() for w in works[r]] for r in range(n)])
        for res in results:
            assert not isinstance(res, BaseException), res
            for g in range(2):
                np.testing.assert_array_equal(res[g], sum(xs[g]))
        assert all(pg.stats()["packets_received"] > 0 for grp in groups for pg in grp)
        assert all(pg.stats()["stale"] == 0 for grp in groups for pg in grp)
        junk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)           # not a BTH of ours: counted
        junk.sendto(b"\x81" + b"\0" * 40, (net + "10", ROCEV2_PORT))
        junk.close()
        deadline = time.monotonic() + 2.0
        while groups[0][0].stats()["rocev2_malformed"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert groups[0][0].stats()["rocev2_malformed"] == 1 and groups[1][0].stats()["rocev2_unknown_group"] == 0
    finally:
        for grp in groups:
            for pg in grp:
                pg.close()


def test_a_rate_message_paces_its_queue_pair_and_no_other() -> None:
    """Rank 0's full packets to rank 1 at the 100 datagrams/s given for queue pair (2, 1); to rank 2,
    for which no rate was given, at once."""
    net = fresh_net()
    rate_port = random.SystemRandom().randint(50000, 60000)
    peers = [(net + "1", PORT), (net + "2", PORT), (net + "3", PORT)]
    sinks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in peers[1:]]
    for s, p in zip(sinks, peers[1:]):
        s.bind((p[0], ROCEV2_PORT))
    t = open_transport(0, peers, 2, TransportConfig(rocev2=True, rate_control_port=rate_port, rto_s=5.0))
    client = RateClient(rate_port)
    try:
        count = 21
        message = bytes(count * PAYLOAD)                      # 21 full packets
        bits = frame_bytes(rocev2.BTH_BYTES + HEADER.size + PAYLOAD, ipv6=False) * 8
        rate = bits * 100.0
        client.set_rate(qp_for(2, 1), rate)
        time.sleep(0.05)
        t0 = time.monotonic()
        t.send(1, 1, message, time.monotonic() + 5.0)
        paced = time.monotonic() - t0
        stats = t.host_path_stats()
        assert stats["rocev2_rate_messages"] == 1
        assert paced >= (count - 1) * bits / rate * 0.99, paced   # no faster than the rate given
        assert stats["rocev2_paced_s"] > 0, stats
        t0 = time.monotonic()
        t.send(2, 1, message, time.monotonic() + 5.0)           # another queue pair: no rate, no wait
        assert time.monotonic() - t0 < paced / 4
    finally:
        client.close()
        t.close()
        for s in sinks:
            s.close()


def test_options_that_do_not_go_together_are_refused() -> None:
    with pytest.raises(ValueError, match="set rocev2"):
        TransportConfig(rate_control_port=47910)
    with pytest.raises(ValueError, match="drop_outgoing"):
        TransportConfig(rocev2=True, drop_outgoing=0.1)
