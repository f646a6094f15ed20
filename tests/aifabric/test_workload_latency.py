"""The latency-aware model's arithmetic on cases worked by hand, and its link-bound limit."""
from __future__ import annotations

import pytest

from aifabric.workloads import Job, Parallelism, Scale, estimate, generate, place, preset
from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.latency import Costs, collective_seconds, fabric_hops
from aifabric.workloads.ops import BUSBW_FACTOR, Kind
from topologies.fabric import fat_tree

# 1000 bytes/s of wire; a message 10 ms at its ends, 1 ms a switch hop, a call 100 ms; frames of
# 100 payload bytes and 20 more on the wire
COSTS = Costs(1000.0, message_s=0.010, hop_s=0.001, call_s=0.100, payload_per_frame=100, frame_overhead_bytes=20)


def test_ring_all_reduce_by_hand():
    """n=4, B=800, 3 hops: a call (0.100), two header rounds of alpha (0.013) and a frame's
    overhead (0.020), then 6 steps of 200 bytes in 2 frames: 0.013 + 240/1000."""
    head = 0.100 + 2 * (0.013 + 0.020)
    assert collective_seconds(COSTS, Kind.ALL_REDUCE, 800, 4, 3) == pytest.approx(head + 6 * (0.013 + 0.240))


def test_the_other_kinds_by_hand():
    head = 0.100 + 2 * (0.013 + 0.020)
    step = 0.013 + (200 + 2 * 20) / 1000
    for kind in (Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.ALL_TO_ALL):
        assert collective_seconds(COSTS, kind, 800, 4, 3) == pytest.approx(head + 3 * step)
    assert collective_seconds(COSTS, Kind.BROADCAST, 800, 4, 3) == pytest.approx(head + 2 * 0.013 + 960 / 1000)
    # a send: a call and one message of 250 bytes in 3 frames, no header agreement
    assert collective_seconds(COSTS, Kind.SEND, 250, 2, 5) == pytest.approx(0.100 + 0.015 + 310 / 1000)
    assert collective_seconds(COSTS, Kind.ALL_REDUCE, 800, 1, 0) == pytest.approx(0.100)   # alone: the call


def test_a_group_size_with_its_own_costs_by_hand():
    """Pairs measured apart (a message 2 ms, a call 5 ms): a pair's all_reduce and a send take
    them, a group of four keeps the general ones."""
    pairs = Costs(1000.0, message_s=0.010, hop_s=0.001, call_s=0.100, payload_per_frame=100,
                  frame_overhead_bytes=20, by_group=((2, 0.002, 0.005),))
    # n=2, B=400, 3 hops: a call, one header round (0.005 + 0.020), two steps of 200 bytes
    assert collective_seconds(pairs, Kind.ALL_REDUCE, 400, 2, 3) == pytest.approx(
        0.005 + (0.005 + 0.020) + 2 * (0.005 + 0.240))
    assert collective_seconds(pairs, Kind.SEND, 250, 2, 5) == pytest.approx(0.005 + 0.007 + 310 / 1000)
    assert collective_seconds(pairs, Kind.ALL_REDUCE, 800, 4, 3) == collective_seconds(COSTS, Kind.ALL_REDUCE, 800, 4, 3)
    with pytest.raises(WorkloadError, match="group of 2"):
        Costs(1000.0, by_group=((2, -0.001, 0.0),))


def test_in_network_by_hand():
    """1024 values of 4 bytes in frames of 256 values with 64 bytes more: 4 frames of 1.088 s. After
    three header rounds (alpha 0.015 at 5 hops), the first frame's round trip to a root 3 hops up
    (2 x 0.013 + 1.088), the other three behind it; with a window of 2 frames and a long round
    trip, a round trip per two frames instead."""
    costs = Costs(1000.0, message_s=0.010, hop_s=0.001, agg_values_per_frame=256, agg_frame_overhead_bytes=64)
    assert collective_seconds(costs, Kind.ALL_REDUCE, 4096, 8, 5, in_network=True, root_hops=3) == \
        pytest.approx(3 * 0.015 + (2 * 0.013 + 1.088) + 3 * 1.088)
    narrow = Costs(1000.0, message_s=1.0, agg_values_per_frame=256, agg_frame_overhead_bytes=64, agg_window_frames=2)
    rt = 2 * 1.0 + 1.088
    assert collective_seconds(narrow, Kind.ALL_REDUCE, 4096, 8, 0, in_network=True) == \
        pytest.approx(3 * 1.0 + rt + 3 * rt / 2)


@pytest.mark.parametrize("kind", [Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.ALL_TO_ALL,
                                  Kind.BROADCAST, Kind.SEND])
def test_without_latency_it_is_the_link_bound_figure(kind):
    """No latency and no framing: bytes x nccl-tests' bus-bandwidth factor / link rate."""
    bound = Costs.link_bound(1000.0)
    assert collective_seconds(bound, kind, 4096, 8, 5) == pytest.approx(4096 * BUSBW_FACTOR[kind](8) / 1000)
    assert collective_seconds(bound, Kind.ALL_REDUCE, 4096, 8, 5, in_network=True, root_hops=3) == \
        pytest.approx(4096 / 1000)


def test_bad_constants_are_named():
    from aifabric.workloads import WorkloadError
    with pytest.raises(WorkloadError, match="hop_s -1"):
        Costs(1000.0, hop_s=-1)
    with pytest.raises(WorkloadError, match="link rate 0"):
        Costs(0.0)


def test_hops_on_a_fat_tree():
    """One edge switch between hosts of a rack, three inside a pod, five between pods."""
    fabric = fat_tree(4)
    placement = place(fabric, Parallelism(dp=4, tp=2))      # ranks 0-3 in pod 0, 4-7 in pod 1
    hops = fabric_hops(fabric, placement)
    assert (hops((0, 1)), hops((0, 2)), hops((0, 2, 4, 6)), hops((3,))) == (1, 3, 5, 0)


def test_latency_lengthens_an_iteration():
    """A workload's step with the link-bound costs given explicitly is the default estimate; with
    a call cost it is longer (by less than the calls' sum where they overlap compute)."""
    fabric = fat_tree(4)
    job = Job(preset("tiny"), Parallelism(dp=4))
    w = generate(job, Scale(1e5, emulated_link_mbps=1.0), place(fabric, job.parallelism))
    hops = fabric_hops(fabric, w.placement)
    rate = w.scale.emulated_bytes_per_s
    bound = estimate(w, emulated=True).step_s
    assert estimate(w, emulated=True, costs=Costs.link_bound(rate), hops=hops).step_s == pytest.approx(bound)
    slow = estimate(w, emulated=True, costs=Costs(rate, call_s=0.5), hops=hops).step_s
    calls = sum(1 for op in w.ranks[0] if not op.is_compute)
    assert bound < slow <= bound + 0.5 * calls + 1e-9


def test_calibration_recovers_the_constants_the_model_made():
    """Measurements made by the model itself (a message 1.2 ms, a hop 0.05 ms, a call 3 ms, on
    2 Mbit/s links with the collectives' framing) give those constants back; a noisy measurement
    that puts one below zero is named and taken as 0."""
    from dataclasses import replace

    from aifabric.experiments.calibration import link_costs, solve
    from aifabric.lab.links import LinkPlan, LinkRate

    base = link_costs(LinkPlan(LinkRate.parse("2M")))
    true = replace(base, message_s=1.2e-3, hop_s=5e-5, call_s=3e-3)
    hops = {"near": 1, "far": 5, "group": 5}
    measured = {"near": collective_seconds(true, Kind.ALL_REDUCE, 8, 2, 1),
                "far": collective_seconds(true, Kind.ALL_REDUCE, 8, 2, 5),
                "all_reduce": collective_seconds(true, Kind.ALL_REDUCE, 32, 8, 5),
                "reduce_scatter": collective_seconds(true, Kind.REDUCE_SCATTER, 32, 8, 5)}
    got = solve(base, measured, hops, 8)
    assert (got.costs.message_s, got.costs.hop_s, got.costs.call_s) == pytest.approx((1.2e-3, 5e-5, 3e-3))
    assert not got.notes
    noisy = solve(base, {**measured, "near": measured["far"] + 1e-3}, hops, 8)
    assert noisy.costs.hop_s == 0.0 and "hop_s measured" in noisy.notes[0]


def test_calibration_gives_smaller_groups_their_own_costs():
    """Pairs whose message costs 0.3 ms and call 0.8 ms beside a group of eight's 1.2 and 3 ms:
    the pairs' two calls give theirs back, the group's stay its own, and a workload of pairs and
    sends is timed with the pairs' costs."""
    from dataclasses import replace

    from aifabric.experiments.calibration import group_sizes, link_costs, solve
    from aifabric.lab.links import LinkPlan, LinkRate

    base = link_costs(LinkPlan(LinkRate.parse("2M")))
    true = replace(base, message_s=1.2e-3, hop_s=5e-5, call_s=3e-3, by_group=((2, 3e-4, 8e-4),))
    hops = {"near": 1, "far": 5, "group": 5, "groups of 2": 3}
    measured = {"near": collective_seconds(true, Kind.ALL_REDUCE, 8, 2, 1),
                "far": collective_seconds(true, Kind.ALL_REDUCE, 8, 2, 5),
                "all_reduce": collective_seconds(true, Kind.ALL_REDUCE, 32, 8, 5),
                "reduce_scatter": collective_seconds(true, Kind.REDUCE_SCATTER, 32, 8, 5),
                "all_reduce of 2": collective_seconds(true, Kind.ALL_REDUCE, 8, 2, 3),
                "reduce_scatter of 2": collective_seconds(true, Kind.REDUCE_SCATTER, 8, 2, 3)}
    got = solve(base, measured, hops, 8)
    assert (got.costs.message_s, got.costs.hop_s, got.costs.call_s) == pytest.approx((1.2e-3, 5e-5, 3e-3))
    ((size, message_s, call_s),) = got.costs.by_group
    assert (size, message_s, call_s) == (2, pytest.approx(3e-4), pytest.approx(8e-4))
    assert "in groups of 2: a message 0.30 ms, a call 0.80 ms" in got.describe()
    w = generate(Job(preset("tiny"), Parallelism(dp=2, tp=2, pp=2, micro_batches=2)), Scale(1.0))
    assert group_sizes(w) == {2}
    general = replace(got.costs, by_group=())
    assert estimate(w, costs=got.costs).step_s < estimate(w, costs=general).step_s
    # the pairs' reduce_scatter 1 ms faster: a negative call; the call is 0 and the message the
    # least-squares fit of both calls (3 and 2 messages: their residuals weigh 3:2 against each other)
    fast = {**measured, "reduce_scatter of 2": measured["reduce_scatter of 2"] - 1e-3}
    noisy = solve(base, fast, hops, 8)
    assert noisy.costs.by_group[0][2] == 0.0 and any("call_s of 2 measured" in n for n in noisy.notes)
    residual = {op: collective_seconds(noisy.costs, op, 8, 2, 3) - fast[f"{op.value} of 2"]
                for op in (Kind.ALL_REDUCE, Kind.REDUCE_SCATTER)}
    assert 3 * residual[Kind.ALL_REDUCE] + 2 * residual[Kind.REDUCE_SCATTER] == pytest.approx(0, abs=1e-9)
    assert abs(residual[Kind.ALL_REDUCE]) < 1e-3 and abs(residual[Kind.REDUCE_SCATTER]) < 1e-3
    # its all_reduce 1 ms faster instead: a negative message; the message is 0 and the call the
    # least-squares fit of both calls (their residuals cancel)
    quick = {**measured, "all_reduce of 2": measured["all_reduce of 2"] - 1e-3}
    noisy = solve(base, quick, hops, 8)
    assert noisy.costs.by_group[0][1] == 0.0 and any("message_s of 2 measured" in n for n in noisy.notes)
    residual = {op: collective_seconds(noisy.costs, op, 8, 2, 3) - quick[f"{op.value} of 2"]
                for op in (Kind.ALL_REDUCE, Kind.REDUCE_SCATTER)}
    assert residual[Kind.ALL_REDUCE] + residual[Kind.REDUCE_SCATTER] == pytest.approx(0, abs=1e-9)
