#!/usr/bin/env python3
"""ECMP, packet spraying, flowlets and Hedera-style TE compared on one k=4 fat-tree.

Same seeds and flows for every mode, links limited in the switches (and the hosts' uplinks) so
they are the bottleneck, several runs, medians. Prints a table, writes JSON and a picture
(per-mode bars, per-core-link heat map). See aifabric/experiments/load_balance_bench.py for the figures' meaning.

    .venv/bin/python -m benchmarks.load_balance [--modes ecmp spray flowlet te]
        [--patterns permutation collective] [--seeds 1 2 3] [--rate 100] [--target softswitch]
"""
from __future__ import annotations

import sys


from aifabric.cli.load_balance_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
