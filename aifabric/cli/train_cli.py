"""``aifabric train``: a training workload executed on a fabric (aifabric.experiments.train_runner):
the job of `aifabric workload show`'s options, its ranks placed on the --topo fabric's hosts,
scaled to the emulated links, --iterations iterations; a table per iteration (the slowest rank:
step, compute, exposed communication, idle, time per collective kind), a timeline PNG and JSON."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from aifabric.cli import topo_args, workload_cli
from aifabric.lab import report
from aifabric.workloads import WorkloadError, generate, place
from emulation.p4switch import TARGETS

DEFAULT_PNG = "out/train_timeline.png"


def add_arguments(p: argparse.ArgumentParser) -> None:
    workload_cli.add_arguments(p)
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--target", choices=TARGETS, default="softswitch")
    p.add_argument("--png", metavar="PATH", help=f"the timeline (default {DEFAULT_PNG})")


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("aifabric: error: must run as root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    from aifabric.experiments.train_runner import draw_timeline, run_workload
    from aifabric.lab.lab import Lab

    defaults = argparse.ArgumentParser()
    workload_cli.add_arguments(defaults)
    try:
        job = workload_cli.job_of(args, defaults.parse_args(["--preset", "tiny"]))
        fabric = topo_args.fabric_of(args)
        placement = place(fabric, job.parallelism)
        scale = workload_cli.scale_of(args, job)
        workload = generate(job, scale, placement)
    except (WorkloadError, ValueError) as e:
        print(f"aifabric: error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="aifabric-train-") as tmp, \
            Lab(fabric, target=args.target, progress=report.progress) as lab:
        run_ = run_workload(lab, workload, args.iterations, Path(tmp) / "plan.json")
    if not run_.ok:
        print("aifabric: training failed: " + "; ".join(run_.errors), file=sys.stderr)
        return 1
    print(report.table(["iteration", "step (s)", "compute (s)", "exposed comm (s)", "idle (s)", "comm by kind (s)"],
                       run_.iteration_rows(),
                       title=f"{job.shape.name} on {fabric.describe()}, {job.parallelism.world} ranks, emulated "
                             f"time (x{scale.time_dilation:.3g} the real one); the slowest rank"))
    png = args.png or DEFAULT_PNG
    draw_timeline(png, run_)
    print(f"timeline written to {Path(png).resolve()}")
    if args.json:
        report.write_json(args.json, {**workload.job.to_dict(), "scale": scale.to_dict(), "hosts": run_.hosts,
                                      "cpu_busy": run_.cpu_busy, "wall_s": run_.wall_s, "ranks": run_.reports})
        print(f"figures written to {Path(args.json).resolve()}")
    return 0
