#!/usr/bin/env python3
"""In-network AllReduce against ring and parameter server on one k=4 fat-tree, one run.

For n workers (spread over racks and pods) and several tensor sizes, each algorithm reduces the
same tensors (same seed) over links limited to the same rate (bits/s) in the switches and at the
hosts, so the links decide the time; the machine's CPU busy share during every run is reported
to show it was not the bottleneck. Prints a table, writes JSON and a picture of algorithm
bandwidth against tensor size.

    .venv/bin/python -m benchmarks.allreduce [--workers 2 4 8] [--sizes 4096 16384 65536]
        [--rate 10] [--target softswitch] [--json out/allreduce.json] [--png out/allreduce.png]

Goal (issue): in-network >= 1.7x ring's algorithm bandwidth at n = 8 (the bytes on each host
link bound it at 2(n-1)/n = 1.75x), and 1.0x the tensor on each host link plus headers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


from aifabric.lab import report  # noqa: E402
from aifabric.experiments.allreduce_lab import ALGORITHMS, CELLS, run_allreduce, spread_workers  # noqa: E402
from aifabric.experiments.demo_allreduce import DEFAULT_RATE, LABELS, retransmit_timeout  # noqa: E402
from aifabric.lab.lab import Lab  # noqa: E402
from aifabric.lab.links import LinkPlan, limit_links, rate_arg  # noqa: E402
from controller.aggregation import JobManager  # noqa: E402
from topologies.fabric import fat_tree  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536], help="tensor elements")
    ap.add_argument("--dtype", choices=("float32", "int32"), default="float32")
    ap.add_argument("--rate", type=rate_arg, default=DEFAULT_RATE,
                    help="link rate per direction: Mbit/s, or with a unit (2.5M, 500k, 1000pps); default %(default)s")
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--json", default="out/allreduce.json")
    ap.add_argument("--png", default="out/allreduce.png")
    args = ap.parse_args(argv)

    fabric = fat_tree(4)
    plan = LinkPlan(args.rate)
    rows, runs = [], []
    with Lab(fabric, target=args.target, progress=report.progress) as lab:
        limit_links(lab, plan)
        manager = JobManager(lab.controller)
        for n in args.workers:
            workers, server = spread_workers(fabric, n)
            for size in args.sizes:
                by_alg = {}
                for alg in ALGORITHMS:
                    report.progress(f"n={n} size={size}: {LABELS[alg]}")
                    r = run_allreduce(lab, manager, alg, workers, server, elements=size, dtype=args.dtype,
                                      timeout=retransmit_timeout(plan, n))
                    by_alg[alg] = r
                    runs.append({"n": n, **r.summary()})
                for alg, r in by_alg.items():
                    ratio = r.algbw_mbps / by_alg["ring"].algbw_mbps if by_alg["ring"].ok and r.ok else "-"
                    rows.append((n, size, LABELS[alg], *r.cells(), ratio))
    print(report.table(["n", "elements", "algorithm", *CELLS, "vs ring"], rows,
                       title=f"\nAllReduce on a k=4 fat-tree ({args.target}, {args.dtype}), links {plan.describe()}"))
    report.write_json(args.json, {"links": plan.describe(), "target": args.target, "runs": runs})
    draw(Path(args.png), runs)
    print(f"\nJSON: {Path(args.json).resolve()}\npicture: {Path(args.png).resolve()}")
    failed = report.say_failed(runs)
    return 0 if all(r["ok"] for r in runs) and not failed else 1


def draw(path: Path, runs: list[dict]) -> None:
    plt = report.pyplot()

    ns = sorted({r["n"] for r in runs})
    fig, axes = plt.subplots(1, len(ns), figsize=(4 * len(ns), 3.6), squeeze=False)
    for ax, n in zip(axes[0], ns):
        for alg in ALGORITHMS:
            pts = sorted((r["tensor_bytes"], r["algbw_MBps"] * 1000) for r in runs
                         if r["n"] == n and r["algorithm"] == alg and r["ok"])
            if pts:
                ax.plot([p[0] / 1024 for p in pts], [p[1] for p in pts], marker="o", label=LABELS[alg])
        ax.set_xscale("log", base=2)
        ax.set_title(f"{n} workers")
        ax.set_xlabel("tensor (KiB)")
        ax.set_ylabel("algorithm bandwidth (kB/s)")
        ax.legend()
    report.save_figure(fig, path)


if __name__ == "__main__":
    sys.exit(main())
