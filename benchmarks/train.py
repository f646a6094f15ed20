#!/usr/bin/env python3
"""One training workload across load-balancing modes, DP all-reduce by ring or in the switches,
and topologies (fat-tree, rail-optimised, dual-plane), same seeds, medians
(aifabric.experiments.train_bench; `aifabric bench train` is the same run): step time, exposed
communication, the analytic estimate, link load and CPU share; table, JSON and a plot.

    .venv/bin/python -m benchmarks.train [--preset tiny --dp 4 --tp 2] [--rate 2] [--seeds 0 1 2]
        [--topologies fattree rail dualplane] [--modes ecmp spray flowlet te plb] [--collectives ring in_network]
        [--congestion none|dcqcn]
        [--json out/bench_train.json] [--png out/bench_train.png]
"""
from __future__ import annotations

import sys

from aifabric.experiments import train_bench
from aifabric.experiments.bench_entry import bench_main


def main(argv: list[str] | None = None) -> int:
    return bench_main(train_bench, __doc__, argv, target=True)


if __name__ == "__main__":
    sys.exit(main())
