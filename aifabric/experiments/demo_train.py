"""``aifabric demo train``: a real model trained through the switches. A two-layer perceptron
learns scikit-learn's digits data-parallel on 8 hosts of a k=4 fat-tree (one host per rank, spread
over racks and pods), its gradients summed in the switches (in-network all_reduce), then by ring,
and in one process for reference (same seed, shards, batches and initial parameters).

In-network aggregation quantises floats (hostagent.collectives.aggregation.quantize): each summed
gradient element is within n(1/2 + 2^-20)/scale + 2^-23|sum| of the exact sum, scale = (2^31-1) /
(n 2^E) for the chunk's largest exponent E. The reference also replays that quantisation; the
switches add integers, which no order changes, so the in-network run must follow the replay to
the bit (up to the ranks' own float arithmetic), and the replay shows what the bound lets the loss
curve do. One picture (loss, test accuracy, time per step), a table and JSON.

With ``crash`` (rank, step) that rank's process ends at that step in both runs, and each run
starts again from its last checkpoint (every ``checkpoint_every`` steps): the curves go on from
there, to the bit where they would have been, and the time the crash cost is shown.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from aifabric.experiments.allreduce_lab import spread_workers
from aifabric.experiments.train_lab import (ALGORITHMS, TrainRun, digits_split, references,
                                            train_on_fabric)
from aifabric.lab import report
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate, limit_links
from controller.aggregation import JobManager
from controller.fabric_controller import Pipeline
from hostagent.training.step import Config
from topologies.fabric import fat_tree

DEFAULT_PNG = "out/train_demo.png"
LABELS = {"in_network": "in-network", "ring": "ring", "exact": "one process", "replay": "one process, quantised"}
COLOURS = {"in_network": "tab:green", "ring": "tab:blue", "exact": "black"}
CELLS = ("final loss", "test accuracy", "step (ms)", "compute (ms)", "all_reduce (ms)", "CPU busy")


def curve_gaps(a: list[dict], b: list[dict], key: str) -> float:
    """The largest difference of a figure between two runs, step by step (the steps ``a`` has)."""
    by_step = {y["step"]: y for y in b}
    return max(abs(x[key] - by_step[x["step"]][key]) for x in a)


def lost_seconds(run: TrainRun) -> float:
    """What restarts cost a run: each failed attempt's time less the steps it kept (those before
    the checkpoint it resumed from, at the finished attempt's median step): its start, the
    launcher's stopping the others, and the steps done twice."""
    step_s = _median_ms(run, "step_s") / 1000
    first = 0
    lost = 0.0
    for restart in run.restarts:
        lost += restart["wall_s"] - (restart["resumed_from"] - first) * step_s
        first = restart["resumed_from"]
    return lost


def comparison(runs: dict[str, TrainRun], refs: dict[str, list[dict]]) -> dict:
    """How far each fabric run's curves are from the references, and the quantisation bound."""
    exact, replay = refs["exact"], refs["in_network"]
    out = {"grad_bound_max": max(r["grad_bound"] for r in replay),
           "grad_error_max": max(r["grad_error"] for r in replay),
           "replay_vs_exact_loss": curve_gaps(replay, exact, "loss")}
    for name, run in runs.items():
        if run.ok:
            out[name] = {"loss_vs_exact": curve_gaps(run.steps(), exact, "loss"),
                         "loss_vs_replay": curve_gaps(run.steps(), replay, "loss"),
                         "final_accuracy_vs_exact_points": 100 * (run.steps()[-1]["test_acc"] - exact[-1]["test_acc"])}
    return out


def _median_ms(run: TrainRun, key: str) -> float:
    return 1000 * statistics.median(max(r["steps"][t][key] for r in run.reports) for t in range(len(run.steps())))


def row(name: str, run: TrainRun) -> tuple:
    last = run.steps()[-1]
    return (LABELS[name], last["loss"], f"{100 * last['test_acc']:.1f}%", _median_ms(run, "step_s"),
            _median_ms(run, "compute_s"), _median_ms(run, "comm_s"), f"{100 * run.cpu_busy:.0f}%")


def run(k: int = 4, target: str = "softswitch", workers: int = 8, steps: int = 100, rate: LinkRate | None = None,
        json_path: str | None = None, png_path: str | None = None, pipeline: Pipeline | None = None,
        cfg: Config = Config(), crash: tuple[int, int] | None = None, checkpoint_every: int = 10) -> int:
    say = report.progress
    fabric = fat_tree(k)
    hosts, server = spread_workers(fabric, workers)
    with tempfile.TemporaryDirectory(prefix="aifabric-train-") as tmp:
        data = Path(tmp) / "digits.npz"
        split = digits_split(data)
        t0 = time.monotonic()
        refs = references(split, cfg, workers, steps)
        ref_s = (time.monotonic() - t0) / 2 / steps
        say(f"reference: {steps} steps in one process, final test accuracy {100 * refs['exact'][-1]['test_acc']:.1f}%")
        figures: dict = {"topology": f"fat-tree k={k}", "hosts": hosts, "steps": steps, "config": vars(cfg),
                         "train_examples": len(split.y_train), "test_examples": len(split.y_test)}
        runs: dict[str, TrainRun] = {}
        with Lab(fabric, target=target, pipeline=pipeline, progress=say) as lab:
            figures["target"] = lab.switch(fabric.switches[0].name).target_kind
            if rate:
                plan = LinkPlan(rate)
                limit_links(lab, plan)
                figures["links"] = plan.describe()
            else:
                figures["links"] = "not limited (the switches' and hosts' CPU set the pace)"
            manager = JobManager(lab.controller)
            for algorithm in ALGORITHMS:
                say(f"{LABELS[algorithm]}: {workers} ranks, {steps} steps")
                runs[algorithm] = r = train_on_fabric(lab, hosts, algorithm, data, steps, cfg=cfg, manager=manager,
                                                      server=server, exit_rank_at=crash,
                                                      checkpoint_every=checkpoint_every if crash else 0,
                                                      restarts=1 if crash else 0)
                for restart in r.restarts:
                    crashed = next((e for e in restart["errors"] if e.startswith(f"rank {crash[0]} ")),
                                   "; ".join(restart["errors"]))      # another rank failed first
                    say(f"{LABELS[algorithm]}: {crashed}; the launcher stopped the other "
                        f"{workers - 1} and started them again from step {restart['resumed_from']}")
                say(f"{LABELS[algorithm]}: " + (f"done in {r.wall_s:.1f} s" if r.ok else "FAILED: " + "; ".join(r.errors)))
    figures["runs"] = {name: r.summary() for name, r in runs.items()}
    figures["reference"] = {"exact": refs["exact"], "quantised_replay": refs["in_network"],
                            "step_ms": 1000 * ref_s}
    ok = {name: r for name, r in runs.items() if r.ok}
    figures["comparison"] = cmp = comparison(ok, refs)
    exact = refs["exact"][-1]
    rows = [row(name, r) for name, r in ok.items()]
    rows.append((LABELS["exact"], exact["loss"], f"{100 * exact['test_acc']:.1f}%", 1000 * ref_s, 1000 * ref_s, 0.0, "-"))
    print(report.table(["gradients summed", *CELLS], rows,
                       title=f"\n{steps} steps of data-parallel SGD on the digits, {workers} ranks, "
                             f"{figures['target']}, links {figures['links']} (median over steps, slowest rank)"))
    print(f"\nquantisation: each summed gradient element within {cmp['grad_bound_max']:.3g} of the exact sum "
          f"(largest error seen {cmp['grad_error_max']:.3g}); the quantised replay's loss curve is at most "
          f"{cmp['replay_vs_exact_loss']:.3g} from the exact one")
    for name in ok:
        print(f"{LABELS[name]}: loss at most {cmp[name]['loss_vs_exact']:.3g} from the exact reference, "
              f"{cmp[name]['loss_vs_replay']:.3g} from the quantised replay; final accuracy "
              f"{cmp[name]['final_accuracy_vs_exact_points']:+.2f} points")
    for name, r in ok.items():
        if r.restarts:
            lost = figures["runs"][name]["lost_s"] = lost_seconds(r)
            print(f"{LABELS[name]}: the crash cost {lost:.2f} s (the failed attempt's {r.restarts[0]['wall_s']:.2f} s "
                  f"less the {r.first_step} steps it kept: its start, stopping the others, "
                  f"{crash[1] - r.first_step} steps done twice); {r.wall_s:.1f} s in all, the curves from step "
                  f"{r.first_step} on")
    draw(Path(png_path or DEFAULT_PNG), ok, refs)
    report.say_written(png_path or DEFAULT_PNG, json_path, figures)
    failed = [f"{LABELS[n]}: " + "; ".join(r.errors) for n, r in runs.items() if not r.ok]
    if failed:
        print("\nfailed: " + " | ".join(failed))
    return 1 if failed else 0


def draw(path: Path, runs: dict[str, TrainRun], refs: dict[str, list[dict]]) -> None:
    """Loss and accuracy curves (they lie on each other), how far each loss curve is from the exact
    reference, and the median time per step."""
    plt = report.pyplot()
    fig, ((a, b), (d, c)) = plt.subplots(2, 2, figsize=(12, 8))
    exact = refs["exact"]
    curves = [(LABELS[n], COLOURS[n], r.steps(), w) for (n, r), w in zip(runs.items(), (5, 2))]
    curves.append((LABELS["exact"], COLOURS["exact"], exact, 1.5))
    for label, colour, steps, width in curves:
        style = ":" if colour == "black" else "-"
        a.plot([s["step"] for s in steps], [s["loss"] for s in steps], style, color=colour, lw=width, label=label)
        b.plot([s["step"] for s in steps], [100 * s["test_acc"] for s in steps], style, color=colour, lw=width,
               label=label)
    resumed = {r.first_step for r in runs.values() if r.restarts}
    for step in resumed:          # a crashed run goes on from its checkpoint: its curves start there
        for panel in (a, b):
            panel.axvline(step, color="tab:red", linestyle="--", lw=1, label=f"resumed from step {step}")
    a.set(xlabel="step", ylabel="training loss (global batch)", title="Loss (the curves lie on each other)")
    b.set(xlabel="step", ylabel="test accuracy (%)", title="Accuracy on the held-out digits")
    a.legend()
    b.legend()
    gaps = [(LABELS[n], COLOURS[n], r.steps(), "-") for n, r in runs.items()]
    gaps.append((LABELS["replay"], "tab:olive", refs["in_network"], "--"))
    for label, colour, steps, style in gaps:
        d.plot([s["step"] for s in steps], [abs(s["loss"] - exact[s["step"]]["loss"]) for s in steps], style,
               color=colour, label=label)
    d.set_yscale("symlog", linthresh=1e-8)
    d.set(xlabel="step", ylabel="|loss - one process's loss|", title="Distance from the exact reference")
    d.legend()
    names = list(runs)
    compute = [_median_ms(runs[n], "compute_s") for n in names]
    comm = [_median_ms(runs[n], "comm_s") for n in names]
    c.bar([LABELS[n] for n in names], compute, color="tab:gray", label="compute")
    c.bar([LABELS[n] for n in names], comm, bottom=compute, color=[COLOURS[n] for n in names], label="all_reduce")
    c.set(ylabel="ms per step (median, slowest rank)", title="Time per step")
    c.legend()
    report.save_figure(fig, path)
