#!/usr/bin/env python3
"""The lab checked against physics and papers (aifabric.experiments.fidelity_bench; `aifabric bench
fidelity` is the same run): the same training iteration at two link rates four times apart (rate
invariance), measured against the latency-aware estimate per collective kind, SwitchML's speedup
of in-network aggregation against a model's communication/computation ratio beside the paper's,
and nccl-tests' bus bandwidth per operation. Table, JSON and a plot.

    .venv/bin/python -m benchmarks.fidelity [--rates 1 4] [--seeds 1 2 3] [--fit-seconds 2]
        [--parts invariance switchml busbw] [--json out/fidelity.json] [--png out/fidelity.png]
"""
from __future__ import annotations

import sys

from aifabric.experiments import fidelity_bench
from aifabric.experiments.bench_entry import bench_main


def main(argv: list[str] | None = None) -> int:
    return bench_main(fidelity_bench, __doc__, argv, target=True)


if __name__ == "__main__":
    sys.exit(main())
