"""The load-balancing benchmark's plan and figures without a fabric: the hot port (from INT hop
aggregates, the egress port whose packets met the deepest mean queue, weighted by how many
reports each flow had through it) and PLB's N as the agents get it."""
from __future__ import annotations

import pytest

from aifabric.experiments.load_balance_bench import LbPlan, hot_port
from controller.telemetry.int_collector import CollectorCounters, CollectorSnapshot, FlowSummary, HopStats
from controller.telemetry.int_report import FlowKey


def _flow(sport: int, hops: list[tuple[int, int, int, float, int]]) -> FlowSummary:
    stats = tuple(HopStats(sw, 1, port, n, None, None, mean, peak, None) for sw, port, n, mean, peak in hops)
    key = FlowKey("10.0.0.2", "10.2.1.3", 17, sport, 4791)
    return FlowSummary(key, sum(n for _, _, n, _, _ in hops), 0.0, 1.0, (), 1, stats)


def test_the_hot_port_is_the_deepest_mean_over_all_reports_through_it():
    # port (1, 3): flow A 10 reports at mean 2, flow B 30 reports at mean 6 -> 5.0
    # port (5, 2): flow A 10 reports at mean 4.5 (deeper than (1, 3) for A alone, not over all)
    snap = CollectorSnapshot(CollectorCounters(), {
        "a": _flow(50000, [(1, 3, 10, 2.0, 4), (5, 2, 10, 4.5, 9)]),
        "b": _flow(50001, [(1, 3, 30, 6.0, 12)]),
    }, {}, 0.0)
    got = hot_port(snap, {1: "p0e0", 5: "c0"})
    assert got["hot_port"] == "p0e0:3"
    assert got["hot_queue_mean"] == 5.0
    assert got["queue_max"] == 12
    assert got["reports"] == 50


def test_no_reports_no_hot_port():
    assert hot_port(CollectorSnapshot(CollectorCounters(), {}, {}, 0.0), {}) == {}


def test_the_plan_gives_the_agents_its_plb_n_and_names_a_bad_one():
    assert LbPlan().agent_config("plb", seed=1).plb.rehash_rounds == 12          # the kernel's default
    assert LbPlan(plb_round_s=0.05).agent_config("plb", seed=1).round_s == 0.05
    with pytest.raises(ValueError, match="PLB round 0 ms"):
        LbPlan(plb_round_s=0)
    assert LbPlan(plb_rehash_rounds=3).agent_config("plb+dcqcn", seed=1).plb.rehash_rounds == 3
    with pytest.raises(ValueError, match="rehash_rounds 40"):
        LbPlan(plb_rehash_rounds=40)


def test_the_imbalance_floor_is_the_fullest_direction_of_flows_on_one_path_each():
    from aifabric.experiments.load_balance_bench import imbalance_floor

    def flows(*pairs):
        return [{"src": s, "dst": d} for s, d in pairs]
    # 12 flows between pods on 32 directions: 24 crossings, a mean of 0.75 flow, a max of 1 at best
    between = flows(*[(f"p{i % 4}e0h{i % 2}", f"p{(i + 1) % 4}e1h{i % 2}") for i in range(12)])
    assert imbalance_floor(between, 32) == 1.33
    # flows inside a pod cross no core link: they do not count; 16 between pods fill every direction
    assert imbalance_floor(between + flows(("p0e0h0", "p0e1h0")), 32) == 1.33
    assert imbalance_floor(flows(*[(f"p{i % 4}e0h0", f"p{(i + 2) % 4}e0h1") for i in range(16)]), 32) == 1.0
    assert imbalance_floor(flows(("p0e0h0", "p0e1h1")), 32) is None     # nothing crosses the cores
    # 20 between pods: a mean of 1.25 a direction, so some direction carries 2 at best
    assert imbalance_floor(flows(*[(f"p{i % 4}e0h0", f"p{(i + 1) % 4}e0h1") for i in range(20)]), 32) == 1.6


@pytest.fixture(scope="module")
def controller():
    from controller.fabric_controller import FabricController, Pipeline
    from topologies.fabric import fat_tree
    ctl = FabricController(fat_tree(4), Pipeline.from_build_dir())
    yield ctl
    ctl.close()


def _permutation(seed: int):
    from hostagent.traffic import patterns
    names = [f"p{p}e{e}h{h}" for p in range(4) for e in range(2) for h in range(2)]
    return patterns.permutation(names, seed, size=40, rate_pps=100.0, payload=1472)


def test_qp_scaling_spreads_each_flow_over_its_queue_pairs_on_distinct_paths(controller):
    from aifabric.experiments.host_load_balance import spread
    from controller.load_balance.hash_paths import FiveTuple, HashPaths
    from controller.paths import installed_paths
    flows = _permutation(1)
    qps, parents = spread(controller, "qp-scaling", flows, seed=1, qps=4)
    assert len(qps) == 4 * len(flows) and parents == [i for i in range(len(flows)) for _ in range(4)]
    with HashPaths.of(controller) as paths:
        for i, flow in enumerate(flows):
            mine = [q for q, p in zip(qps, parents) if p == i]
            assert {(q.src, q.dst, q.dport) for q in mine} == {(flow.src, flow.dst, flow.dport)}
            assert sum(q.size for q in mine) == flow.size and all(q.rate_pps == flow.rate_pps / 4 for q in mine)
            allowed = installed_paths(controller.fabric, controller.forwarding, flow.src, flow.dst)
            assert len({paths.path(FiveTuple(q.src, q.dst, q.sport)) for q in mine}) == min(4, len(allowed))
    assert len({(q.src, q.sport) for q in qps}) == len(qps)


def test_qp_scaling_refuses_a_flow_it_cannot_split(controller):
    from dataclasses import replace

    from aifabric.experiments.host_load_balance import spread
    flows = _permutation(1)
    with pytest.raises(ValueError, match="cannot be split over 4 queue pairs"):
        spread(controller, "qp-scaling", [replace(flows[0], size=3)], seed=1, qps=4)


def test_a_flows_queue_pairs_merge_into_its_figures():
    from aifabric.experiments.host_load_balance import merge_queue_pairs
    part = dict(src="a", dst="b", sport=1, complete=True, delivered_bytes=100, fct_s=1.0, out_of_order=0, lost=0,
                sender_late_s=0.0, error=None)
    merged = merge_queue_pairs([part, {**part, "sport": 2, "fct_s": 2.5, "lost": 1, "complete": False},
                                {**part, "src": "c"}], [0, 0, 1])
    assert [m["id"] for m in merged] == [0, 1] and merged[0]["qps"] == 2
    assert (merged[0]["complete"], merged[0]["delivered_bytes"], merged[0]["fct_s"], merged[0]["lost"]) == \
        (False, 200, 2.5, 1)
    unfinished = merge_queue_pairs([part, {**part, "fct_s": None}], [0, 0])
    assert unfinished[0]["fct_s"] is None


def test_disjoint_keeps_each_flow_and_moves_only_its_source_port(controller):
    from aifabric.experiments.host_load_balance import spread
    flows = _permutation(2)
    chosen, parents = spread(controller, "disjoint", flows, seed=2)
    assert parents == list(range(len(flows)))
    assert [(f.src, f.dst, f.size, f.rate_pps) for f in chosen] == [(f.src, f.dst, f.size, f.rate_pps) for f in flows]
