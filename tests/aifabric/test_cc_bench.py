"""`aifabric bench cc`'s pieces that need no fabric: the same seeded flows for every control, the
figures' arithmetic and what each control's parameters predict for the standing queue."""
from __future__ import annotations

import math

import pytest

from aifabric.cli import build_parser
from aifabric.experiments import cc_bench
from aifabric.experiments.lossless_scenes import FRAME, RECEIVER, SENDERS
from aifabric.lab.links import LinkRate
from hostagent.congestion import make_control

PPS = LinkRate.parse("10M").packets_per_s(FRAME)


def test_every_control_gets_the_same_seeded_flows() -> None:
    a, b, c = (cc_bench.incast_flows(seed, PPS, 1.0) for seed in (1, 1, 2))
    assert a == b and a != c
    long = [f for f in a if f.size > cc_bench.SHORT_FRAMES]
    short = [f for f in a if f.size <= cc_bench.SHORT_FRAMES]
    assert sorted(f.src for f in long) == sorted(SENDERS) and len(short) == cc_bench.SHORT_FLOWS
    assert {f.dst for f in a} == {RECEIVER} and len({(f.src, f.sport) for f in a}) == len(a)
    assert all(0.2 <= f.start <= 0.9 for f in short)      # while every long flow still sends


def test_jain_and_the_nearest_rank_percentile() -> None:
    assert cc_bench.jain([5.0, 5.0, 5.0]) == 1.0
    assert cc_bench.jain([1.0, 0.0, 0.0, 0.0]) == 0.25
    assert cc_bench.jain([]) is None
    values = [float(v) for v in range(1, 101)]
    assert cc_bench.percentile(values, 0.99) == 99.0 and cc_bench.percentile(values, 0.5) == 50.0
    assert cc_bench.percentile([3.0], 0.99) == 3.0


def test_swifts_predicted_queue_is_where_its_delay_meets_its_target() -> None:
    rate, base, measured = LinkRate.parse("10M"), 0.005, 0.001
    q = float(cc_bench.predicted_queue("swift", rate, base, measured))
    c = make_control("swift", rate.bits_per_s(FRAME), base, FRAME)
    per_s = rate.packets_per_s(FRAME)
    window = (base * per_s + q) / len(SENDERS)
    target = c.target_for(c.params.hops, window)
    assert (measured + q / per_s) == pytest.approx(target, rel=0.02)     # fabric delay = target
    # more flows, smaller windows, a larger flow-scaled target: a longer queue
    assert float(cc_bench.predicted_queue("swift", rate, base, measured, flows=32)) > q


def test_timelys_predicted_queue_spans_its_thresholds() -> None:
    rate, base, measured = LinkRate.parse("10M"), 0.005, 0.001
    low, high = cc_bench.predicted_queue("timely", rate, base, measured).split("-")
    c = make_control("timely", rate.bits_per_s(FRAME), base, FRAME)
    per_s = rate.packets_per_s(FRAME)
    assert int(low) == round((c.params.t_low_s - measured) * per_s)
    assert int(high) == round((c.params.t_high_s - measured) * per_s)
    assert cc_bench.predicted_queue("dcqcn", rate, base, measured) is None


def test_the_controls_base_rtt_is_the_paths_store_and_forward_time() -> None:
    rate = LinkRate.parse("10M")
    # six links, a 1514-byte frame out and an 82-byte acknowledgement back, at 10 Mbit/s
    assert cc_bench.physical_rtt(rate) == pytest.approx(6 * (1514 + 82) * 8 / rate.bits_per_s(FRAME))
    assert cc_bench.physical_rtt(LinkRate.parse("20M")) == pytest.approx(cc_bench.physical_rtt(rate) / 2)


def test_the_command_line_takes_the_controls_and_refuses_others() -> None:
    args = build_parser().parse_args(["bench", "cc", "--controls", "none", "swift", "--seeds", "4"])
    assert (args.which, args.controls, args.seeds, args.target) == ("cc", ["none", "swift"], [4], "softswitch")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "cc", "--controls", "hpcc"])
    assert math.isclose(args.rate.bits_per_s(FRAME), cc_bench.RATE.bits_per_s(FRAME))


def test_the_summary_takes_medians_over_seeds_and_pools_the_short_flows() -> None:
    def run(seed, util, fct, incomplete):
        return {"control": "swift", "seed": seed, "bottleneck_util": util, "fairness": 1.0, "queue_median": 3,
                "queue_peak": 9, "lost": 0, "short_fct_ms": fct, "short_incomplete": incomplete,
                "short_fct_p50_ms": None, "short_fct_p99_ms": None}
    runs = [run(1, 0.9, [10.0, 20.0], 14), run(2, 0.5, [30.0], 15), run(3, 0.7, [], 16)]
    row = cc_bench.summarise(runs, ["swift"])[0]
    assert row["bottleneck_util"] == 0.7                                    # the median seed
    assert (row["short_fct_p50_ms"], row["short_fct_p99_ms"]) == (20.0, 30.0)   # over the three pooled
    assert row["short_incomplete"] == f"45 of {3 * cc_bench.SHORT_FLOWS}"
