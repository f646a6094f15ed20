"""`aifabric bench resilience` (benchmarks/resilience.py): one training workload through the same
seeded failure schedule under each way the fabric recovers, what each failure cost.

Recoveries (a fresh fabric each, since failure handling is chosen at bring-up), ``none`` or
parts joined by ``+``:

* ``none``: no failure handling; a failed link is a black hole until it comes back, a killed
  rank ends the job;
* ``failover``: data-plane failover on link heartbeats (each switch moves what it sends off a
  port silent for its timeout to another member of the group; no route recomputed);
* ``reroute``: the controller: its heartbeats find the dead port, it writes port_status and
  recomputes the routes (without ``failover``: no link heartbeats);
* ``repath``: the ranks move a flow that loses packets to another path themselves
  (`run_workload(repath=True)`);
* ``restart``: a failed attempt (a rank killed, a collective given up) is restarted from the
  ranks' checkpoint, saved every ``checkpoint_every`` iterations (`run_workload(restarts=)`).

``failover+reroute`` is what `aifabric train --fail` runs.

The schedule (aifabric.experiments.failure_schedule.random_schedule): links between switches
fail at exponential gaps of mean ``mtbf`` s within ``horizon`` s (0: none), each for ``outage``
s (0: for good), and ``rank_failures`` ranks are killed and ``host_failures`` of the job's hosts
lost (their ranks killed, their links down for good: a restart moves their ranks to spare
hosts) at uniform times within it, the same for every recovery of a seed. Per run: whether the job finished, the time its
failures cost (the iterations their outages overlapped, beyond the median of the others), the
effective training time ratio, packets resent, reroutes; medians over seeds; table, JSON and a
picture of each recovery's iteration times with the outages marked. The links are limited to
``rate`` (bits/s) so that they, not the CPU, set the pace; the CPU share is reported.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from aifabric.experiments.failure_schedule import FailureSchedule, PlannedFailure, iteration_spans, random_schedule
from aifabric.experiments.fabric_conditions import FabricConditions
from aifabric.experiments.train_runner import WorkloadRun, run_workload
from aifabric.lab import report
from aifabric.lab.failures import Failures
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate, rate_arg
from aifabric.lab.report import Failed
from aifabric.workloads import Job, Parallelism, Scale, estimate, fit, generate, place, preset
from controller.failover import HeartbeatConfig
from controller.failover.config import link_interval_for
from emulation.p4switch import resolve_target
from topologies.fabric import fat_tree

PARTS = ("failover", "reroute", "repath", "restart")
RECOVERIES = ("none", "failover", "reroute", "failover+reroute", "repath", "restart",
              "failover+reroute+repath+restart")
RESTARTS = 8              # a restarting job's attempts after its first: more than a schedule's failures
DEFAULT_JSON, DEFAULT_PNG = "out/bench_resilience.json", "out/bench_resilience.png"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recoveries", nargs="+", type=recovery_arg, default=list(RECOVERIES), metavar="RECOVERY",
                   help=f"how the job and the fabric recover, each on a fabric of its own: none, or parts of "
                        f"{', '.join(PARTS)} joined by + (default: {' '.join(RECOVERIES)})")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="failure schedules (default 1 2 3)")
    p.add_argument("--mtbf", type=float, default=6.0,
                   help="mean seconds between link failures; 0: no link fails (default %(default)s)")
    p.add_argument("--horizon", type=float, default=12.0,
                   help="failures fall within this many seconds of the ranks' start (default %(default)s)")
    p.add_argument("--outage", type=float, default=2.0, help="seconds a failed link stays down; 0: for good "
                                                              "(default %(default)s)")
    p.add_argument("--rank-failures", type=int, default=0, metavar="N",
                   help="ranks killed at uniform times within the horizon, beside the links: a job lives through "
                        "them only by restart (default %(default)s)")
    p.add_argument("--host-failures", type=int, default=0, metavar="N",
                   help="hosts of the job lost (ranks killed, links down for good) at uniform times within the "
                        "horizon: a job lives through them only by restart, on spare hosts (default %(default)s)")
    p.add_argument("--checkpoint-every", type=int, default=2, metavar="N",
                   help="with restart: iterations between two checkpoints of the ranks (default %(default)s)")
    p.add_argument("--iterations", type=int, default=12, help="iterations of the job (default %(default)s)")
    p.add_argument("--fit-seconds", type=float, default=1.5,
                   help="the analytic iteration on the emulated links, seconds (default %(default)s)")
    p.add_argument("--rate", type=rate_arg, default=LinkRate.parse("2M"),
                   help="every link's rate per direction (default %(default)s)")
    p.add_argument("--target", choices=("softswitch", "bmv2"), default="softswitch")
    p.add_argument("--json", default=DEFAULT_JSON, help="figures (default %(default)s)")
    p.add_argument("--png", default=DEFAULT_PNG, help="picture (default %(default)s)")


def recovery_arg(text: str) -> str:
    """``none`` or parts of PARTS joined by ``+``, each once (argparse's type)."""
    parts = text.split("+")
    if text != "none" and (not set(parts) <= set(PARTS) or len(set(parts)) != len(parts)):
        raise argparse.ArgumentTypeError(f"{text!r}: none, or parts of {', '.join(PARTS)} joined by + (each once)")
    return text


def lab_settings(recovery: str, target: str) -> dict:
    """The Lab's failure handling for ``recovery``."""
    parts = set(recovery.split("+"))
    link_ms = link_interval_for(resolve_target(target)[0])
    if {"failover", "reroute"} <= parts:
        return {"failover": HeartbeatConfig(link_interval_ms=link_ms)}
    if "failover" in parts:
        return {"failover": HeartbeatConfig(link_interval_ms=link_ms), "failover_reroute": False}
    if "reroute" in parts:
        return {"failover": HeartbeatConfig(link_interval_ms=None)}
    return {}


def job_settings(recovery: str, checkpoint_every: int) -> dict:
    """What ``recovery`` asks of the job (`run_workload`'s repath and restarts)."""
    parts = set(recovery.split("+"))
    restart = {"restarts": RESTARTS, "checkpoint_every": checkpoint_every} if "restart" in parts else {}
    return {"repath": "repath" in parts, **restart}


def workload_for(fabric, rate: LinkRate, fit_seconds: float):
    job = Job(preset("tiny"), Parallelism(dp=8))
    mbps = LinkPlan(rate).bits_per_s / 1e6
    real = estimate(generate(job, Scale(1.0, emulated_link_mbps=mbps))).step_s
    return generate(job, fit(real, fit_seconds, emulated_link_mbps=mbps), place(fabric, job.parallelism))


def figures(run: WorkloadRun, recovery: str, seed: int, lab: Lab) -> dict:
    row = {"recovery": recovery, "seed": seed, "ok": run.ok, "errors": run.errors[:3], "failures": run.failures,
           "cpu_busy": round(run.cpu_busy, 3), "resent": run.resent if run.reports else None,
           "restarts": len(run.restarts), "repaths": run.repaths,
           "restart_costs": [{k: r[k] for k in ("resumed_from", "redone", "replaced", "warm_ranks", "lost_s", "launch_s")}
                             for r in run.restarts]}
    handler = lab.failure_handler
    row["reroutes"] = len(handler.reroutes) if handler is not None else 0
    if run.ok:
        lost = [c["lost_s"] for c in run.time_lost.values() if c["lost_s"] is not None]
        spans = iteration_spans(run.reports)
        clean = [c["clean_median_s"] for c in run.time_lost.values() if c["clean_median_s"] is not None]
        row.update(time_lost_s=round(sum(lost), 3), effective_ratio=run.effective_ratio,
                   clean_iteration_s=clean[0] if clean else None,
                   iteration_s=[round(b - a, 3) for a, b in spans],
                   iteration_start_s=[round(a - spans[0][0], 3) for a, _ in spans])
    return row


def run_one(args, recovery: str, seed: int, schedule: list[PlannedFailure]) -> dict:
    fabric = fat_tree(4)
    workload = workload_for(fabric, args.rate, args.fit_seconds)
    report.progress(f"{recovery}, seed {seed}: " + "; ".join(f.describe() for f in schedule))
    try:
        with tempfile.TemporaryDirectory(prefix="aifabric-bench-resilience-") as tmp, \
                Lab(fabric, target=args.target, progress=report.progress, **lab_settings(recovery, args.target)) as lab:
            conditions = FabricConditions(lab, args.rate)
            run = run_workload(lab, workload, args.iterations, Path(tmp) / "plan.json", link=conditions.plan,
                               deadline_s=60 + 10 * args.iterations * args.fit_seconds,
                               failures=FailureSchedule(Failures(lab), schedule),
                               **job_settings(recovery, args.checkpoint_every))
            return figures(run, recovery, seed, lab)
    except Exception as exc:      # noqa: BLE001 - named in the table, the next run goes on
        return {"recovery": recovery, "seed": seed, "ok": False, "bench_error": True,
                "errors": [f"{type(exc).__name__}: {exc}"[:300]]}


def summarise(runs: list[dict], recoveries: list[str]) -> list[dict]:
    rows = []
    for recovery in recoveries:
        sel = [r for r in runs if r["recovery"] == recovery]
        ok = [r for r in sel if r["ok"]]
        row = {"recovery": recovery, "runs": len(sel), "finished": len(ok),
               "errors": [e for r in sel if not r["ok"] for e in r["errors"][:1]]}
        for key in ("clean_iteration_s", "time_lost_s", "effective_ratio", "resent", "reroutes", "restarts",
                    "cpu_busy"):
            known = [r[key] for r in ok if r.get(key) is not None]
            row[key] = statistics.median(known) if known else None
        rows.append(row)
    return rows


def _cell(row: dict, key: str, fmt: str):
    if row[key] is None:
        return Failed(row["errors"][0][:160] if row["errors"] else "no run")
    return format(row[key], fmt)


def render(rows: list[dict], args, seeds: list[int]) -> str:
    body = [(r["recovery"], f"{r['finished']}/{r['runs']}", _cell(r, "clean_iteration_s", ".2f"),
             _cell(r, "time_lost_s", ".2f"),
             _cell(r, "effective_ratio", ".3f"), _cell(r, "resent", ".0f"), _cell(r, "reroutes", ".0f"),
             _cell(r, "restarts", ".0f"), _cell(r, "cpu_busy", ".0%")) for r in rows]
    outage = f"{args.outage:g} s each" if args.outage else "for good"
    links = (f"links between switches failing every {args.mtbf:g} s on average within {args.horizon:g} s, {outage}"
             if args.mtbf else f"no link failing; within {args.horizon:g} s")
    title = (f"tiny DP8 on fat_tree(k=4), {args.iterations} iterations of ~{args.fit_seconds:g} s, links "
             f"{args.rate}; {links}; {args.rank_failures} rank(s) killed, {args.host_failures} host(s) lost "
             f"within it; medians over seeds {seeds}")
    return report.table(["recovery", "jobs finished", "iteration, no outage (s)", "time lost (s)",
                         "effective training time", "packets resent",
                         "reroutes", "restarts", "CPU busy"], body, title=title)


def plot(path: str | Path, runs: list[dict], recoveries: list[str], seed: int) -> None:
    """Seed ``seed``: each recovery's iteration times over the run, the outages shaded."""
    plt = report.pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    shaded = False
    for i, recovery in enumerate(recoveries):
        r = next((x for x in runs if x["recovery"] == recovery and x["seed"] == seed), None)
        if r is None or not r["ok"]:
            ax.plot([], [], color=f"C{i}", label=f"{recovery} (job failed)")
            continue
        ax.step(r["iteration_start_s"], r["iteration_s"], where="post", color=f"C{i}", label=recovery)
        if not shaded:
            downs = {e["failure"]: e["at_s"] for e in r["failures"] if e["what"] == "down" and e["at_s"] is not None}
            ups = {e["failure"]: e["at_s"] for e in r["failures"] if e["what"] == "up" and e["at_s"] is not None}
            for text, at in downs.items():
                ax.axvspan(at, ups.get(text, at + 0.05), color="red", alpha=0.15)
            shaded = True
    ax.set_xlabel("s since the first iteration began (outages shaded, as the first recovery's run placed them)")
    ax.set_ylabel("iteration time (s)")
    ax.set_title(f"Iteration times through seed {seed}'s failures")
    ax.legend(fontsize=8)
    fig.tight_layout()
    report.save_figure(fig, Path(path))


def run_args(args) -> int:
    fabric = fat_tree(4)
    world = Parallelism(dp=8).world
    job_hosts = place(fabric, Parallelism(dp=8)).hosts
    schedules = {seed: random_schedule(fabric, seed, args.mtbf or None, args.horizon, args.outage or None,
                                       ranks=args.rank_failures, world=world,
                                       hosts=args.host_failures, job_hosts=job_hosts)
                 for seed in args.seeds}
    runs = [run_one(args, recovery, seed, schedules[seed]) for seed in args.seeds for recovery in args.recoveries]
    rows = summarise(runs, args.recoveries)
    print(render(rows, args, args.seeds))
    plot(args.png, runs, args.recoveries, args.seeds[0])
    report.write_json(args.json, {"recoveries": args.recoveries, "seeds": args.seeds, "mtbf_s": args.mtbf,
                                  "horizon_s": args.horizon, "outage_s": args.outage, "rate": args.rate,
                                  "iterations": args.iterations, "fit_seconds": args.fit_seconds,
                                  "rank_failures": args.rank_failures, "host_failures": args.host_failures,
                                  "checkpoint_every": args.checkpoint_every,
                                  "schedules": {str(s): [f.text for f in fs] for s, fs in schedules.items()},
                                  "summary": rows, "runs": runs})
    print(f"figures written to {Path(args.json).resolve()}, picture to {Path(args.png).resolve()}")
    broken = [r for r in runs if r.get("bench_error")]     # a job that failed is a result; the bench failing is not
    for r in broken:
        print(f"failed: {r['recovery']}, seed {r['seed']}: {r['errors'][0]}")
    return 1 if broken else 0
