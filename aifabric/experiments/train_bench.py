"""`aifabric bench train` (benchmarks/train.py): one training workload across load-balancing modes,
data-parallel all-reduce by ring or in the switches, and topologies, with the same seeds.

For each topology one fabric is brought up; its links are limited to ``rate`` per direction (bits/s,
switch queues and host token buckets, aifabric.experiments.fabric_conditions), so the
links and not the two CPUs should set the pace; the CPU busy share of every run is reported to
show how far that holds. The workload (a preset, its parallelism, scaled so the analytic
iteration lasts ``fit_seconds`` on those links) is placed on the fabric's hosts and run
``iterations`` times per (seed, mode, collectives); a seed moves the groups' UDP ports, so ECMP
hashes the same traffic onto other paths. ``congestion`` (none, dcqcn, timely or swift) holds for every run; plb
and dcqcn run the hosts' agents and carry the collectives RoCEv2-like, and their runs report the
agents' repaths and CNPs. Seeds are the outer loop, so every combination meets
the machine's drift alike. Per run the step time and exposed communication are the slowest
rank's in the last iteration (the first also opens every group); the table gives the medians
over seeds beside the analytic link-bound estimate, the link load and the CPU share. A run that
fails is a row "failed (why)", never dropped.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from aifabric.experiments.background import background_flows, running
from aifabric.experiments.calibration import calibrate, group_sizes
from aifabric.experiments.fabric_conditions import CONGESTION, LB_MODES, FabricConditions
from aifabric.experiments.bench_entry import run_planned
from aifabric.experiments.train_runner import WorkloadRun, disjoint_ports, qp_ports_for, run_workload, workload_flows
from aifabric.lab import report
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate, rate_arg
from aifabric.lab.lossless import RDMA_PRIORITY, rdma_classes
from aifabric.lab.report import Failed
from aifabric.workloads import Job, Parallelism, Scale, estimate, fit, generate, place, preset
from controller.aggregation import JobManager
from controller.lossless.target import BMV2_PFC
from emulation.p4switch import resolve_target
from hostagent.congestion import SENDER_CONTROLS
from topologies.fabric import Fabric
from topologies.shapes import build

COLLECTIVES = ("ring", "in_network")
CLASSES = ("none", "lossy", "lossless")     # the ranks' packets in class 0, or in the lab's RoCE class without or with PFC
# every shape holds the 8 ranks and a host that runs none (the in-network jobs' fallback aggregator)
TOPOLOGIES: dict[str, tuple[str, dict[str, int]]] = {
    "fattree": ("fat_tree", {"k": 4}),
    "rail": ("rail_optimised", {"servers": 5, "gpus": 2, "spines": 2}),
    "dualplane": ("dual_plane", {"leaves": 4, "spines": 2, "hosts_per_leaf": 3}),
}
KEYS = ("step_s", "exposed_comm_s", "estimate_step_s", "latency_estimate_step_s", "busiest_share",
        "fabric_imbalance", "cpu_busy", "resent")


@dataclass(frozen=True)
class TrainBenchPlan:
    preset: str = "tiny"
    dp: int = 4
    tp: int = 2
    pp: int = 1
    micro_batches: int = 1
    iterations: int = 2
    fit_seconds: float = 2.0
    rate: LinkRate = LinkRate.parse("2M")
    topologies: tuple[str, ...] = tuple(TOPOLOGIES)
    modes: tuple[str, ...] = LB_MODES
    collectives: tuple[str, ...] = COLLECTIVES
    seeds: tuple[int, ...] = (0, 1, 2)
    congestion: str = "none"
    target: str = "softswitch"
    classes: tuple[str, ...] = ("none",)       # the ranks' traffic class: none (class 0), lossy, lossless
    background: float | None = None            # storage-like class-0 traffic beside every run (share of a link)

    @property
    def emulated_mbps(self) -> float:
        return LinkPlan(self.rate).bits_per_s / 1e6

    def job(self) -> Job:
        return Job(preset(self.preset), Parallelism(dp=self.dp, tp=self.tp, pp=self.pp,
                                                    micro_batches=self.micro_batches))

    def scale(self) -> Scale:
        real = estimate(generate(self.job(), Scale(1.0, emulated_link_mbps=self.emulated_mbps))).step_s
        return fit(real, self.fit_seconds, emulated_link_mbps=self.emulated_mbps)


def fabric_of(topology: str) -> Fabric:
    kind, params = TOPOLOGIES[topology]
    return build(kind, **params)


def figures(run: WorkloadRun) -> dict:
    """A run's figures: the slowest rank's last iteration, the estimate, link load, CPU."""
    if not run.ok:
        return {"ok": False, "error": "; ".join(run.errors)[:300]}
    last = run.slowest(len(run.reports[0]["iterations"]) - 1)
    return {"ok": True, "step_s": last["step_s"], "exposed_comm_s": last["exposed_comm_s"],
            "compute_s": last["compute_s"], "estimate_step_s": run.estimate["step_s"],
            "estimate_exposed_s": run.estimate["exposed_comm_s"],
            "latency_estimate_step_s": run.latency_estimate.get("step_s"),
            "busiest_share": run.link_load["busiest_share"], "fabric_imbalance": run.link_load["fabric_imbalance"],
            "busiest": run.link_load["busiest"], "cpu_busy": run.cpu_busy, "in_network": run.in_network,
            "agg_completed": run.agg_ops.get("completed", 0), "resent": run.resent,
            "aggregator_packets": run.server_stats.get("packets_in"),
            "repaths": run.agents.get("repaths"), "cnps": run.agents.get("cnps_sent")}


def run_topology(plan: TrainBenchPlan, topology: str, scale: Scale, runs: list[dict],
                 calibrations: dict[str, dict]) -> None:
    """Every (seed, mode, collectives) on one fabric; a run that raises is recorded as failed with
    its error, and so is every run of a fabric that did not come up. The fabric's calibration (the
    latency-aware estimate's constants) goes into ``calibrations``."""
    combos = [(seed, mode, coll, cls) for seed in plan.seeds for mode in plan.modes for coll in plan.collectives
              for cls in plan.classes]
    done = 0
    try:
        fabric = fabric_of(topology)
        workload = generate(plan.job(), scale, place(fabric, plan.job().parallelism))
        with tempfile.TemporaryDirectory(prefix="aifabric-bench-train-") as tmp, \
                Lab(fabric, target=plan.target, progress=report.progress,
                    lossless=rdma_classes() if set(plan.classes) != {"none"} else None) as lab:
            conditions = FabricConditions(lab, plan.rate)
            calibration = calibrate(lab, conditions.plan, list(workload.placement.hosts),
                                    sizes=group_sizes(workload))
            report.progress(f"{topology}: {calibration.describe()}")
            calibrations[topology] = calibration.to_dict()
            manager = JobManager(lab.controller)
            ranks = list(workload.placement.hosts)
            background = (background_flows([h.name for h in fabric.hosts], ranks, plan.rate, plan.background)
                          if plan.background else None)
            for seed, mode, coll, cls in combos:
                report.progress(f"{topology} seed {seed} {mode} {coll}" + (f" class {cls}" if cls != "none" else ""))
                row = {"topology": topology, "mode": mode, "collectives": coll, "classes": cls, "seed": seed}
                qps = conditions.queue_pairs(mode)
                try:
                    with conditions.load_balancing(mode, workload_flows(workload, seed)), \
                            (running(lab, background) if background else nullcontext()):
                        run = run_workload(lab, workload, plan.iterations, Path(tmp) / "plan.json",
                                           manager=manager if coll == "in_network" else None,
                                           link=conditions.plan, seed=seed, deadline_s=300.0,
                                           host_agent=conditions.host_agent(mode, plan.congestion, seed),
                                           costs=calibration.costs, klass=RDMA_PRIORITY if cls != "none" else None,
                                           pfc=cls == "lossless",
                                           ports=disjoint_ports(lab.controller, workload, seed) if mode == "disjoint" else None,
                                           cc=conditions.transport_cc(plan.congestion),
                                           qps=qps, qp_ports=qp_ports_for(lab.controller, workload, qps, seed)
                                           if qps > 1 else None)
                    row.update(figures(run))
                except Exception as exc:        # noqa: BLE001 - named in the table, the next run goes on
                    row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
                runs.append(row)
                done += 1
    except Exception as exc:                    # noqa: BLE001 - the fabric: every run left is failed by name
        for seed, mode, coll, cls in combos[done:]:
            runs.append({"topology": topology, "mode": mode, "collectives": coll, "classes": cls, "seed": seed,
                         "ok": False,
                         "error": f"fabric: {type(exc).__name__}: {exc}"[:300]})


def summarise(runs: list[dict]) -> list[dict]:
    """Medians over seeds per (topology, mode, collectives, classes); a combination with a failed seed says so."""
    rows = []
    keys = ("topology", "mode", "collectives", "classes")
    for key in dict.fromkeys(tuple(r.get(k, "none") for k in keys) for r in runs):
        sel = [r for r in runs if tuple(r.get(k, "none") for k in keys) == key]
        ok = [r for r in sel if r["ok"]]
        row = dict(zip(keys, key), runs=len(sel), failed=len(sel) - len(ok))
        row["errors"] = [r["error"] for r in sel if not r["ok"]]
        for k in KEYS:
            known = [r[k] for r in ok if r.get(k) is not None]
            row[k] = statistics.median(known) if known else None
        row["agg_completed"] = statistics.median(r["agg_completed"] for r in ok) if ok else None
        rows.append(row)
    return rows


def _cell(row: dict, key: str, fmt: str) -> str | Failed:
    """A median as text, or why there is none (the table notes each reason once)."""
    if row[key] is None:
        return Failed(row["errors"][0][:160] if row["errors"] else "no run")
    return format(row[key], fmt)


def _over(row: dict, estimate_key: str) -> str | Failed:
    """measured step / an estimate of it."""
    if row["step_s"] is None:
        return _cell(row, "step_s", "")
    return f"{row['step_s'] / row[estimate_key]:.2f}" if row.get(estimate_key) else "-"


def render(plan: TrainBenchPlan, scale: Scale, rows: list[dict]) -> str:
    headers = ["topology", "mode", "DP all-reduce", "ranks' class", "runs ok", "step (s)", "exposed comm (s)", "link-bound (s)",
               "measured / link-bound", "latency-aware (s)", "measured / latency-aware", "busiest link",
               "fabric max/mean", "packets resent", "CPU busy"]
    body = [(r["topology"], r["mode"], r["collectives"], r["classes"], f"{r['runs'] - r['failed']}/{r['runs']}",
             _cell(r, "step_s", ".2f"), _cell(r, "exposed_comm_s", ".2f"), _cell(r, "estimate_step_s", ".2f"),
             _over(r, "estimate_step_s"), _cell(r, "latency_estimate_step_s", ".2f"), _over(r, "latency_estimate_step_s"),
             _cell(r, "busiest_share", ".0%"), _cell(r, "fabric_imbalance", ".2f"), _cell(r, "resent", ".0f"),
             _cell(r, "cpu_busy", ".0%"))
            for r in rows]
    job = plan.job()
    title = (f"{plan.preset} DP{plan.dp} x TP{plan.tp} x PP{plan.pp}, {job.parallelism.world} ranks, links "
             f"{plan.rate} per direction, scale 1/{scale.factor:.3g} "
             f"(emulated time x{scale.time_dilation:.3g}); medians over seeds {list(plan.seeds)}, last of "
             f"{plan.iterations} iterations, slowest rank"
             + (f"; storage-like class-0 flows at {plan.background:g} of a link beside every run" if plan.background
                else ""))
    return report.table(headers, body, title=title)


def plot(path: str | Path, rows: list[dict], plan: TrainBenchPlan) -> None:
    plt = report.pyplot()
    fig, axes = plt.subplots(1, len(plan.topologies), figsize=(5 * len(plan.topologies), 4), sharey=True, squeeze=False)
    variants = [(coll, cls) for coll in plan.collectives for cls in plan.classes]
    width = 0.8 / len(variants)
    for ax, topo in zip(axes[0], plan.topologies):
        for c, (coll, cls) in enumerate(variants):
            sel = [next((r for r in rows if (r["topology"], r["mode"], r["collectives"], r["classes"]) ==
                         (topo, m, coll, cls)), None) for m in plan.modes]
            xs = [i + c * width for i in range(len(plan.modes))]
            label = coll + (f", class {cls}" if cls != "none" else "")
            ax.bar(xs, [(r["step_s"] or 0) if r else 0 for r in sel], width, label=f"{label} step")
            ax.bar(xs, [(r["exposed_comm_s"] or 0) if r else 0 for r in sel], width * 0.5, color="black", alpha=0.35,
                   label="exposed comm" if c == 0 else None)
        est = next((r["estimate_step_s"] for r in rows if r["topology"] == topo and r["estimate_step_s"]), None)
        if est:
            ax.axhline(est, color="gray", linestyle="--", linewidth=1, label="estimate (ring)")
        ax.set_xticks([i + width * (len(variants) - 1) / 2 for i in range(len(plan.modes))], plan.modes)
        ax.set_title(topo)
        ax.set_ylabel("seconds (emulated)")
        ax.legend(fontsize=7)
    fig.suptitle("Step time per load-balancing mode, DP all-reduce by ring and in the switches (medians)")
    report.save_figure(fig, path)


def run(plan: TrainBenchPlan, json_path: str, png_path: str) -> int:
    scale = plan.scale()
    runs: list[dict] = []
    calibrations: dict[str, dict] = {}
    for topology in plan.topologies:
        run_topology(plan, topology, scale, runs, calibrations)
    rows = summarise(runs)
    print(render(plan, scale, rows))
    report.write_json(json_path, {"plan": asdict(plan), "scale": scale.to_dict(), "rows": rows, "runs": runs,
                                  "calibrations": calibrations})
    plot(png_path, rows, plan)
    print(f"figures written to {Path(json_path).resolve()}, plot to {Path(png_path).resolve()}")
    return 0 if all(r["ok"] for r in runs) else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = TrainBenchPlan()
    p.add_argument("--preset", default=d.preset, help="the model (aifabric workload show's presets; default %(default)s)")
    for name, what in (("dp", "data-parallel ranks"), ("tp", "tensor-parallel ranks"), ("pp", "pipeline stages"),
                       ("micro_batches", "micro-batches an iteration"), ("iterations", "iterations a run")):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name),
                       help=f"{what} (default %(default)s)")
    p.add_argument("--rate", type=rate_arg, default=d.rate,
                   help="every link's rate per direction: Mbit/s, or with a unit (2.5M, 500k, 100pps); default %(default)s")
    p.add_argument("--fit-seconds", type=float, default=d.fit_seconds,
                   help="the analytic iteration's length on the links: picks the scale (default %(default)s)")
    p.add_argument("--topologies", nargs="+", choices=tuple(TOPOLOGIES), default=list(d.topologies), metavar="TOPO",
                   help=f"fabrics to run on (default all: {', '.join(TOPOLOGIES)})")
    p.add_argument("--modes", nargs="+", choices=LB_MODES, default=list(d.modes), metavar="MODE",
                   help=f"load-balancing modes (default all: {', '.join(LB_MODES)})")
    p.add_argument("--collectives", nargs="+", choices=COLLECTIVES, default=list(d.collectives), metavar="HOW",
                   help="the DP all-reduces by ring and/or in the switches (default both)")
    p.add_argument("--congestion", choices=CONGESTION, default=d.congestion,
                   help="congestion feedback in every run: dcqcn (the hosts' agents), timely or swift (the ranks' "
                        "transport), or none")
    p.add_argument("--seeds", nargs="+", type=int, default=list(d.seeds),
                   help="seeds (each moves the groups' UDP ports, so ECMP hashes them anew); medians over them")
    p.add_argument("--classes", nargs="+", choices=CLASSES, default=list(d.classes), metavar="CLASS",
                   help="the ranks' traffic class: none (class 0), lossy or lossless (the lab's RoCE class without "
                        "or with PFC; softswitch; not with plb or dcqcn); default none")
    p.add_argument("--background", type=float, metavar="SHARE",
                   help="storage-like class-0 flows beside every run, from each host that runs no rank to a rank's "
                        "host, at SHARE (0-1] of a link")
    p.add_argument("--json", default="out/bench_train.json", help="the figures as JSON (default %(default)s)")
    p.add_argument("--png", default="out/bench_train.png", help="step times per mode (default %(default)s)")


def plan_of(a: argparse.Namespace) -> TrainBenchPlan:
    """The bench's plan from its options, checked before any fabric comes up (the job fits every
    topology, the scale can be found); WorkloadError or ValueError naming what does not fit."""
    plan = TrainBenchPlan(preset=a.preset, dp=a.dp, tp=a.tp, pp=a.pp, micro_batches=a.micro_batches,
                          iterations=a.iterations, fit_seconds=a.fit_seconds, rate=a.rate,
                          topologies=tuple(a.topologies), modes=tuple(a.modes), collectives=tuple(a.collectives),
                          seeds=tuple(a.seeds), congestion=a.congestion, target=getattr(a, "target", "softswitch"),
                          classes=tuple(a.classes), background=a.background)
    plan.scale()
    own_flows = "the ranks' own source ports are not offered with the host agents' RoCEv2 framing (--congestion dcqcn)"
    for mode, clashes, why in (
            ("plb", plan.congestion in SENDER_CONTROLS, "the host agents' RoCEv2 framing is not offered with the "
             f"ranks' own congestion control (--congestion {plan.congestion})"),
            ("qp-scaling", plan.congestion == "dcqcn", own_flows),
            ("disjoint", plan.congestion == "dcqcn", own_flows)):
        if mode in plan.modes and clashes:
            print(f"skipping mode {mode}: {why}")
            plan = replace(plan, modes=tuple(m for m in plan.modes if m != mode))
            if not plan.modes:
                raise ValueError(f"--modes {mode} --congestion {plan.congestion}: no mode left to run")
    if set(plan.classes) != {"none"}:
        if resolve_target(plan.target)[0] != "softswitch":
            raise ValueError(f"--classes {' '.join(plan.classes)}: {BMV2_PFC}")
        if plan.congestion == "dcqcn" or "plb" in plan.modes:
            raise ValueError("--classes: the ranks' traffic class is not offered with the host agents' RoCEv2 framing "
                             "(plb, --congestion dcqcn)")
    for topology in plan.topologies:
        fabric = fabric_of(topology)
        placement = place(fabric, plan.job().parallelism)
        if plan.background is not None:
            background_flows([h.name for h in fabric.hosts], list(placement.hosts), plan.rate, plan.background)
    return plan


def run_args(a: argparse.Namespace) -> int:
    return run_planned(plan_of, run, a)
