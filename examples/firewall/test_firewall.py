"""The firewall app against a running k=4 fat-tree, on softswitch and (where installed) BMv2.

The `fabric` fixture (aifabric's pytest plugin) brings the fabric up once for this module and
target, with aifabric's controller routing; the app connects to every edge switch as a user's
controller would, under its own P4Runtime role."""
from __future__ import annotations

import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

import firewall

pytestmark = [pytest.mark.fabric(k=4, controller="aifabric"), pytest.mark.slow]

SRC, DST = "p0e0h0", "p3e1h1"          # first pod to last pod: across the cores


def udp_to(fabric, src: str, dst: str, dport: int) -> Ether:
    s, d = fabric.description.host(src), fabric.description.host(dst)
    gateway_mac = fabric.switch(s.switch).mac          # the edge switch routes with its own MAC
    return (Ether(src=s.mac, dst=gateway_mac) / IP(src=s.ipv4.split("/")[0], dst=d.ipv4.split("/")[0], ttl=64)
            / UDP(sport=40000, dport=dport) / Raw(b"firewall-test"))


def arrives(fabric, dport: int, timeout: float = 2.0) -> bool:
    """Whether a UDP datagram from SRC to DST's ``dport`` reaches DST (three sent)."""
    with fabric.capture(DST) as cap:
        fabric.send(SRC, udp_to(fabric, SRC, DST, dport), count=3)
        got = cap.wait_for(lambda p: UDP in p and p[UDP].dport == dport and bytes(p[UDP].payload) == b"firewall-test",
                           timeout=timeout)
    return got is not None


@pytest.fixture
def blocked(fabric):
    """UDP to 5000 blocked on every edge switch for one test, unblocked after it."""
    switches = firewall.block(fabric.description.to_dict(), "udp", 5000)
    yield switches
    firewall.unblock(fabric.description.to_dict(), "udp", 5000)


def test_traffic_flows_without_rules(fabric):
    assert fabric.wait_reachable(SRC, DST)
    assert arrives(fabric, 5000)


def test_block_drops_the_port_at_every_edge_and_nothing_else(fabric, blocked):
    edges = sorted(s.name for s in fabric.switches if s.role == "edge")
    assert sorted(blocked) == edges
    for edge in edges:
        assert len(fabric.read_table(edge, firewall.ACL)) == 1, f"{edge} holds no firewall entry"
    assert not arrives(fabric, 5000), "a blocked datagram arrived"
    dst = fabric.description.host(DST)
    before = fabric.read_counter(dst.switch).get(dst.port)
    assert arrives(fabric, 5001), "a datagram to another port was dropped"
    after = fabric.read_counter(dst.switch)[dst.port]
    assert after.packets >= (before.packets if before else 0) + 3
    assert fabric.ping(SRC, DST)


def test_our_controller_leaves_the_rule_alone(fabric, blocked):
    assert fabric.description.controller.kind == "aifabric"
    assert firewall.ACL not in fabric.description.controller.owned_tables
    results = fabric.controller.reconcile()          # a full pass over every switch
    failed = {name: r for name, r in results.items() if isinstance(r, BaseException)}
    assert not failed, failed
    assert all(len(fabric.read_table(edge, firewall.ACL)) == 1 for edge in blocked)
    assert not arrives(fabric, 5000)
    # ... and our controller is still primary of its role: it can change routes
    edge = fabric.switch(blocked[0])
    assert fabric.controller.agents[edge.name].conn.is_primary


def test_unblock_lets_traffic_through_again(fabric):
    description = fabric.description.to_dict()
    firewall.block(description, "udp", 5000)
    assert not arrives(fabric, 5000)
    firewall.unblock(description, "udp", 5000)
    assert all(not fabric.read_table(s.name, firewall.ACL) for s in fabric.switches if s.role == "edge")
    assert arrives(fabric, 5000)


def _until(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_who_is_primary_while_the_firewall_is_connected(fabric, fabric_target):
    """softswitch keeps P4Runtime roles apart; BMv2's server puts every role's streams in one
    election, so the firewall's higher election id takes primary for as long as it stays."""
    description = fabric.description.to_dict()
    switch = firewall.edge_switches(description)[0]
    ours = fabric.controller.connection(switch["name"])
    assert ours.is_primary
    with firewall.session(description, switch):
        if fabric_target == "softswitch":
            time.sleep(0.5)      # any demotion would have reached our stream by now
            assert ours.is_primary
        else:
            assert _until(lambda: not ours.is_primary), "BMv2 kept our controller primary: update the docs"
    assert _until(lambda: ours.is_primary), "our controller did not become primary again"
