#!/usr/bin/env python3
"""One training job through the same seeded link failures under each recovery: none, data-plane
failover, controller reroute, both (aifabric.experiments.resilience_bench; `aifabric bench
resilience` is the same run): jobs finished, time lost, effective training time ratio, packets
resent, reroutes; table, JSON and a picture.

    .venv/bin/python -m benchmarks.resilience [--recoveries none failover reroute failover+reroute]
        [--seeds 1 2 3] [--mtbf 6] [--horizon 12] [--outage 2] [--iterations 12] [--rate 10]
        [--json out/bench_resilience.json] [--png out/bench_resilience.png]
"""
from __future__ import annotations

import sys

from aifabric.experiments import resilience_bench
from aifabric.experiments.bench_entry import bench_main


def main(argv: list[str] | None = None) -> int:
    return bench_main(resilience_bench, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
