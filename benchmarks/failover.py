#!/usr/bin/env python3
"""Failover on one k=4 fat-tree: probes lost and time to recover when a core link or an
aggregation switch fails, with heartbeats (data-plane failover, then reroute), data-plane
failover alone, controller reroute alone, and an in-network AllReduce running across the failure.

Links limited in the switches (and the hosts' uplinks) to ``--rate`` (Mbit/s), a steady probe
stream (1000/s) and a long UDP flow across the failed element, several runs, medians. Prints a
table, writes JSON and a timeline picture (probe arrivals around the failure, with the failure,
detection, data-plane and reroute marks). See aifabric/experiments/failover_bench.py for the figures'
meaning.

    .venv/bin/python -m benchmarks.failover [--scenarios none heartbeat dataplane dataplane-controller oracle agg-kill
        agg-kill-oracle allreduce allreduce-oracle]
        [--runs 3] [--rate 10] [--target softswitch|bmv2] [--link-heartbeat-ms MS] [--json out/failover.json]
        [--png out/failover.png]

Goals (issue): data-plane failover under 50 ms at the default heartbeat settings; controller
reroute on k=4 under 500 ms; zero wrong AllReduce results.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


from aifabric.lab import report  # noqa: E402
from aifabric.experiments.failover_bench import SCENARIOS, Bench, FailoverPlan, FailoverRun, failed_at, summarise  # noqa: E402
from aifabric.lab.lab import Lab  # noqa: E402
from aifabric.lab.links import rate_arg  # noqa: E402
from controller.failover import HeartbeatConfig  # noqa: E402
from controller.failover.config import link_interval_for  # noqa: E402
from topologies.fabric import fat_tree  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=rate_arg, default=FailoverPlan.rate,
                    help="link rate per direction: Mbit/s, or with a unit (2.5M, 500k, 2000pps); default %(default)s")
    ap.add_argument("--probe-rate", type=int, default=FailoverPlan.probe_pps, help="probes per second")
    ap.add_argument("--down", type=float, default=FailoverPlan.down_s, help="seconds the element stays failed")
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--link-heartbeat-ms", type=float,
                    help="link heartbeat interval (default: 10 on softswitch, 50 on BMv2; see controller.failover.config)")
    ap.add_argument("--json", default="out/failover.json")
    ap.add_argument("--png", default="out/failover.png")
    args = ap.parse_args(argv)

    plan = FailoverPlan(rate=args.rate, probe_pps=args.probe_rate, down_s=args.down)
    link_ms = args.link_heartbeat_ms or link_interval_for(args.target)
    beats = HeartbeatConfig(link_interval_ms=link_ms)    # what the heartbeat scenarios run with
    runs: list[FailoverRun] = []
    with tempfile.TemporaryDirectory(prefix="aifabric-failover-") as tmp, \
            Lab(fat_tree(4), target=args.target, progress=report.progress,
                link_heartbeat_ms=beats.link_interval_ms) as lab:
        bench = Bench(lab, plan, report.progress, Path(tmp), beats)
        for scenario in args.scenarios:
            for n in range(1, args.runs + 1):
                run = bench.run(scenario, n)
                report.progress(f"{scenario} run {n}: {run.element} outage {run.outage_ms} ms, "
                                f"{run.probes_lost} probes lost ({run.recovered_by})")
                runs.append(run)
    rows = summarise(runs)
    print(report.table(
        ["scenario", "runs", "outage (ms)", "loss-derived (ms)", "path back (ms)", "latency (ms)", "recovered by",
         "probes lost", "flow lost", "detected (ms)", "dp written (ms)", "reroute done (ms)", "repair took (ms)",
         "moved while healthy", "false dead ports", "stretched (ms)", "link timeout (ms)", "CPU busy", "AllReduce"],
        [(r["scenario"], r["runs"], _v(r["outage_ms"]), _v(r["loss_ms"]), _v(r["path_back_ms"]), _v(r["latency_ms"]),
          r["recovered_by"], _v(r["probes_lost"]), _v(r["flow_lost"]),
          _v(r["detected_ms"]), _v(r["written_ms"]), _v(r["reroute_ms"]), _v(r["restore_ms"]), _v(r["moved_healthy"]),
          _v(r["false_dead"]), _v(r["stretched_ms"]), _v(r["link_timeout_ms"]), f"{100 * (r['cpu_busy'] or 0):.0f}%",
          r["allreduce"]) for r in rows],
        title=(f"\nFailover on a k=4 fat-tree ({args.target}), links {plan.links().describe()}; "
               f"{plan.probe_pps} probes/s + a {plan.flow_pps} packets/s UDP flow, element down {plan.down_s:g} s; "
               f"medians of {args.runs} runs; link heartbeats every {beats.link_interval_ms:g} ms, skipped after "
               f"{beats.link_multiplier}; controller heartbeats every {beats.interval_ms:g} ms, dead after {beats.multiplier}")))
    figures = [r.figures() for r in runs]
    report.write_json(args.json, {"target": args.target, "links": plan.links().describe(), "plan": vars(plan),
                                  "heartbeats": vars(beats), "summary": rows, "runs": figures,
                                  "timelines": {r.scenario: r.arrivals for r in runs if r.run == 1}})
    draw(Path(args.png), [r for r in runs if r.run == 1], plan)
    print(f"\nJSON: {Path(args.json).resolve()}\npicture: {Path(args.png).resolve()}")
    wrong = [r for r in runs if r.allreduce.get("wrong")]
    unmeasured = [f"{r.scenario} run {r.run}: {'; '.join(r.errors)}" for r in runs if r.errors]
    if unmeasured:      # such a run's probe figures stayed at their defaults (0 lost): not measured
        print("\nruns whose probes were not measured (their figures above are not measurements):\n"
              + "\n".join(f"  {line}" for line in unmeasured))
    failed = report.say_failed(figures)
    return 1 if wrong or unmeasured or failed else 0


def _v(x):
    return "-" if x is None else x


def draw(path: Path, runs: list[FailoverRun], plan: FailoverPlan) -> None:
    """Probe arrivals (time since the failure, sequence number) per scenario, with its marks."""
    report.save_figure(figure(runs, plan), path)


def figure(runs: list[FailoverRun], plan: FailoverPlan):
    """`draw`'s figure: a panel a run, its probes around the failure and the handler's marks;
    a panel with no probe in its window says so, and why where the run tells."""
    plt = report.pyplot()
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 2.4 * len(runs)), squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        span = max(300.0, 1.5 * (run.outage_ms or 0), 1.3 * (run.reroute_ms or 0))
        span = min(span, 1000 * plan.down_s + 500)
        pts = [(t, s) for t, s in run.arrivals if -150 <= t <= span]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", ms=2, color="tab:blue", label="probe arrived")
        else:
            ax.set_xlim(-150, span)
            ax.set_yticks([])
            ax.text(0.5, 0.5, _no_probe(run, span), transform=ax.transAxes, ha="center", va="center",
                    fontsize=8, color="dimgray", wrap=True, bbox={"facecolor": "white", "edgecolor": "none"})
        marks = [(0.0, "failure", "red"), (run.detected_ms, "controller found the port dead", "orange"),
                 (run.written_ms, "port_status written", "green"), (run.reroute_ms, "reroute done", "purple")]
        if run.restore is not None and run.fail is not None:
            marks.append((1000 * (run.restore.start - failed_at(run.fail)), "restore", "gray"))
        for x, label, colour in marks:
            if x is not None and x <= span:
                ax.axvline(x, color=colour, ls="--", lw=1, label=f"{label} ({x:.0f} ms)")
        ax.set_title(_title(run), fontsize=9)
        ax.set_xlabel("ms since the failure")
        ax.set_ylabel("probe #")
        ax.legend(fontsize=7, loc="upper left")
    return fig


def _title(run: FailoverRun) -> str:
    """A panel's title, its figures in whole milliseconds."""
    if run.outage_ms is not None:
        outage = f"outage {run.outage_ms:.0f} ms"
    elif run.recovered_by == "never":
        outage = "no probe got through again before the run ended"
    else:
        outage = "outage not measured"
    return f"{run.scenario}: {run.element or '?'} - {outage}, {run.probes_lost} probes lost"


def _no_probe(run: FailoverRun, span: float) -> str:
    """Why a panel shows no probe: what the run says about its probes."""
    if run.errors:
        return "no probe measured: " + "; ".join(run.errors)
    if run.fail is None:
        return "no failure was injected, so no time since it"
    if not run.arrivals:
        return "no probe arrived in this run"
    before = [t for t, _ in run.arrivals if t < -150]
    after = [t for t, _ in run.arrivals if t > span]
    said = [f"the last one before at {max(before):.0f} ms" if before else "",
            f"the next at {min(after):.0f} ms" if after else ""]
    return f"no probe arrived from -150 to {span:.0f} ms; " + ", ".join(x for x in said if x)


if __name__ == "__main__":
    sys.exit(main())
