"""``aifabric workload show``: a training job's operations per rank, bytes per collective kind and
the analytic step time, real-scale and scaled to the emulated links (aifabric.workloads)."""
from __future__ import annotations

import argparse
import json
import sys

from aifabric.cli import topo_args
from aifabric.lab import report
from aifabric.workloads import Job, Parallelism, Scale, WorkloadError, estimate, fit, generate, load_job, place, \
    preset
from aifabric.workloads.job import DEFAULT_TFLOPS
from aifabric.workloads.parallelism import SCHEDULES
from aifabric.workloads.presets import PRESETS
from aifabric.workloads.scale import CANNOT_PRESERVE, EMULATED_LINK_MBPS, REAL_LINK_GBPS
from aifabric.workloads.summary import Summary, summarise

DEFAULT_FIT_SECONDS = 10.0


PARALLELISM_HELP = {"dp": "data-parallel ranks", "tp": "tensor-parallel ranks", "pp": "pipeline stages",
                    "ep": "expert-parallel ranks, dividing --dp", "micro_batch": "sequences per micro-batch",
                    "micro_batches": "micro-batches per iteration, per data-parallel rank"}


def add_arguments(p: argparse.ArgumentParser, *, emulated_rate: bool = True) -> None:
    """The job's options; ``emulated_rate``: with --emulated-mbps (``aifabric train`` has its
    --rate instead)."""
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--preset", choices=tuple(PRESETS), help="a published model shape (aifabric/workloads/presets.py)")
    model.add_argument("--file", metavar="PATH", help="a job file, YAML or JSON (aifabric/workloads/spec_file.py), "
                                                      "holding the parallelism and TFLOP/s too")
    defaults = Parallelism()
    for name in ("dp", "tp", "pp", "ep", "micro_batch", "micro_batches"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name),
                       help=f"{PARALLELISM_HELP[name]} (default %(default)s)")
    p.add_argument("--bucket-mb", type=float, default=defaults.bucket_mb, help="gradient bucket, 10^6 bytes")
    p.add_argument("--zero", type=int, default=0, choices=(0, 1, 2, 3), help="ZeRO stage")
    p.add_argument("--schedule", choices=SCHEDULES, default=defaults.schedule, help="pipeline schedule")
    p.add_argument("--tflops", type=float, default=DEFAULT_TFLOPS, help="sustained TFLOP/s per GPU")
    p.add_argument("--real-gbps", type=float, default=REAL_LINK_GBPS,
                   help="a real GPU's link rate, Gbit/s (default %(default)g)")
    if emulated_rate:
        p.add_argument("--emulated-mbps", type=float, default=EMULATED_LINK_MBPS,
                       help="the emulated links' rate, Mbit/s (default %(default)g)")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--scale", type=float, help="divide bytes by this (compute follows; see aifabric/workloads/scale.py)")
    scale.add_argument("--fit-seconds", type=float, default=DEFAULT_FIT_SECONDS,
                       help="pick the scale so an emulated iteration takes this long (default %(default)s)")
    p.add_argument("--place", action="store_true", help="place the ranks on the hosts of the --topo fabric")
    topo_args.add_arguments(p)
    p.add_argument("--json", metavar="PATH", help="also write everything as JSON there ('-': standard output only)")
    p.add_argument("--ops", metavar="PATH", help="write every rank's operations there as JSON (aifabric.workloads.ops)")


PARALLELISM_OPTIONS = ("dp", "tp", "pp", "ep", "micro_batch", "micro_batches", "bucket_mb", "zero", "schedule", "tflops")


def job_of(args: argparse.Namespace, defaults: argparse.Namespace) -> Job:
    if args.file:
        for name in PARALLELISM_OPTIONS:       # not dropped silently: the file says otherwise
            if getattr(args, name) != getattr(defaults, name):
                raise WorkloadError(f"--{name.replace('_', '-')}: {args.file} holds the parallelism and the "
                                    "TFLOP/s; set them there")
        return load_job(args.file)
    par = Parallelism(dp=args.dp, tp=args.tp, pp=args.pp, ep=args.ep, micro_batch=args.micro_batch,
                      micro_batches=args.micro_batches, bucket_mb=args.bucket_mb, zero_stage=args.zero,
                      schedule=args.schedule)
    return Job(preset(args.preset), par, args.tflops)


def scale_of(args: argparse.Namespace, job: Job) -> Scale:
    """--scale as given, or the scale that fits an iteration into --fit-seconds on the emulated links."""
    if args.scale is not None:
        return Scale(args.scale, args.real_gbps, args.emulated_mbps)
    real = estimate(generate(job, Scale(1.0, args.real_gbps, args.emulated_mbps))).step_s
    return fit(real, args.fit_seconds, args.real_gbps, args.emulated_mbps)


def run(args: argparse.Namespace) -> int:
    defaults = argparse.ArgumentParser()
    add_arguments(defaults)
    try:
        job = job_of(args, defaults.parse_args(["--preset", next(iter(PRESETS))]))
        placement = place(topo_args.fabric_of(args), job.parallelism) if args.place else None
        workload = generate(job, scale_of(args, job), placement)
        summary = summarise(workload)
        if args.json == "-":
            print(json.dumps(summary.to_dict(), indent=1))
        else:
            print(render(summary))
        for path, data in ((args.json, summary.to_dict), (args.ops, workload.to_dict)):
            if path and path != "-":
                report.write_json(path, data())
                report.progress(f"JSON written to {path}")
    except (WorkloadError, ValueError, OSError) as e:
        print(f"aifabric: error: {e}", file=sys.stderr)
        return 2
    return 0


def render(s: Summary) -> str:
    w, job = s.workload, s.workload.job
    p, sc = job.parallelism, w.scale
    lines = [f"{job.shape.name}: DP {p.dp} x TP {p.tp} x PP {p.pp} (EP {p.ep}) = {p.world} ranks, "
             f"{p.micro_batches} micro-batches of {p.micro_batch}, {p.schedule}, ZeRO {p.zero_stage}, "
             f"buckets {p.bucket_mb:g} MB, {job.sustained_tflops:g} TFLOP/s per GPU",
             f"scale: bytes / {sc.factor:.4g}, links {sc.real_link_gbps:g} Gb/s -> {sc.emulated_link_mbps:g} Mb/s, "
             f"time x {sc.time_dilation:.4g}", "", "ops per rank:"]
    kinds = sorted({k for c in s.op_counts for k in c})
    header = ["ranks", *(["host"] if w.placement else []), *kinds]
    rows = []
    for first, last in _runs(s):
        hosts = [f"{w.placement.host(first)}" + (f"..{w.placement.host(last)}" if last > first else "")] \
            if w.placement else []
        rows.append([f"{first}" if first == last else f"{first}-{last}", *hosts,
                     *(s.op_counts[first].get(k, 0) for k in kinds)])
    lines += report.table(header, rows).splitlines()
    lines += ["", "bytes per collective kind (the busiest rank; real, emulated):"]
    lines += report.table(["kind", "ops", "real", "emulated"],
                    [[k, t.ops, _bytes(t.bytes_max_rank), _bytes(t.emulated_bytes_max_rank)]
                          for k, t in s.kinds.items()]).splitlines()
    lines += ["", "analytic link-bound step (the slowest rank):"]
    rows = []
    for label, est in (("real", s.real), ("emulated", s.emulated)):
        r = est.slowest
        rows.append([label, _s(r.step_s), _s(r.compute_s), _s(r.exposed_comm_s),
                     f"{100 * r.exposed_comm_s / r.step_s:.1f}%" if r.step_s else "-"])
    lines += report.table(["", "step", "compute", "exposed comm", "exposed"], rows).splitlines()
    if w.placement and w.placement.notes:
        lines += ["", *(f"note: {n}" for n in w.placement.notes)]
    lines += ["", "scaling cannot preserve:", *(f"  - {item}" for item in CANNOT_PRESERVE)]
    return "\n".join(lines)


def _runs(s: Summary) -> list[tuple[int, int]]:
    """Consecutive ranks with the same op counts (and consecutive hosts), as (first, last)."""
    runs: list[tuple[int, int]] = []
    for r, counts in enumerate(s.op_counts):
        if runs and s.op_counts[runs[-1][0]] == counts:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    return runs


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _s(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.4g} s"
