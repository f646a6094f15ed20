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

import argparse
import sys

from aifabric.experiments import collectives_bench as cb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cb.add_arguments(ap)
    ap.add_argument("--target", default="softswitch")
    return cb.run_args(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
