#!/usr/bin/env python3
"""Collectives on a k=4 fat-tree, as nccl-tests reports them: per operation, algorithm and size,
time, algbw and busbw, with the busbw the links allow and the fraction reached
(aifabric.experiments.collectives_bench; `aifabric bench collectives` is the same run).

Ranks on n hosts spread over racks and pods; links limited in the switches and at the hosts
(aifabric.lab.links.limit_links: Mbit/s, Ethernet's overhead counted) so that they, not the
CPU, decide the time; the machine's CPU busy share is reported to show it. Prints a table and
the issue's goals with their figures, writes JSON and a plot of busbw against size per algorithm.

    .venv/bin/python -m benchmarks.collectives [--ranks 8] [--sizes 4096 ... 262144] [--rate 5]
        [--ops all_reduce all_gather ...] [--repeat 3] [--target softswitch] [--no-in-network]
        [--json out/collectives.json] [--png out/collectives.png]
"""
from __future__ import annotations

import sys

from aifabric.experiments import collectives_bench
from aifabric.experiments.bench_entry import bench_main


def main(argv: list[str] | None = None) -> int:
    return bench_main(collectives_bench, __doc__, argv, target=True)


if __name__ == "__main__":
    sys.exit(main())
