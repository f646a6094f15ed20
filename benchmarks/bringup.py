#!/usr/bin/env python3
"""Bring-up time and memory per switch process of fat-trees, per P4 target.

For each k and target: the time until every switch target answers P4Runtime, the time the
controller needs to push the pipeline and install every route, and the resident memory of the
switch processes once programmed; then a ping across the fabric proves it forwards.

    .venv/bin/python -m benchmarks.bringup [--k 4 6] [--targets softswitch bmv2] [--json PATH]
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from aifabric.lab import checks, report  # noqa: E402
from aifabric.lab.lab import Lab  # noqa: E402
from topologies.fabric import fat_tree  # noqa: E402


def measure(k: int, target: str) -> dict:
    fabric = fat_tree(k)
    with Lab(fabric, target=target, progress=report.progress) as lab:
        rss = checks.memory_mib(lab.target_pids())
        a, b = fabric.hosts[0], fabric.hosts[-1]
        ok = " 0% packet loss" in lab.host(a.name).cmd(f"ping -c 3 -i 0.2 -W 2 {b.ip4.ip}")
        return {"k": k, "target": target, "switches": len(fabric.switches), "hosts": len(fabric.hosts),
                "targets_s": round(lab.bring_up.targets_s, 2), "program_s": round(lab.bring_up.program_s, 2),
                "total_s": round(lab.bring_up.total_s, 2), "rss_mean_mib": rss["mean"],
                "rss_max_mib": rss["max"], "rss_total_mib": rss["total"], "forwards": ok}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[4, 6])
    ap.add_argument("--targets", nargs="+", default=None, help="softswitch, bmv2 (default: those installed)")
    ap.add_argument("--json", default=str(REPO / "out/bringup.json"))
    args = ap.parse_args(argv)
    targets = args.targets or ["softswitch"] + (["bmv2"] if shutil.which("simple_switch_grpc") else [])
    results = [measure(k, t) for k in args.k for t in targets]
    print(report.table(
        ["k", "target", "switches", "targets up (s)", "program (s)", "total (s)", "RSS/switch (MiB)", "forwards"],
        [(r["k"], r["target"], r["switches"], r["targets_s"], r["program_s"], r["total_s"], r["rss_mean_mib"],
          "yes" if r["forwards"] else "NO") for r in results],
        title="Fat-tree bring-up"))
    report.write_json(args.json, {"results": results})
    print(f"JSON: {args.json}")
    failed = report.say_failed(results)
    return 0 if all(r["forwards"] for r in results) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
