#!/usr/bin/env python3
"""The hosts' congestion controls on the same incast (aifabric.experiments.cc_bench; `aifabric bench
cc` is the same run): none, DCQCN, TIMELY and Swift, eight long flows to one host and short flows
among them: the bottleneck's queue and throughput, the short flows' completion times, fairness.
Table, JSON and a plot.

    .venv/bin/python -m benchmarks.congestion_control [--controls none dcqcn timely swift]
        [--seeds 1 2 3] [--long-seconds 1] [--rate 10M] [--json out/cc_bench.json] [--png out/cc_bench.png]
"""
from __future__ import annotations

import sys

from aifabric.experiments import cc_bench
from aifabric.experiments.bench_entry import bench_main


def main(argv: list[str] | None = None) -> int:
    return bench_main(cc_bench, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
