"""Traffic patterns (hostagent.traffic.patterns): who sends to whom, deterministic per seed."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from hostagent.traffic import patterns
from hostagent.traffic.flows import ENTROPY_PORTS, ROCEV2_PORT, TCP_PORT, FlowSpec, WireFlow
from topologies.fabric import fat_tree, leaf_spine

HOSTS = [h.name for h in fat_tree(4).hosts]          # 16 hosts, 4 pods of 4


def sports_ok(flows: list[FlowSpec]) -> None:
    lo, hi = ENTROPY_PORTS
    assert all(lo <= f.sport <= hi for f in flows)
    per_src = Counter((f.src, f.sport) for f in flows)
    assert max(per_src.values()) == 1, "a host uses one source port twice"


@pytest.mark.parametrize("seed", range(20))
def test_permutation_is_a_derangement(seed: int) -> None:
    flows = patterns.permutation(HOSTS, seed)
    assert len(flows) == len(HOSTS)
    assert sorted(f.src for f in flows) == sorted(HOSTS)
    assert sorted(f.dst for f in flows) == sorted(HOSTS)
    assert all(f.src != f.dst for f in flows)
    assert all(f.protocol == "udp" and f.dport == ROCEV2_PORT for f in flows)
    sports_ok(flows)


def test_two_hosts_swap() -> None:
    flows = patterns.permutation(["a", "b"], 5)
    assert {(f.src, f.dst) for f in flows} == {("a", "b"), ("b", "a")}


def test_same_seed_same_flows_and_ports_other_seed_differs() -> None:
    for make in (lambda s: patterns.permutation(HOSTS, s), lambda s: patterns.collective(HOSTS, s),
                 lambda s: patterns.all_to_all(HOSTS, seed=s), lambda s: patterns.incast(HOSTS, HOSTS[0], 5, seed=s)):
        assert make(7) == make(7)
        assert make(7) != make(8)


def test_permutations_vary_with_the_seed() -> None:
    pairings = {tuple((f.src, f.dst) for f in patterns.permutation(HOSTS, s)) for s in range(10)}
    assert len(pairings) == 10


def test_all_to_all_counts() -> None:
    flows = patterns.all_to_all(HOSTS[:6], protocol="tcp", size=1000)
    assert len(flows) == 6 * 5
    assert len({(f.src, f.dst) for f in flows}) == 30
    assert all(f.protocol == "tcp" and f.dport == TCP_PORT and f.bytes == 1000 for f in flows)
    sports_ok(flows)


def test_incast_by_count_and_by_name() -> None:
    flows = patterns.incast(HOSTS, "p0e0h0", 6, seed=3, rate_pps=50)
    assert len(flows) == 6 and {f.dst for f in flows} == {"p0e0h0"}
    assert len({f.src for f in flows}) == 6 and "p0e0h0" not in {f.src for f in flows}
    assert all(f.start == 0.0 and f.rate_pps == 50 for f in flows)
    named = patterns.incast(HOSTS, "p1e0h0", ["p2e0h0", "p3e1h1"])
    assert [(f.src, f.dst) for f in named] == [("p2e0h0", "p1e0h0"), ("p3e1h1", "p1e0h0")]


@pytest.mark.parametrize("bad", [dict(receiver="nope", senders=2), dict(receiver="p0e0h0", senders=16),
                                 dict(receiver="p0e0h0", senders=["p0e0h0"]),
                                 dict(receiver="p0e0h0", senders=["p1e0h0", "p1e0h0"])])
def test_incast_refuses(bad: dict) -> None:
    with pytest.raises(ValueError):
        patterns.incast(HOSTS, **bad)


@pytest.mark.parametrize("seed", range(10))
def test_collective_is_one_ring_across_pods(seed: int) -> None:
    flows = patterns.collective(HOSTS, seed)
    assert len(flows) == len(HOSTS)
    nxt = {f.src: f.dst for f in flows}
    assert sorted(nxt) == sorted(HOSTS) and sorted(nxt.values()) == sorted(HOSTS)
    host, visited = HOSTS[0], []
    while host not in visited:
        visited.append(host)
        host = nxt[host]
    assert len(visited) == len(HOSTS), "the flows form more than one ring"
    assert all(patterns.pod_of(f.src) != patterns.pod_of(f.dst) for f in flows)
    assert all(f.size == patterns.LONG_FLOW_FACTOR * patterns.DEFAULT_UDP_PACKETS for f in flows)
    sports_ok(flows)


def test_collective_on_leaf_spine_crosses_leaves() -> None:
    names = [h.name for h in leaf_spine(4, 2, 3).hosts]
    flows = patterns.collective(names, 2, protocol="tcp")
    assert all(patterns.pod_of(f.src) != patterns.pod_of(f.dst) for f in flows)
    assert all(f.size == patterns.LONG_FLOW_FACTOR * patterns.DEFAULT_TCP_BYTES for f in flows)


def test_ring_keeps_same_group_neighbours_to_the_minimum() -> None:
    """Uneven groups: a ring can avoid a same-group neighbour only while no group holds more than
    half the hosts; beyond that, 2 * largest - n such pairs are unavoidable and no more are made."""
    rng = random.Random(0)
    for trial in range(300):
        sizes = [rng.randint(1, 5) for _ in range(rng.randint(1, 5))]
        names = [f"g{g}-{i}" for g, n in enumerate(sizes) for i in range(n)]
        if len(names) < 2:
            continue
        order = patterns.ring_order(names, trial, group_of=lambda h: h.split("-")[0])
        assert sorted(order) == sorted(names)
        same = sum(order[i].split("-")[0] == order[(i + 1) % len(order)].split("-")[0] for i in range(len(order)))
        assert same == max(0, 2 * max(sizes) - len(names)), (sizes, order)


def test_pod_of_names() -> None:
    assert patterns.pod_of("p3e1h0") == "p3"
    assert patterns.pod_of("l2h1") == "l2"
    assert patterns.pod_of("h7") == "h7"


@pytest.mark.parametrize("kwargs, message", [
    (dict(protocol="sctp"), "protocol"), (dict(size=0), "size"), (dict(payload=8), "payload"),
    (dict(rate_pps=0), "rate_pps"), (dict(dport=70000), "dport"), (dict(start=-1), "start")])
def test_bad_flow_arguments_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        patterns.permutation(HOSTS[:4], 1, **kwargs)


def test_repeated_or_too_few_hosts() -> None:
    with pytest.raises(ValueError, match="repeat"):
        patterns.all_to_all(["a", "b", "a"])
    with pytest.raises(ValueError, match="at least 2"):
        patterns.permutation(["a"], 1)


def test_wire_flow_round_trip_and_checks() -> None:
    spec = patterns.permutation(HOSTS, 1, payload=100, rate_pps=300, start=0.5)[0]
    wire = WireFlow(3, "10.0.0.2", spec)
    assert WireFlow.from_dict(wire.to_dict()) == wire
    bare = {k: v for k, v in wire.to_dict().items() if k not in ("src", "dst")}
    assert WireFlow.from_dict(bare).spec.sport == spec.sport
    with pytest.raises(ValueError, match="payload"):
        WireFlow.from_dict({**wire.to_dict(), "payload": 10})
    with pytest.raises(ValueError, match="unexpected keyword"):
        WireFlow.from_dict({**wire.to_dict(), "colour": 1})
