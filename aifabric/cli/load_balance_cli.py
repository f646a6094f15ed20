"""The load-balancing comparison as a command: `aifabric bench load-balance ...` (or its short form `aifabric bench lb`) and benchmarks/load_balance.py."""
from __future__ import annotations

import argparse
from pathlib import Path

from aifabric.lab import report
from aifabric.lab.links import rate_arg
from aifabric.experiments.load_balance_bench import (
    AGENT_MODES,
    FLOW_SECONDS,
    KERNEL_PLB,
    MODES,
    PATTERNS,
    LbPlan,
    ideal_rates,
    make_flows,
    run_mode,
    setup,
    summarise,
)
from hostagent import load_balance_kernel_plb as kernel_plb
from hostagent.agent.requirements import bcc_missing

DEFAULT_PATTERNS = ("permutation", "collective")
DEFAULT_SEEDS = (1, 2, 3)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                   help="load-balancing modes to compare (default: all; a mode this machine cannot run is skipped, "
                        "saying why)")
    p.add_argument("--patterns", "--pattern", nargs="+", choices=PATTERNS, default=list(DEFAULT_PATTERNS),
                   help=f"traffic patterns (default: {' '.join(DEFAULT_PATTERNS)})")
    p.add_argument("--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS),
                   help=f"seeds of the patterns' flows and ports, every mode the same (default: "
                        f"{' '.join(map(str, DEFAULT_SEEDS))})")
    p.add_argument("--rate", type=rate_arg, default=LbPlan.rate,
                   help="link rate per direction: Mbit/s, or with a unit (2.5M, 500k, 1000pps); default %(default)s")
    p.add_argument("--packets", type=int, help=f"packets per flow (default: {FLOW_SECONDS:g} s at the rate, "
                   f"{LbPlan().packets} at the default rate)")
    p.add_argument("--target", default="softswitch", help="P4 target: softswitch, bmv2 or auto (default %(default)s)")
    p.add_argument("--plb-rehash-rounds", type=int, default=LbPlan.plb_rehash_rounds, metavar="N",
                   help="plb modes: congested PLB rounds before a flow repaths (default %(default)s, the kernel's)")
    p.add_argument("--plb-round-ms", type=float, default=LbPlan.plb_round_s * 1000, metavar="MS",
                   help="plb modes: the PLB round, about one RTT (default %(default)g)")
    p.add_argument("--qps", type=int, default=LbPlan.qps, metavar="N",
                   help="qp-scaling: queue pairs (flows on their own source ports) a peer pair (default %(default)s)")
    p.add_argument("--int", dest="int_queues", action="store_true",
                   help="INT on every flow: report the queue depth at the hot port per mode")
    p.add_argument("--json", default="out/load_balance.json", help="where the figures go (default %(default)s)")
    p.add_argument("--png", default="out/load_balance.png", help="where the picture goes (default %(default)s)")


def run(args: argparse.Namespace, pipeline=None) -> int:
    from aifabric.lab.lab import Lab
    from topologies.fabric import fat_tree

    plan = LbPlan(rate=args.rate, packets=args.packets, int_queues=args.int_queues, qps=args.qps,
                  plb_rehash_rounds=args.plb_rehash_rounds, plb_round_s=args.plb_round_ms / 1000)
    runs, heat = [], {}
    skipped = unavailable_modes(args.modes)
    for mode, why in skipped.items():
        print(f"skipping mode {mode}: {why}")
    args.modes = [m for m in args.modes if m not in skipped]
    if not args.modes:
        print("no mode left to run")
        return 0
    with Lab(fat_tree(4), target=args.target, pipeline=pipeline, progress=report.progress,
             telemetry=plan.telemetry()) as lab:
        modes, te = setup(lab, plan)
        for pattern in args.patterns:
            for seed in args.seeds:
                ideal = ideal_rates(lab, make_flows(lab, pattern, seed, plan), plan)
                for mode in args.modes:
                    report.progress(f"{pattern} seed {seed}: {mode}")
                    r = run_mode(lab, modes, te, mode, pattern, seed, plan)
                    runs.append(r.figures(plan, ideal))
                    heat.setdefault((pattern, mode), []).append(r.core_links)
    rows = summarise(runs)
    queues = ["hot queue (mean)", "deepest queue"] if plan.int_queues else []
    print(report.table(["pattern", "mode", "runs", "throughput/ideal", "core imbalance", "floor", "FCT p50 (s)",
                        "FCT p99 (s)", "out of order", "lost", "path changes", "CE marks", "CNPs", "CPU busy",
                        "switches CPU"]
                       + queues,
                       [(r["pattern"], r["mode"], r["runs"], r["throughput_vs_ideal"], r["core_imbalance"],
                         r["core_imbalance_floor"], r["fct_p50_s"], r["fct_p99_s"], r["out_of_order"], r["lost"],
                         r["repaths"] if r["repaths"] is not None else r["pins_moved"], r["ce_marks"], r["cnps"],
                         _pct(r["cpu_busy"]), _pct(r["switch_cpu"])) + ((r["hot_queue_mean"], r["queue_max"]) if plan.int_queues else ())
                        for r in rows],
                       title=f"\nLoad balancing on a k=4 fat-tree ({args.target}), links {args.rate} "
                             f"({plan.packets_per_s:.0f} full frames/s, queues of {plan.queue_depth} packets), {plan.packets} packets per flow, TE samples one "
                             f"packet in {plan.te_one_in}, PLB N={plan.plb_rehash_rounds} rounds of {args.plb_round_ms:g} ms, "
                             f"medians over seeds {args.seeds}"))
    te_rows = [r for r in rows if r["te_round_ms"] is not None]
    for r in te_rows:
        print(f"{r['pattern']} te: a round that changed pins took {r['te_round_ms']:g} ms from reading the samples "
              f"to the last pin written ({r['te_write_ms']:g} ms of it writing), at most {r['te_round_max_ms']:g} ms "
              f"(medians over seeds)")
    print(f"links at {args.rate} per direction; the switch processes took "
          f"{_span([r['switch_cpu'] for r in rows])} of the machine's CPU (all cores) per mode, the machine was "
          f"{_span([r['cpu_busy'] for r in rows])} busy (medians over seeds)")
    if skipped:
        print("skipped: " + "; ".join(f"{mode} ({why})" for mode, why in skipped.items()))
    report.write_json(args.json, {"plan": vars(plan), "runs": runs, "medians": rows, "skipped": skipped})
    draw(Path(args.png), rows, heat)
    print(f"\nJSON: {Path(args.json).resolve()}\npicture: {Path(args.png).resolve()}")
    return 1 if report.say_failed(rows) else 0


def _pct(x) -> str:
    return f"{100 * x:.0f}%" if isinstance(x, (int, float)) else x


def _span(values: list) -> str:
    values = [v for v in values if isinstance(v, (int, float))]
    if not values:
        return "?"
    lo, hi = round(100 * min(values)), round(100 * max(values))
    return f"{lo}%" if lo == hi else f"{lo}-{hi}%"


def unavailable_modes(modes: list[str]) -> dict[str, str]:
    """The modes of ``modes`` this machine cannot run, each with why."""
    out = {}
    if (no_bcc := bcc_missing()) is not None:
        out.update({m: no_bcc for m in modes if m in AGENT_MODES})
    if KERNEL_PLB in modes and (no_kernel_plb := kernel_plb.unavailable()) is not None:
        out[KERNEL_PLB] = no_kernel_plb
    return out


def draw(path: Path, rows: list[dict], heat: dict) -> None:
    plt = report.pyplot()
    import numpy as np

    patterns = list(dict.fromkeys(r["pattern"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, axes = plt.subplots(2, len(patterns), figsize=(5 * len(patterns), 7), squeeze=False)
    for col, pattern in enumerate(patterns):
        sel = [r for r in rows if r["pattern"] == pattern]
        ax = axes[0][col]
        ax.set_xticks(range(len(sel)), [r["mode"] for r in sel])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{pattern}: throughput / ideal")
        for i, r in enumerate(sel):
            if isinstance(r["throughput_vs_ideal"], report.Failed):     # no bar: the table says why
                ax.text(i, 0.5, "failed", ha="center", color="tab:red", rotation=90)
                continue
            ax.bar(i, r["throughput_vs_ideal"], color="tab:blue")
            ax.text(i, 0.02, f"imb {r['core_imbalance']}", ha="center", color="white", fontsize=8)
        links = sorted({k for m in modes for runs in heat.get((pattern, m), []) for k in runs})
        grid = np.array([[np.median([run.get(k, 0) for run in heat.get((pattern, m), [{}])]) for k in links]
                         for m in modes])
        ax = axes[1][col]
        ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_yticks(range(len(modes)), modes)
        ax.set_xticks(range(len(links)), links, rotation=90, fontsize=5)
        ax.set_title(f"{pattern}: packets per core link (median run)")
    report.save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="load_balance", description=__doc__)
    add_arguments(ap)
    return run(ap.parse_args(argv))
