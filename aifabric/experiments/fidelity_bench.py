"""`aifabric bench fidelity` (benchmarks/fidelity.py): does the lab measure the network, or itself?

An emulator earns trust by agreeing with physics where physics is known and by saying by how much
where it does not. Three checks, on one k=4 fat-tree whose links are limited in bits:

(a) Rate invariance. The same training workloads at two link rates four times apart, each scaled
    (`aifabric.workloads.fit`) so its link-bound iteration lasts ``fit_seconds`` on those links:
    both runs then stand for the same real iteration under the same time dilation D, and every
    figure divided by D must agree: the normalised step time of each design, and the ratios
    between designs (DP all-reduce in the switches / by ring, spraying / ECMP). Goal: within 10%.
(b) Against the latency-aware estimate (aifabric.workloads.latency, its constants calibrated on
    this fabric at each rate): measured / estimated step time, and per collective kind. Goals:
    within 10% for the data-parallel workload, 20% for DP x TP x PP.
(c) Published comparisons reproduced side by side:
    * SwitchML's microbenchmark: all-reduce in the switches over the ring (NCCL's, there) as the
      workers grow, beside the published ratios (`SWITCHML_WORKERS`, read off p4app-switchML's
      benchmark chart) and what the bytes on a host link allow, 2(n-1)/n;
    * SwitchML's trend: training gains from aggregation in the switches as communication weighs
      more. The data-parallel workload runs at several ratios r of communication to computation
      (the GPUs' sustained TFLOP/s set so the ring's link-bound communication is r times the
      computation), by ring and in the switches, beside the latency-aware model's prediction of
      the same speedup and the paper's stated range (`SWITCHML_RANGE`; its per-model figures
      could not be read from any source this lab reaches, said so in the table).
    * nccl-tests' bus bandwidth: each operation's busbw (algbw x its factor) is the same link's
      share whatever the operation, so busbw / link bound must agree across operations at a size
      where bandwidth decides.

Every run's CPU share is kept, so a figure taken while the machine, not the links, was the
bottleneck can be told. Seeds are the inner loop, medians over them; a failed run is named.
"""
from __future__ import annotations

import statistics
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from aifabric.experiments.allreduce_lab import spread_workers
from aifabric.experiments.calibration import Calibration, calibrate, group_sizes
from aifabric.experiments.collectives_bench import BUS_FACTOR, link_bound_Bps, measure
from aifabric.experiments.fabric_conditions import FabricConditions
from aifabric.experiments.bench_entry import run_planned
from aifabric.experiments.train_runner import run_workload, workload_flows
from aifabric.lab import report
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkRate
from aifabric.lab.report import Failed
from aifabric.workloads import Job, Parallelism, Scale, Workload, estimate, fit, generate, place, preset
from aifabric.workloads.latency import fabric_hops
from controller.aggregation import JobManager
from topologies.fabric import fat_tree

GOAL_INVARIANCE = 0.10
GOAL_DP = 0.10
GOAL_HYBRID = 0.20
WORKLOADS = {"DP8": Parallelism(dp=8), "DP2xTP2xPP2": Parallelism(dp=2, tp=2, pp=2, micro_batches=2)}
DESIGNS = {"ring/ecmp": ("ring", "ecmp"), "in_network/ecmp": ("in_network", "ecmp"), "ring/spray": ("ring", "spray")}
RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)        # communication / computation of the SwitchML sweep
BUSBW_BYTES = 256 << 10                    # the nccl-tests check's size: bandwidth decides there
MICRO_BYTES = 512 << 10                    # the all-reduce microbenchmark's tensor
MICRO_WORKERS = (4, 8)
SWITCHML_WORKERS = {4: 2.05, 8: 2.26, 16: 2.9}
"""SwitchML RDMA over NCCL-RDMA, aggregated elements a second, by workers: p4app-switchML's
docs/img/benchmark.png (its README: "more than 2x speedup over NCCL when using RDMA"), bar heights
read off the chart (about +-2%)."""
SWITCHML_RANGE = "SwitchML (NSDI'21): training sped up 'by up to 5.5x' (abstract); the 2019 report: 'at least by 20%'"


@dataclass(frozen=True)
class FidelityPlan:
    rates: tuple[LinkRate, LinkRate] = (LinkRate.parse("1M"), LinkRate.parse("4M"))
    seeds: tuple[int, ...] = (1, 2, 3)
    fit_seconds: float = 2.0
    iterations: int = 2
    preset: str = "tiny"
    ratios: tuple[float, ...] = RATIOS
    parts: tuple[str, ...] = ("invariance", "switchml", "busbw")
    target: str = "softswitch"


@dataclass
class Run:
    workload: str
    design: str
    rate: str
    seed: int
    dilation: float
    ok: bool
    step_s: float | None = None
    estimate_s: float | None = None          # link-bound
    latency_estimate_s: float | None = None
    kinds: dict = field(default_factory=dict)   # kind -> (measured, link-bound, latency-aware estimate)
    cpu_busy: float = 0.0
    resent: int | None = None                # packets the ranks sent again (a retransmission timeout each)
    error: str = ""
    ratio: float | None = None               # the SwitchML sweep's communication / computation

    def to_dict(self) -> dict:
        return dict(vars(self))


def job_of(plan: FidelityPlan, parallelism: Parallelism, tflops: float | None = None) -> Job:
    return Job(preset(plan.preset), parallelism, *(() if tflops is None else (tflops,)))


def fitted(job: Job, fabric, rate: LinkRate, fit_seconds: float) -> Workload:
    """``job`` scaled so its link-bound iteration lasts ``fit_seconds`` on links of ``rate``."""
    from aifabric.lab.links import LinkPlan
    mbps = LinkPlan(rate).bits_per_s / 1e6
    real = estimate(generate(job, Scale(1.0, emulated_link_mbps=mbps))).step_s
    return generate(job, fit(real, fit_seconds, emulated_link_mbps=mbps), place(fabric, job.parallelism))


def one_run(lab: Lab, conditions: FabricConditions, manager: JobManager, workload: Workload, calibration: Calibration,
            name: str, design: str, seed: int, plan: FidelityPlan, tmp: Path) -> Run:
    collectives, mode = DESIGNS[design]
    run = Run(name, design, str(conditions.plan.rate), seed, workload.scale.time_dilation, ok=False)
    try:
        with conditions.load_balancing(mode, workload_flows(workload, seed)):
            r = run_workload(lab, workload, plan.iterations, tmp / "plan.json", seed=seed, deadline_s=300.0,
                             manager=manager if collectives == "in_network" else None, link=conditions.plan,
                             costs=calibration.costs)
    except Exception as exc:        # noqa: BLE001 - named in the table, the next run goes on
        run.error = f"{type(exc).__name__}: {exc}"[:300]
        return run
    run.cpu_busy, run.resent = r.cpu_busy, r.resent
    if not r.ok:
        run.error = "; ".join(r.errors)[:300]
        return run
    last = r.slowest(plan.iterations - 1)
    run.ok, run.step_s = True, last["step_s"]
    run.estimate_s, run.latency_estimate_s = r.estimate["step_s"], r.latency_estimate.get("step_s")
    number = lambda v: v if isinstance(v, float) else None      # noqa: E731 ("-": no estimate of that kind)
    run.kinds = {k: (m, number(b), number(a)) for k, m, b, _, a, _ in r.kind_rows()}
    return run


def invariance_runs(lab: Lab, conditions: FabricConditions, manager: JobManager, plan: FidelityPlan,
                    calibrations: dict[str, Calibration], runs: list[Run], tmp: Path) -> None:
    for rate in plan.rates:
        conditions.limit(rate)
        workloads = {name: fitted(job_of(plan, par), lab.fabric, rate, plan.fit_seconds)
                     for name, par in WORKLOADS.items()}
        for name, workload in workloads.items():
            calibrations[str(rate)] = calibrations.get(str(rate)) or calibrate(
                lab, conditions.plan, list(workload.placement.hosts),
                sizes=set().union(*map(group_sizes, workloads.values())))
            report.progress(f"{rate}: {calibrations[str(rate)].describe()}")
            for design in DESIGNS:
                for seed in plan.seeds:
                    report.progress(f"(a) {name} at {rate}: {design}, seed {seed}")
                    runs.append(one_run(lab, conditions, manager, workload, calibrations[str(rate)], name, design,
                                        seed, plan, tmp))


def switchml_runs(lab: Lab, conditions: FabricConditions, manager: JobManager, plan: FidelityPlan,
                  calibrations: dict[str, Calibration], runs: list[Run], predicted: dict[float, float],
                  tmp: Path) -> None:
    """The data-parallel workload at several communication / computation ratios, ring and in-network;
    ``predicted``: the latency-aware model's speedup at each ratio."""
    rate = plan.rates[-1]
    conditions.limit(rate)
    base = job_of(plan, WORKLOADS["DP8"])
    for ratio in plan.ratios:
        workload = fitted(with_ratio(base, ratio), lab.fabric, rate, plan.fit_seconds)
        calibration = calibrations.get(str(rate)) or calibrate(lab, conditions.plan, list(workload.placement.hosts))
        calibrations[str(rate)] = calibration
        hops = fabric_hops(lab.fabric, workload.placement)
        ring, inn = (estimate(workload, emulated=True, in_network=i, costs=calibration.costs, hops=hops).step_s
                     for i in (False, True))
        predicted[ratio] = ring / inn
        for design in ("ring/ecmp", "in_network/ecmp"):
            for seed in plan.seeds:
                report.progress(f"(c) ratio {ratio:g}: {design}, seed {seed}")
                run = one_run(lab, conditions, manager, workload, calibration, "DP8", design, seed, plan, tmp)
                run.ratio = ratio
                runs.append(run)


def micro_points(lab: Lab, conditions: FabricConditions, manager: JobManager, plan: FidelityPlan) -> list[dict]:
    """SwitchML's microbenchmark: one all-reduce of `MICRO_BYTES` in the switches and by ring, by workers."""
    conditions.limit(plan.rates[-1])
    points = []
    for n in MICRO_WORKERS:
        hosts, server = spread_workers(lab.fabric, n)
        report.progress(f"(c) all_reduce of {MICRO_BYTES} bytes among {n}: ring and in the switches")
        sweep = measure(lab, hosts, ["all_reduce"], [MICRO_BYTES], plan=conditions.plan, repeat=3, auto=False,
                        manager=manager, server=server)
        by_algo = {p.algo: p for p in sweep.points}
        ring, inn = by_algo.get("ring"), by_algo.get("in_network")
        ok = bool(ring and inn and ring.ok and inn.ok)
        points.append({"workers": n, "ok": ok, "ring_s": ring.time_s if ring else None,
                       "in_network_s": inn.time_s if inn else None,
                       "speedup": ring.time_s / inn.time_s if ok else None, "bytes_bound": 2 * (n - 1) / n,
                       "published": SWITCHML_WORKERS.get(n), "cpu_busy": sweep.cpu_busy,
                       "error": "; ".join(sweep.errors)[:300]})
    return points


def comm_and_compute(job: Job) -> tuple[float, float]:
    """A data-parallel job's link-bound communication (the ring's) and computation, real seconds."""
    w = generate(job, Scale(1.0))
    est = estimate(w).ranks[0]
    return sum(est.comm_s_by_kind.values()), est.compute_s


def with_ratio(job: Job, ratio: float) -> Job:
    """``job`` with its GPUs' speed set so the ring's communication is ``ratio`` times its computation."""
    comm, compute = comm_and_compute(job)     # compute lasts 1 / TFLOP/s: ratio x compute' = comm
    return replace(job, sustained_tflops=job.sustained_tflops * ratio * compute / comm)


def busbw_points(lab: Lab, conditions: FabricConditions, plan: FidelityPlan) -> list[dict]:
    """Every operation by ring (all_to_all pairwise) at `BUSBW_BYTES`: busbw over the link bound."""
    rate = plan.rates[-1]
    conditions.limit(rate)
    hosts, _ = spread_workers(lab.fabric, 8)
    sweep = measure(lab, hosts, list(BUS_FACTOR), [BUSBW_BYTES], plan=conditions.plan, repeat=3, auto=False)
    bound = link_bound_Bps(conditions.plan)
    points = []
    for p in sweep.points:
        if p.algo not in ("ring", "pairwise"):
            continue
        points.append({"op": p.op, "algo": p.algo, "size": p.size, "ok": p.ok, "time_s": p.time_s,
                       "busbw_Bps": p.busbw, "factor": BUS_FACTOR[p.op](8),
                       "fraction_of_bound": p.busbw / bound if p.busbw else None, "error": p.error})
    for e in sweep.errors:
        points.append({"op": "?", "ok": False, "error": e})
    return points


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def medians(runs: list[Run]) -> dict[tuple, dict]:
    """Per (workload, design, rate, ratio): medians over seeds of the step and its normalised value."""
    out: dict[tuple, dict] = {}
    for key in dict.fromkeys((r.workload, r.design, r.rate, r.ratio) for r in runs):
        sel = [r for r in runs if (r.workload, r.design, r.rate, r.ratio) == key]
        ok = [r for r in sel if r.ok]
        out[key] = {"runs": len(sel), "failed": [r.error for r in sel if not r.ok],
                    "step_s": median([r.step_s for r in ok]),
                    "normalised_ms": median([1e3 * r.step_s / r.dilation for r in ok]),
                    "estimate_s": median([r.estimate_s for r in ok]),
                    "latency_estimate_s": median([r.latency_estimate_s for r in ok if r.latency_estimate_s]),
                    "cpu_busy": median([r.cpu_busy for r in sel]),
                    "resent": median([r.resent for r in ok if r.resent is not None]),
                    "kinds": _kind_medians(ok)}
    return out


def _kind_medians(runs: list[Run]) -> dict[str, tuple[float | None, ...]]:
    """Per collective kind: medians of (measured, link-bound, latency-aware) over the runs."""
    kinds = {k for r in runs for k in r.kinds}
    return {k: tuple(median([r.kinds[k][i] for r in runs if k in r.kinds and r.kinds[k][i] is not None])
                     for i in range(3)) for k in sorted(kinds)}


def spread(a: float | None, b: float | None) -> float | Failed:
    """|a - b| over their mean."""
    if a is None or b is None:
        return Failed("not measured at both rates")
    return abs(a - b) / ((a + b) / 2)


def invariance_rows(plan: FidelityPlan, m: dict[tuple, dict]) -> list[tuple]:
    r1, r2 = (str(r) for r in plan.rates)
    rows = []
    for name in WORKLOADS:
        for design in DESIGNS:
            a, b = m.get((name, design, r1, None), {}), m.get((name, design, r2, None), {})
            rows.append((name, f"{design} step / D (real ms)", a.get("normalised_ms"), b.get("normalised_ms"),
                         spread(a.get("normalised_ms"), b.get("normalised_ms"))))
        for label, top, bottom in (("in-network / ring", "in_network/ecmp", "ring/ecmp"),
                                   ("spray / ecmp", "ring/spray", "ring/ecmp")):
            ratios = [_ratio(m.get((name, top, r, None)), m.get((name, bottom, r, None))) for r in (r1, r2)]
            rows.append((name, label, *ratios, spread(*ratios)))
    return rows


def _ratio(top: dict | None, bottom: dict | None) -> float | None:
    if not top or not bottom or not top.get("step_s") or not bottom.get("step_s"):
        return None
    return top["step_s"] / bottom["step_s"]


def estimate_rows(plan: FidelityPlan, m: dict[tuple, dict]) -> list[tuple]:
    rows = []
    for (name, design, rate, ratio), v in m.items():
        if ratio is not None or not v["step_s"]:
            continue
        goal = GOAL_DP if name == "DP8" else GOAL_HYBRID
        aware = v["latency_estimate_s"]
        resent = "-" if v["resent"] is None else f"{v['resent']:.0f}"
        rows.append((name, design, rate, "step", v["step_s"], v["estimate_s"], aware,
                     v["step_s"] / aware if aware else None, resent, f"{goal:.0%}"))
        for kind, (measured, bound, est) in v["kinds"].items():
            rows.append((name, design, rate, kind, measured, bound or "-", est or "-", measured / est if est else "-",
                         "", ""))
    return rows


def switchml_rows(m: dict[tuple, dict], predicted: dict[float, float]) -> list[tuple]:
    rows = []
    for ratio in sorted({k[3] for k in m if k[3] is not None}):
        rate = _rate_of(m, ratio)
        ring, inn = m.get(("DP8", "ring/ecmp", rate, ratio)), m.get(("DP8", "in_network/ecmp", rate, ratio))
        rows.append((ratio, _ratio(ring, inn) or Failed("a run failed"), predicted.get(ratio, "-"),
                     (ring or {}).get("step_s"), (inn or {}).get("step_s")))
    return rows


def micro_rows(points: list[dict]) -> list[tuple]:
    return [(p["workers"], p["speedup"] if p["ok"] else Failed(p["error"][:60] or "a run failed"), p["bytes_bound"],
             p["published"] or "-") for p in points] + \
           [(n, "-", 2 * (n - 1) / n, v) for n, v in SWITCHML_WORKERS.items() if n not in {p["workers"] for p in points}]


def _rate_of(m: dict[tuple, dict], ratio: float) -> str:
    return next(k[2] for k in m if k[3] == ratio)


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)
    calibrations: dict[str, Calibration] = field(default_factory=dict)
    predicted: dict[float, float] = field(default_factory=dict)     # the SwitchML sweep's model speedups
    micro: list[dict] = field(default_factory=list)
    busbw: list[dict] = field(default_factory=list)

    def failed(self) -> list[str]:
        return ([f"{r.workload} {r.design} {r.rate} seed {r.seed}: {r.error}" for r in self.runs if not r.ok]
                + [f"all_reduce among {p['workers']}: {p['error']}" for p in self.micro if not p["ok"]]
                + [f"{p['op']}: {p['error']}" for p in self.busbw if not p["ok"]])


def run(plan: FidelityPlan, json_path: str, png_path: str) -> int:
    res = Results()
    with tempfile.TemporaryDirectory(prefix="aifabric-fidelity-") as tmp, \
            Lab(fat_tree(4), target=plan.target, progress=report.progress) as lab:
        conditions = FabricConditions(lab, plan.rates[0])
        manager = JobManager(lab.controller)
        if "invariance" in plan.parts:
            invariance_runs(lab, conditions, manager, plan, res.calibrations, res.runs, Path(tmp))
        if "switchml" in plan.parts:
            res.micro = micro_points(lab, conditions, manager, plan)
            switchml_runs(lab, conditions, manager, plan, res.calibrations, res.runs, res.predicted, Path(tmp))
        if "busbw" in plan.parts:
            res.busbw = busbw_points(lab, conditions, plan)
    m = medians(res.runs)
    print(render(plan, m, res))
    report.write_json(json_path, {"plan": asdict(plan), "runs": [r.to_dict() for r in res.runs],
                                  "medians": [{"workload": k[0], "design": k[1], "rate": k[2], "ratio": k[3], **v}
                                              for k, v in m.items()],
                                  "calibrations": {k: c.to_dict() for k, c in res.calibrations.items()},
                                  "switchml": {"micro": res.micro, "predicted": res.predicted,
                                               "published_workers": SWITCHML_WORKERS, "published_range": SWITCHML_RANGE},
                                  "busbw": res.busbw, "failed": res.failed()})
    draw(png_path, plan, m, res)
    print(f"\nJSON: {Path(json_path).resolve()}\npicture: {Path(png_path).resolve()}")
    for line in res.failed():
        print(f"failed: {line}")
    return 1 if res.failed() else 0


def render(plan: FidelityPlan, m: dict[tuple, dict], res: Results) -> str:
    r1, r2 = (str(r) for r in plan.rates)
    out = [f"calibration at {rate}: {c.describe()}" for rate, c in res.calibrations.items()]
    if any(k[3] is None for k in m):
        out.append(report.table(["workload", "figure", r1, r2, "spread"], invariance_rows(plan, m),
                                title=f"\n(a) Rate invariance: the same real iteration at {r1} and {r2} "
                                      f"(goal: spread within {GOAL_INVARIANCE:.0%})"))
        out.append(report.table(["workload", "design", "rate", "what", "measured (s)", "link-bound (s)",
                                 "latency-aware (s)", "measured / latency-aware", "packets resent", "goal"],
                                estimate_rows(plan, m),
                                title="\n(b) Measured against the estimates (medians over seeds; per kind: the rank "
                                      "that spent the most)"))
    if res.micro:
        out.append(report.table(["workers", "lab: in-network / ring", "bytes on a host link: 2(n-1)/n",
                                 "SwitchML / NCCL (published)"], micro_rows(res.micro),
                                title=f"\n(c) SwitchML's microbenchmark: all-reduce of {MICRO_BYTES >> 10} KiB in the "
                                      f"switches over the ring at {r2}, beside p4app-switchML's chart"))
    if any(k[3] is not None for k in m):
        out.append(report.table(["comm / compute", "lab: in-network speedup", "model's speedup", "ring step (s)",
                                 "in-network step (s)"], switchml_rows(m, res.predicted),
                                title="\n(c) In-network aggregation's training speedup against the ratio of "
                                      f"communication to computation (DP8 at {r2}); {SWITCHML_RANGE}; the paper's "
                                      "per-model figures could not be read from any source this lab reaches"))
    if res.busbw:
        out.append(report.table(["operation", "algorithm", "size (B)", "busbw (kB/s)", "nccl-tests factor",
                                 "busbw / link bound"],
                                [(p["op"], p.get("algo", "-"), p.get("size", "-"),
                                  p["busbw_Bps"] / 1e3 if p.get("busbw_Bps") else Failed(p.get("error", "?")[:60]),
                                  p.get("factor", "-"), p.get("fraction_of_bound") or "-") for p in res.busbw],
                                title="\n(c) nccl-tests' bus bandwidth: the same share of the link whatever the "
                                      "operation"))
    cpu = [v["cpu_busy"] for v in m.values() if v["cpu_busy"] is not None] + [p["cpu_busy"] for p in res.micro]
    if cpu:
        out.append(f"\nCPU busy during the runs: {min(cpu):.0%}-{max(cpu):.0%} of the machine (medians per point)")
    return "\n".join(out)


def draw(path: str | Path, plan: FidelityPlan, m: dict[tuple, dict], res: Results) -> None:
    plt = report.pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    a, b, c, d = axes
    r1, r2 = (str(r) for r in plan.rates)
    labels, left, right = [], [], []
    for name in WORKLOADS:
        for design in DESIGNS:
            labels.append(f"{name}\n{design}")
            left.append((m.get((name, design, r1, None)) or {}).get("normalised_ms") or 0)
            right.append((m.get((name, design, r2, None)) or {}).get("normalised_ms") or 0)
    x = range(len(labels))
    a.bar([i - 0.2 for i in x], left, 0.4, label=r1)
    a.bar([i + 0.2 for i in x], right, 0.4, label=r2)
    a.set_xticks(list(x), labels, fontsize=6)
    a.set_ylabel("step / time dilation (real ms)")
    a.set_title("(a) the same real iteration at two rates")
    a.legend(fontsize=7)
    rows = [r for r in estimate_rows(plan, m) if isinstance(r[6], float)]
    b.scatter([r[6] for r in rows], [r[4] for r in rows], s=12)
    top = max([r[4] for r in rows] + [r[6] for r in rows] + [1e-3])
    b.plot([0, top], [0, top], color="grey", linestyle="--", linewidth=1, label="measured = estimate")
    b.plot([0, top], [0, 1.1 * top], color="grey", linestyle=":", linewidth=1, label="+10%")
    b.set_xlabel("latency-aware estimate (s)")
    b.set_ylabel("measured (s)")
    b.set_title("(b) steps and collective kinds")
    b.legend(fontsize=7)
    ns = sorted(set(SWITCHML_WORKERS) | {p["workers"] for p in res.micro})
    c.plot(ns, [2 * (n - 1) / n for n in ns], color="grey", linestyle="--", label="2(n-1)/n")
    c.plot(list(SWITCHML_WORKERS), list(SWITCHML_WORKERS.values()), marker="x", color="black", label="SwitchML / NCCL")
    lab_pts = [(p["workers"], p["speedup"]) for p in res.micro if p["ok"]]
    if lab_pts:
        c.plot(*zip(*lab_pts), marker="o", label="lab")
    c.set_xlabel("workers")
    c.set_ylabel("in-network / ring")
    c.set_title("(c) all-reduce microbenchmark")
    c.legend(fontsize=7)         # the physics and the published lines are always there
    rows = switchml_rows(m, res.predicted)
    measured = [(r[0], r[1]) for r in rows if isinstance(r[1], float)]
    if measured:
        d.plot(*zip(*measured), marker="o", label="lab")
    if res.predicted:
        d.plot(sorted(res.predicted), [res.predicted[k] for k in sorted(res.predicted)], linestyle="--",
               label="latency-aware model")
    d.axhline(1.0, color="grey", linewidth=1)
    d.set_xscale("log")
    d.set_xticks(list(plan.ratios), [f"{r:g}" for r in plan.ratios])    # the ratios run, not log decades
    d.minorticks_off()
    d.set_xlabel("communication / computation")
    d.set_ylabel("training speedup, in-network over ring")
    d.set_title("(d) SwitchML's trend")
    if measured or res.predicted:
        d.legend(fontsize=7)
    report.save_figure(fig, path)


def add_arguments(p) -> None:
    from aifabric.lab.links import rate_arg

    d = FidelityPlan()
    p.add_argument("--rates", nargs=2, type=rate_arg, default=list(d.rates), metavar="RATE",
                   help="the two link rates, four times apart by default (Mbit/s or with a unit); default "
                        f"{d.rates[0]} {d.rates[1]}")
    p.add_argument("--seeds", nargs="+", type=int, default=list(d.seeds), help="seeds; medians over them")
    p.add_argument("--fit-seconds", type=float, default=d.fit_seconds,
                   help="each workload's link-bound iteration on the links (both rates the same real iteration)")
    p.add_argument("--iterations", type=int, default=d.iterations, help="iterations a run; the last one counts")
    p.add_argument("--ratios", nargs="+", type=float, default=list(d.ratios),
                   help="communication / computation ratios of the SwitchML comparison")
    p.add_argument("--parts", nargs="+", choices=d.parts, default=list(d.parts),
                   help="which checks: invariance (a, b), switchml and busbw (c); default all")
    p.add_argument("--json", default="out/fidelity.json", help="the figures as JSON (default %(default)s)")
    p.add_argument("--png", default="out/fidelity.png", help="the four panels (default %(default)s)")


def plan_of(a) -> FidelityPlan:
    """The bench's plan from its options, its workloads fitted to both rates before any fabric comes up."""
    plan = FidelityPlan(rates=tuple(a.rates), seeds=tuple(a.seeds), fit_seconds=a.fit_seconds,
                        iterations=a.iterations, ratios=tuple(a.ratios), parts=tuple(a.parts),
                        target=getattr(a, "target", "softswitch"))
    for rate in plan.rates:
        for par in WORKLOADS.values():
            fitted(job_of(plan, par), fat_tree(4), rate, plan.fit_seconds)
    for ratio in plan.ratios:
        if not ratio > 0:
            raise ValueError(f"--ratios {ratio}: a ratio of communication to computation is positive")
    return plan


def run_args(a) -> int:
    return run_planned(plan_of, run, a)
