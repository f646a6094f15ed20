#!/usr/bin/env python3
"""Hedera-style TE on the topology model alone: how long a round's detect + estimate + place
takes on fat-trees of k = 4 .. 32, and what Global First Fit gains over static ECMP.

Two traffic patterns per k, seeded:

* permutation: every host sends one flow, at its link's full rate, to another host, every host
  receiving one (a random derangement): demands are all 1.0;
* random-M: every host sends M elephants (full rate, shared by M) to random other hosts, plus two
  mice at 1% of its link that detection must drop: demands come from Hedera's estimation;
* permutation, 1 down: the permutation again with one aggregation-core link down, so the
  generic search (breadth-first hop counts, depth-first first fit) runs instead of the
  fat-tree's own; its cold run includes the hop counts to every destination edge switch.

Times: wall clock (perf_counter) and process CPU time of detect, estimate and place, median
over --runs runs after one cold run (the first round also builds the path space's caches;
shown as "cold"); the path space's construction itself ("index") is once per topology. The
machine may be shared: CPU time is less disturbed by other processes than wall time.

Quality: GFF's paths (flows it could not place ride the ECMP model's paths, as in the fabric)
against the ECMP model's for every flow: the largest link load (sum of demands, 1.0 = link
rate), links loaded above 1.0, and the fraction of the demanded bandwidth delivered when flows
share links max-min fairly (for the permutation: the fraction of bisection bandwidth).

    .venv/bin/python -m benchmarks.load_balance_te_placement [--k 4,8,16,32] [--runs 5] [--seed 1] [--per-host 4]
        [--json out/load_balance_te_placement.json]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, TypeVar

REPO = Path(__file__).resolve().parent.parent

from aifabric.lab import report  # noqa: E402
from controller.load_balance.te import (  # noqa: E402
    FabricIndex,
    Flow,
    FlowCounts,
    PathSpace,
    PlacementResult,
    TeConfig,
    TrafficEngineer,
    detect_elephants,
    estimate_demands,
    global_first_fit,
)
from controller.load_balance.te.ecmp_model import ecmp_paths  # noqa: E402
from controller.load_balance.te.evaluate import summarize  # noqa: E402
from controller.topology import TopologyModel  # noqa: E402
from topologies import addressing  # noqa: E402
from topologies.fabric import Fabric, fat_tree  # noqa: E402

LINK_BPS = 1e9
PERIOD_S = 1.0
LINE_BYTES = int(LINK_BPS * PERIOD_S / 8)   # a period at the host link's full rate
MICE_PER_HOST = 2
T = TypeVar("T")


def permutation(fab: Fabric, rng: random.Random) -> dict[Flow, int]:
    """One full-rate flow per host to a random other host; every host receives one."""
    hosts = list(fab.hosts)
    dst = hosts[:]
    rng.shuffle(dst)
    for i in range(len(dst)):               # move fixed points away: a derangement
        if dst[i] is hosts[i]:
            j = (i + 1) % len(dst)
            dst[i], dst[j] = dst[j], dst[i]
    return {Flow.between(a, b, 10000 + i, 5001): LINE_BYTES for i, (a, b) in enumerate(zip(hosts, dst))}


def random_many(fab: Fabric, rng: random.Random, per_host: int) -> dict[Flow, int]:
    """``per_host`` elephants (sharing the host's link) and two mice per host, random peers."""
    hosts = list(fab.hosts)
    counts: dict[Flow, int] = {}
    port = 10000
    for i, src in enumerate(hosts):
        # distinct peers other than the source: sample among the others' positions
        others = rng.sample(range(len(hosts) - 1), per_host + MICE_PER_HOST)
        for n, j in enumerate(others):
            port += 1
            dst = hosts[j if j < i else j + 1]
            counts[Flow.between(src, dst, port, 5001)] = (LINE_BYTES // per_host if n < per_host
                                                           else LINE_BYTES // 100)
    return counts


def path_space(model: TopologyModel) -> PathSpace:
    return PathSpace.from_model(model, FabricIndex(model.fabric))


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """``fn()``, its wall-clock and its process CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


@dataclass(frozen=True)
class Timing:
    detect_s: float
    estimate_s: float
    place_s: float
    cpu_s: float

    @property
    def total_s(self) -> float:
        return self.detect_s + self.estimate_s + self.place_s


def pipeline(counts: dict[Flow, int], space: PathSpace) -> tuple[list, dict[Flow, float], PlacementResult, Timing]:
    """detect -> estimate -> place, each timed."""
    elephants, t_detect, c_detect = timed(partial(detect_elephants, counts, PERIOD_S, LINK_BPS))
    demands, t_estimate, c_estimate = timed(partial(estimate_demands, [e.flow for e in elephants]))
    result, t_place, c_place = timed(partial(global_first_fit, demands, space))
    return elephants, demands, result, Timing(t_detect, t_estimate, t_place, c_detect + c_estimate + c_place)


def engine_rounds(model: TopologyModel, counts: dict[Flow, int], runs: int) -> tuple[float, float]:
    """Wall seconds of a `TrafficEngineer`'s first round (path space built, every entry new)
    and the median of the next ``runs`` (same flows: paths kept, nothing to change)."""
    te = TrafficEngineer(model, lambda: FlowCounts(counts, PERIOD_S), TeConfig(host_link_bps=LINK_BPS))
    _, first, _ = timed(te.run_round)
    return first, statistics.median(timed(te.run_round)[1] for _ in range(runs))


def one_case(k: int, pattern: str, counts: dict[Flow, int], model: TopologyModel, space: PathSpace,
             runs: int) -> dict:
    elephants, demands, result, cold = pipeline(counts, space)
    warm = [pipeline(counts, space)[3] for _ in range(runs)]
    engine_first, engine_next = engine_rounds(model, counts, runs)
    index = space.index
    ecmp = ecmp_paths(demands, space)
    gff_paths = {f: p.links for f, p in result.placed.items()}
    gff_paths.update({f: ecmp[f] for f in result.unplaced})
    gff = summarize(gff_paths, demands, index.link_count)
    base = summarize(ecmp, demands, index.link_count)

    def median(attr: str) -> float:
        return statistics.median(getattr(t, attr) for t in warm)

    return {
        "k": k,
        "pattern": pattern,
        "hosts": len(index.hosts),
        "flows": len(counts),
        "elephants": len(elephants),
        "placed": len(result.placed),
        "unplaced": len(result.unplaced),
        "cold_s": cold.total_s,
        "median_s": median("total_s"),
        "min_s": min(t.total_s for t in warm),
        "median_cpu_s": median("cpu_s"),
        "median_detect_s": median("detect_s"),
        "median_estimate_s": median("estimate_s"),
        "median_place_s": median("place_s"),
        "engine_first_round_s": engine_first,
        "engine_next_round_s": engine_next,
        "gff_max_load": gff.max_load,
        "ecmp_max_load": base.max_load,
        "gff_overloaded_links": gff.overloaded_links,
        "ecmp_overloaded_links": base.overloaded_links,
        "gff_fraction": gff.fraction,
        "ecmp_fraction": base.fraction,
        "demand_total": gff.demand,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", default="4,8,16,32", help="fat-tree sizes, comma-separated")
    ap.add_argument("--runs", type=int, default=5, help="timed runs after the cold one")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-host", type=int, default=4, help="elephants per host in random-M")
    ap.add_argument("--json", default=str(REPO / "out" / "load_balance_te_placement.json"))
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.k.split(",") if x]
    except ValueError:
        ap.error(f"--k {args.k!r}: expected even integers separated by commas")
    if args.runs < 1:
        ap.error(f"--runs {args.runs}: at least one timed run")
    if args.per_host < 1:
        ap.error(f"--per-host {args.per_host}: at least one elephant per host")

    rows: list[dict] = []
    setup: list[dict] = []
    for k in sizes:
        report.progress(f"k={k}: fabric and path space")
        fab = fat_tree(k)
        model = TopologyModel(fab)
        space, t_index, _ = timed(partial(path_space, model))
        setup.append({"k": k, "switches": len(fab.switches), "hosts": len(fab.hosts), "index_s": t_index})
        patterns = {
            "permutation": permutation(fab, random.Random(args.seed)),
            f"random-{args.per_host}": random_many(fab, random.Random(args.seed), args.per_host),
        }
        for name, counts in patterns.items():
            report.progress(f"k={k}: {name}, {len(counts)} flows")
            rows.append(one_case(k, name, counts, model, space, args.runs))
        degraded = TopologyModel(fab)
        degraded.set_link_up(addressing.agg_name(0, 0), addressing.core_name(0), False)
        report.progress(f"k={k}: permutation with a link down")
        rows.append(one_case(k, "permutation, 1 down", patterns["permutation"], degraded,
                             PathSpace.from_model(degraded, space.index), args.runs))

    ms = 1000.0
    print(report.table(
        ["k", "pattern", "hosts", "elephants", "placed", "on ECMP", "cold ms", "median ms", "min ms",
         "CPU ms", "place ms", "round 1 ms", "next ms", "max load GFF", "ECMP", "over 1.0 GFF", "ECMP",
         "delivered GFF", "ECMP"],
        [[r["k"], r["pattern"], r["hosts"], r["elephants"], r["placed"], r["unplaced"],
          r["cold_s"] * ms, r["median_s"] * ms, r["min_s"] * ms, r["median_cpu_s"] * ms,
          r["median_place_s"] * ms, r["engine_first_round_s"] * ms, r["engine_next_round_s"] * ms,
          r["gff_max_load"], r["ecmp_max_load"], r["gff_overloaded_links"],
          r["ecmp_overloaded_links"], f"{r['gff_fraction']:.3f}", f"{r['ecmp_fraction']:.3f}"] for r in rows],
        title="TE round (detect + estimate + place) on fat-trees, Global First Fit vs the ECMP model",
    ))
    print()
    print(report.table(["k", "switches", "hosts", "path space ms"],
                       [[s["k"], s["switches"], s["hosts"], s["index_s"] * ms] for s in setup]))
    report.write_json(args.json, {"link_bps": LINK_BPS, "period_s": PERIOD_S, "runs": args.runs,
                                  "seed": args.seed, "setup": setup, "results": rows})
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
