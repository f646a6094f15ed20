#!/usr/bin/env python3
"""The hosts' congestion controls on the same incast (aifabric.experiments.cc_bench; `aifabric bench
cc` is the same run): none, DCQCN, TIMELY and Swift, eight long flows to one host and short flows
among them: the bottleneck's queue and throughput, the short flows' completion times, fairness.
Table, JSON and a plot.

    .venv/bin/python -m benchmarks.congestion_control [--controls none dcqcn timely swift]
        [--seeds 1 2 3] [--long-seconds 1] [--rate 10M] [--json out/cc_bench.json] [--png out/cc_bench.png]
"""
from __future__ import annotations

import argparse
import sys

from aifabric.experiments import cc_bench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cc_bench.add_arguments(ap)
    return cc_bench.run_args(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
