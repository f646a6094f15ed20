"""Traffic engineering on the topology model alone: equal-cost paths, Global First Fit against
static ECMP, Hedera's demand estimation, elephant detection and the engine's rounds."""
from __future__ import annotations

import random
import threading

import networkx as nx
import pytest

from controller.telemetry.int_report import FlowKey
from controller.paths import installed_paths
from controller.routing import compute_forwarding
from controller.load_balance.te import (
    FabricIndex,
    Flow,
    FlowCounts,
    HostDirectory,
    PathSpace,
    TeConfig,
    TrafficEngineer,
    detect_elephants,
    estimate_demands,
    global_first_fit,
)
from controller.load_balance.te.ecmp_model import ecmp_path, ecmp_paths
from controller.load_balance.te.evaluate import link_loads, max_min_rates, summarize
from controller.load_balance.te.nexthops import FatTreePaths, ShortestPaths
from controller.topology import TopologyModel
from topologies.fabric import Fabric, Role, fat_tree, leaf_spine

GBPS = 1e9


def _flow(fab: Fabric, src: str, dst: str, sport: int = 40000, dport: int = 5001) -> Flow:
    return Flow.between(fab.host(src), fab.host(dst), sport, dport)


def _switches(space: PathSpace, path: tuple[int, ...]) -> list[str]:
    return [space.index.names[space.index.dst[link]] for link in path[:-1]]


def _edges(fab: Fabric) -> list[str]:
    return [sw.name for sw in fab.switches if sw.role in (Role.EDGE, Role.LEAF)]


def _permutation(fab: Fabric, seed: int) -> list[Flow]:
    rng = random.Random(seed)
    hosts = list(fab.hosts)
    while True:
        dst = hosts[:]
        rng.shuffle(dst)
        if all(a.name != b.name for a, b in zip(hosts, dst)):
            return [Flow.between(a, b, 10000 + i, 5001) for i, (a, b) in enumerate(zip(hosts, dst))]


# --- candidate paths ------------------------------------------------------------------------


@pytest.mark.parametrize("fabric", [fat_tree(4), fat_tree(6), leaf_spine(4, 3, 2)], ids=Fabric.describe)
def test_next_hops_are_the_ecmp_groups_routing_installs(fabric: Fabric) -> None:
    model = TopologyModel(fabric)
    index = FabricIndex(fabric)
    space = PathSpace.from_model(model, index)
    generic = ShortestPaths(index)
    forwarding = compute_forwarding(model)
    for dst_name in _edges(fabric):
        dst = index.switch_id(dst_name)
        subnet = fabric.hosts_of(dst_name)[0].ip4.network
        for sw in fabric.switches:
            v = index.switch_id(sw.name)
            ours = space.next_hops(v, dst)
            assert ours == generic.next_hops(v, dst), (sw.name, dst_name)
            if v != dst:
                routed = [nh.port for nh in forwarding[sw.name].next_hops_for(subnet)]
                assert [index.egress_port[link] for link, _ in ours] == routed, (sw.name, dst_name)


def test_candidate_paths_are_all_equal_cost_shortest_paths() -> None:
    fab = fat_tree(4)
    model = TopologyModel(fab)
    space = PathSpace.from_model(model)
    assert isinstance(space, FatTreePaths)
    graph = model.switch_graph()
    names, ends = space.index.names, space.index.dst
    for src in _edges(fab):
        for dst in _edges(fab):
            ours = [(src, *(names[ends[link]] for link in path))
                    for path in space.paths(space.index.switch_id(src), space.index.switch_id(dst))]
            theirs = {tuple(p) for p in nx.all_shortest_paths(graph, src, dst)}
            assert set(ours) == theirs and len(ours) == len(theirs), (src, dst)
    p0e0, p1e0 = space.index.switch_id("p0e0"), space.index.switch_id("p1e0")
    assert len(list(space.paths(p0e0, p1e0))) == 4   # (k/2)^2 (aggregation, core) choices


# --- Global First Fit against ECMP ---------------------------------------------------------


def _colliding_pod_flows(fab: Fabric, space: PathSpace) -> list[Flow]:
    """Four full-rate flows from pod 0's hosts to pod 1's (a permutation), with source ports
    chosen so that the ECMP model sends the first two up the same edge uplink."""
    pairs = [("p0e0h0", "p1e0h0"), ("p0e0h1", "p1e0h1"), ("p0e1h0", "p1e1h0"), ("p0e1h1", "p1e1h1")]
    flows = [_flow(fab, s, d, 40000 + i) for i, (s, d) in enumerate(pairs)]
    first_uplink = ecmp_path(flows[0], space)[1]
    for sport in range(41000, 42000):
        candidate = _flow(fab, *pairs[1], sport)
        if ecmp_path(candidate, space)[1] == first_uplink:
            flows[1] = candidate
            return flows
    raise AssertionError("no source port makes the ECMP model collide")


def test_ecmp_collides_where_global_first_fit_finds_disjoint_paths() -> None:
    fab = fat_tree(4)
    model = TopologyModel(fab)
    space = PathSpace.from_model(model)
    flows = _colliding_pod_flows(fab, space)
    demands = {f: 1.0 for f in flows}
    links = space.index.link_count

    ecmp = summarize(ecmp_paths(flows, space), demands, links)
    assert ecmp.max_load == 2.0 and ecmp.overloaded_links >= 1
    assert ecmp.throughput < 4.0

    result = global_first_fit(demands, space)
    assert set(result.placed) == set(flows) and result.unplaced == []
    paths = {f: p.links for f, p in result.placed.items()}
    gff = summarize(paths, demands, links)
    assert gff.max_load <= 1.0 and gff.overloaded_links == 0
    assert gff.throughput == pytest.approx(4.0)          # the optimum: every flow at line rate
    used = [link for p in paths.values() for link in p]
    assert len(used) == len(set(used))                   # pairwise link-disjoint
    assert all(r >= -1e-9 for r in result.residual)

    forwarding = compute_forwarding(model)
    for flow, placement in result.placed.items():
        assert placement.hops in installed_paths(fab, forwarding, flow.src_host, flow.dst_host)


def test_ecmp_model_chooses_independently_at_every_switch() -> None:
    # with one hash everywhere, the edge's and the aggregation's choices would agree and only
    # half the cores would carry traffic between two pods (the polarisation seeds prevent)
    fab = fat_tree(4)
    space = PathSpace.from_model(TopologyModel(fab))
    cores = {_switches(space, ecmp_path(_flow(fab, "p0e0h0", "p1e0h0", sport), space))[2]
             for sport in range(40000, 40064)}
    assert cores == {"c0", "c1", "c2", "c3"}


def test_first_fit_packs_into_the_first_path_with_room() -> None:
    fab = fat_tree(4)
    space = PathSpace.from_model(TopologyModel(fab))
    a = _flow(fab, "p0e0h0", "p2e0h0")
    b = _flow(fab, "p0e0h1", "p2e1h0")
    c = _flow(fab, "p0e1h0", "p3e0h0")
    result = global_first_fit({a: 0.5, b: 0.4, c: 0.2}, space)
    route = {f: _switches(space, p.links)[:3] for f, p in result.placed.items()}
    assert route[a] == ["p0e0", "p0a0", "c0"]
    assert route[b] == ["p0e0", "p0a0", "c0"]   # 0.5 + 0.4 still fit the first path
    assert route[c] == ["p0e1", "p0a0", "c1"]   # p0a0 -> c0 has 0.1 left
    bigger = global_first_fit({a: 0.5, b: 0.6}, space)   # largest first: b takes the first path
    assert _switches(space, bigger.placed[b].links)[:3] == ["p0e0", "p0a0", "c0"]
    assert _switches(space, bigger.placed[a].links)[:3] == ["p0e0", "p0a1", "c2"]


def test_kept_paths_stay_and_new_flows_fill_around_them() -> None:
    fab = fat_tree(4)
    space = PathSpace.from_model(TopologyModel(fab))
    a = _flow(fab, "p0e0h0", "p1e0h0")
    b = _flow(fab, "p0e0h1", "p1e1h0")
    third = list(space.paths(space.index.switch_id("p0e0"), space.index.switch_id("p1e0")))[2]
    keep = {a: (space.index.host("p0e0h0").uplink, *third, space.index.host("p1e0h0").downlink)}
    assert _switches(space, keep[a])[:3] == ["p0e0", "p0a1", "c2"]
    result = global_first_fit({a: 1.0, b: 1.0}, space, keep=keep)
    assert result.placed[a].links == keep[a]
    assert _switches(space, result.placed[b].links)[:3] == ["p0e0", "p0a0", "c0"]


def test_a_flow_that_fits_nowhere_is_reported_and_down_links_are_avoided() -> None:
    fab = fat_tree(4)
    model = TopologyModel(fab)
    model.set_link_up("p0e0", "p0a0", False)
    space = PathSpace.from_model(model)
    assert isinstance(space, ShortestPaths)
    a = _flow(fab, "p0e0h0", "p1e0h0")
    b = _flow(fab, "p0e0h1", "p1e1h1")
    result = global_first_fit({a: 1.0, b: 1.0}, space)
    assert list(result.placed) == [a] and result.unplaced == [b]
    assert "p0a0" not in _switches(space, result.placed[a].links)
    assert "p0a0" not in _switches(space, ecmp_path(b, space))


def test_restarts_place_a_full_permutation_one_greedy_pass_strands() -> None:
    fab = fat_tree(4)
    space = PathSpace.from_model(TopologyModel(fab))
    for seed in range(1, 40):
        demands = {f: 1.0 for f in _permutation(fab, seed)}
        greedy = global_first_fit(demands, space, restarts=0)
        if greedy.unplaced:
            break
    assert greedy.unplaced, "no permutation stranded a flow in one first-fit pass"
    full = global_first_fit(demands, space)
    # a k=4 fat-tree carries any permutation at full rate (rearrangeably non-blocking)
    assert full.unplaced == [] and full.restarts > 0 and len(full.placed) == 16
    assert min(full.residual) >= -1e-9, "a link was reserved beyond its capacity"
    again = global_first_fit(demands, space)
    assert {f: p.links for f, p in again.placed.items()} == {f: p.links for f, p in full.placed.items()}


def test_kept_paths_that_strand_a_flow_give_way_to_a_placement_from_scratch() -> None:
    fab = fat_tree(4)
    space = PathSpace.from_model(TopologyModel(fab))
    old = [_flow(fab, a, b) for a, b in [("p0e0h1", "p3e0h1"), ("p1e1h1", "p2e0h1"), ("p3e0h1", "p1e1h1"),
                                         ("p1e0h0", "p2e0h0")]]
    new = _flow(fab, "p1e1h0", "p3e0h0")
    earlier = global_first_fit({f: 1.0 for f in old}, space)
    keep = {f: p.links for f, p in earlier.placed.items()}
    assert len(keep) == 4
    used = {link for links in keep.values() for link in links}
    src, dst = space.index.hosts[new.src_host], space.index.hosts[new.dst_host]
    assert all(used & set(middle) for middle in space.paths(src.switch, dst.switch)), \
        "the kept paths should leave the new flow no free path"
    result = global_first_fit({**{f: 1.0 for f in old}, new: 1.0}, space, keep=keep)
    assert result.unplaced == [] and len(result.placed) == 5
    assert min(result.residual) >= -1e-9


def test_leaf_spine_spreads_flows_over_spines() -> None:
    fab = leaf_spine(2, 2, 3)
    space = PathSpace.from_model(TopologyModel(fab))
    flows = [_flow(fab, f"l0h{i}", f"l1h{i}") for i in range(3)]
    result = global_first_fit({f: 1.0 for f in flows}, space)
    spines = [_switches(space, result.placed[f].links)[1] for f in flows[:2]]
    assert spines == ["s0", "s1"] and result.unplaced == [flows[2]]   # 3 hosts, 2 spines


def test_fat_tree_search_places_exactly_as_the_generic_search() -> None:
    fab = fat_tree(8)
    index = FabricIndex(fab)
    fast, generic = FatTreePaths(index), ShortestPaths(index)
    flows = _permutation(fab, seed=7)
    rng = random.Random(3)
    demands = {f: rng.choice([0.25, 0.5, 1.0]) for f in flows}
    one, two = global_first_fit(demands, fast), global_first_fit(demands, generic)
    assert {f: p.links for f, p in one.placed.items()} == {f: p.links for f, p in two.placed.items()}
    assert one.unplaced == two.unplaced and one.placed


def test_demands_outside_the_link_capacity_and_unknown_hosts_are_refused() -> None:
    fab = fat_tree(4)
    space = PathSpace.from_model(TopologyModel(fab))
    with pytest.raises(ValueError, match="p0e0h0 -> p1e0h0.*demand 1.5"):
        global_first_fit({_flow(fab, "p0e0h0", "p1e0h0"): 1.5}, space)
    stranger = Flow(FlowKey("10.0.0.2", "10.9.9.9", 17, 1, 2), "p0e0h0", "p9e9h9")
    with pytest.raises(KeyError, match="p9e9h9"):
        global_first_fit({stranger: 1.0}, space)


def test_max_min_rates_fill_progressively() -> None:
    fab = leaf_spine(1, 1, 3)
    index = FabricIndex(fab)
    a, b = (_flow(fab, f"l0h{i}", "l0h2", 40000 + i) for i in range(2))
    down = index.host("l0h2").downlink
    paths = {a: (index.host("l0h0").uplink, down), b: (index.host("l0h1").uplink, down)}
    assert max_min_rates(paths, {a: 0.3, b: 1.0}, index.link_count) == pytest.approx({a: 0.3, b: 0.7})
    assert max_min_rates(paths, {a: 1.0, b: 1.0}, index.link_count) == pytest.approx({a: 0.5, b: 0.5})
    assert link_loads(paths, {a: 1.0, b: 1.0}, index.link_count)[down] == 2.0


# --- demand estimation ---------------------------------------------------------------------


def _named(pairs: list[tuple[str, str]]) -> list[Flow]:
    return [Flow(FlowKey(s, d, 17, 40000 + i, 5001), s, d) for i, (s, d) in enumerate(pairs)]


def _by_pair(demands: dict[Flow, float]) -> dict[tuple[str, str], float]:
    return {(f.src_host, f.dst_host): d for f, d in demands.items()}


def test_demand_one_sender_to_three_and_three_senders_to_one() -> None:
    out = estimate_demands(_named([("a", "b"), ("a", "c"), ("a", "d")]))
    assert list(out.values()) == pytest.approx([1 / 3] * 3)
    into = estimate_demands(_named([("b", "a"), ("c", "a"), ("d", "a")]))
    assert list(into.values()) == pytest.approx([1 / 3] * 3)


def test_demand_receiver_limits_and_sender_takes_what_is_left() -> None:
    # a splits between x and y; y is shared by three senders, so a->y gets 1/3 and a->x the rest
    got = _by_pair(estimate_demands(_named([("a", "x"), ("a", "y"), ("b", "y"), ("c", "y")])))
    assert got == pytest.approx({("a", "x"): 2 / 3, ("a", "y"): 1 / 3, ("b", "y"): 1 / 3, ("c", "y"): 1 / 3})
    # a fan-out meeting a fan-in: a sends to b, c and d; b and c send to d as well
    got = _by_pair(estimate_demands(_named([("a", "b"), ("a", "c"), ("a", "d"), ("b", "d"), ("c", "d")])))
    assert got == pytest.approx({("a", "b"): 1 / 3, ("a", "c"): 1 / 3, ("a", "d"): 1 / 3,
                                 ("b", "d"): 1 / 3, ("c", "d"): 1 / 3})
    # a receiver that is not full leaves senders their whole share
    assert _by_pair(estimate_demands(_named([("a", "b")]))) == {("a", "b"): 1.0}


def test_demands_are_feasible_and_max_min_fair_on_random_matrices() -> None:
    rng = random.Random(11)
    for _ in range(200):
        hosts = [f"h{i}" for i in range(rng.randint(2, 7))]
        pairs = [tuple(rng.sample(hosts, 2)) for _ in range(rng.randint(1, 12))]
        demands = estimate_demands(_named(pairs))
        sent: dict[str, float] = {}
        received: dict[str, float] = {}
        for f, d in demands.items():
            assert 0 < d <= 1 + 1e-9
            sent[f.src_host] = sent.get(f.src_host, 0) + d
            received[f.dst_host] = received.get(f.dst_host, 0) + d
        assert max([*sent.values(), *received.values()]) <= 1 + 1e-9
        for f, d in demands.items():   # max-min: a full host where no flow gets more than f
            assert any(
                abs(total[host] - 1) < 1e-9 and all(e <= d + 1e-9 for g, e in demands.items() if end(g) == host)
                for total, host, end in ((sent, f.src_host, lambda g: g.src_host),
                                         (received, f.dst_host, lambda g: g.dst_host))
            ), (pairs, f)


def test_a_flow_listed_twice_is_refused() -> None:
    flows = _named([("a", "b")])
    with pytest.raises(ValueError, match="listed twice"):
        estimate_demands(flows * 2)


# --- elephants ------------------------------------------------------------------------------


def test_elephants_at_or_above_a_tenth_of_the_host_link() -> None:
    fab = fat_tree(4)
    big, edge, small = (_flow(fab, "p0e0h0", "p1e0h0", p) for p in (1, 2, 3))
    period = 2.0
    tenth = int(GBPS * period / 8 / 10)      # bytes at exactly 10% of 1 Gbit/s for 2 s
    found = detect_elephants({small: tenth - 1, edge: tenth, big: 5 * tenth}, period, GBPS)
    assert [r.flow for r in found] == [big, edge]
    assert found[0].link_fraction == pytest.approx(0.5) and found[0].bps == pytest.approx(GBPS / 2)
    assert [r.flow for r in detect_elephants({big: 5 * tenth, edge: tenth}, period, GBPS, 0.3)] == [big]
    with pytest.raises(ValueError, match="period 0"):
        detect_elephants({big: 1}, 0, GBPS)
    with pytest.raises(ValueError, match="negative byte count"):
        detect_elephants({big: -1}, period, GBPS)


def test_host_directory_names_the_ends_of_a_five_tuple() -> None:
    fab = fat_tree(4)
    directory = HostDirectory(fab)
    v6 = Flow.between(fab.host("p0e0h0"), fab.host("p3e1h1"), 1, 2, proto=6, ipv6=True)
    assert directory.flow(v6.key) == v6
    assert directory.flow(_flow(fab, "p1e0h1", "p2e1h0").key).dst_host == "p2e1h0"
    with pytest.raises(KeyError, match="10.9.9.9"):
        directory.flow(FlowKey("10.9.9.9", "10.0.0.2", 17, 1, 2))


# --- the engine -----------------------------------------------------------------------------


class Rounds:
    """A measurement source that returns one prepared period per call."""

    def __init__(self, periods: list[dict[Flow, int]], period_s: float = 1.0) -> None:
        self.periods = list(periods)
        self.period_s = period_s
        self.calls = 0

    def __call__(self) -> FlowCounts:
        counts = self.periods[min(self.calls, len(self.periods) - 1)]
        self.calls += 1
        return FlowCounts(counts, self.period_s)


LINE = int(GBPS / 8)   # bytes per second at the host link's rate


def test_engine_installs_changes_and_removes_stale_overrides() -> None:
    fab = fat_tree(4)
    model = TopologyModel(fab)
    a = _flow(fab, "p0e0h0", "p1e0h0")
    b = _flow(fab, "p0e0h1", "p1e1h0")
    mouse = _flow(fab, "p0e1h0", "p2e0h0")
    source = Rounds([{a: LINE, b: LINE, mouse: LINE // 100}, {a: LINE, mouse: LINE // 100}, {a: LINE}])
    te = TrafficEngineer(model, source, TeConfig(host_link_bps=GBPS))
    applied = []

    first = te.run_round(applied.append)
    assert [e.flow for e in first.elephants] == [a, b] and first.unplaced == []
    assert first.demands == {a: 1.0, b: 1.0}
    # pinned where there is a choice: the source edge and the source aggregation
    assert {(e.switch, e.flow) for e in first.install} == {
        (sw, f.key) for f in (a, b) for sw in _switches(te.space(), first.placement.placed[f].links)[:2]}
    for entry in first.install:
        hop = next(h for h in first.placement.placed[next(f for f in (a, b) if f.key == entry.flow)].hops
                   if h.switch == entry.switch)
        assert entry.egress_port == hop.egress_port and entry.device_id == hop.device_id
    assert first.modify == first.remove == [] and applied == [first]
    assert len(te.installed) == 4

    second = te.run_round(applied.append)           # b ended: its entries go, a's stay as they are
    assert second.install == second.modify == []
    assert {e.flow for e in second.remove} == {b.key} and len(second.remove) == 2
    assert set(te.installed) == {(e.switch, e.flow) for e in first.install if e.flow == a.key}

    assert _switches(te.space(), second.placement.placed[a].links)[:3] == ["p0e0", "p0a0", "c0"]
    model.set_link_up("p0a0", "c0", False)          # a's aggregation-core link fails
    third = te.plan()
    assert _switches(te.space(), third.placement.placed[a].links)[:3] == ["p0e0", "p0a0", "c1"]
    # p0a0 has one way up left, so a's entry there is stale; p0e0's still sends a to p0a0
    assert third.install == third.modify == []
    assert [(e.switch, e.flow) for e in third.remove] == [("p0a0", a.key)]
    assert set(third.desired) == {("p0e0", a.key)}


def test_engine_keeps_its_state_when_applying_fails() -> None:
    fab = fat_tree(4)
    a = _flow(fab, "p0e0h0", "p1e0h0")
    te = TrafficEngineer(TopologyModel(fab), Rounds([{a: LINE}]), TeConfig(host_link_bps=GBPS))

    def refuse(_round) -> None:
        raise ConnectionError("switch p0e0 unreachable")

    with pytest.raises(ConnectionError):
        te.run_round(refuse)
    assert te.installed == {} and te.rounds == 0
    again = te.run_round()
    assert len(again.install) == 2 and te.rounds == 1


def test_engine_pins_every_hop_when_asked_and_runs_in_periods() -> None:
    fab = fat_tree(4)
    a = _flow(fab, "p0e0h0", "p1e0h0")
    source = Rounds([{a: LINE}])
    te = TrafficEngineer(TopologyModel(fab), source, TeConfig(host_link_bps=GBPS, pin_every_hop=True))
    rounds = []
    te.run(rounds.append, period_s=0.0, stop=threading.Event(), rounds=3)
    assert source.calls == 3 and [r.number for r in rounds] == [1, 2, 3]
    assert len(rounds[0].install) == 5                 # edge, agg, core, agg, edge
    assert not rounds[1].changed and not rounds[2].changed
