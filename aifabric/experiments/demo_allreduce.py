"""``aifabric demo allreduce``: one tensor reduced in the switches, then by ring, then through a
parameter server, on a k=4 fat-tree whose links are rate-limited so they, not the CPU, decide
the time. Every result is checked against numpy; a table, JSON and a picture show time,
algorithm bandwidth, bytes per worker and retransmissions."""
from __future__ import annotations

import time
from pathlib import Path

from aifabric.lab import report
from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES
from aifabric.experiments.collectives_bench import in_network_ceiling
from aifabric.experiments.allreduce_lab import ALGORITHMS, CELLS, RunResult, run_allreduce, spread_workers
from aifabric.lab.links import LinkPlan, LinkRate, limit_links
from aifabric.lab.lab import Lab
from controller.aggregation import JobManager
from controller.fabric_controller import Pipeline
from topologies.fabric import fat_tree

DEFAULT_PNG = "out/allreduce_demo.png"
DEFAULT_RATE = LinkRate.parse("10M")     # every link direction
LABELS = {"innetwork": "in-network", "ring": "ring", "ps": "parameter server"}


def run(k: int = 4, target: str = "softswitch", workers: int = 8, size: int = 262144, dtype: str = "float32",
        json_path: str | None = None, png_path: str | None = None, pipeline: Pipeline | None = None,
        rate: LinkRate = DEFAULT_RATE, frame_values: int = LAB_FRAME_VALUES) -> int:
    fabric = fat_tree(k)
    names, server = spread_workers(fabric, workers)
    plan = LinkPlan(rate)
    say = report.progress
    figures: dict = {"topology": f"fat-tree k={k}", "workers": names, "parameter_server": server,
                     "elements": size, "dtype": dtype, "frame_values": frame_values, "links": plan.describe()}
    t_start = time.monotonic()
    with Lab(fabric, target=target, pipeline=pipeline, progress=say) as lab:
        figures["target"] = lab.switch(fabric.switches[0].name).target_kind
        limit_links(lab, plan)
        say(f"links limited: {plan.describe()}")
        manager = JobManager(lab.controller)
        results: list[RunResult] = []
        for algorithm in ALGORITHMS:
            say(f"{LABELS[algorithm]}: {workers} workers reduce {size} {dtype} values")
            r = run_allreduce(lab, manager, algorithm, names, server, elements=size, dtype=dtype,
                              timeout=retransmit_timeout(plan, workers), frame_values=frame_values)
            say(f"{LABELS[algorithm]}: " + (f"ok in {r.time_s:.2f} s" if r.ok else "FAILED: " + "; ".join(r.errors))
                + (f" (tree {r.tree})" if r.tree else ""))
            results.append(r)
    figures["wall_s"] = round(time.monotonic() - t_start, 1)
    figures["runs"] = [r.summary() for r in results]

    print(report.table(["algorithm", *CELLS], [(LABELS[r.algorithm], *r.cells()) for r in results],
                       title=f"\nAllReduce of {size} {dtype} values ({4 * size} bytes), "
                             f"{workers} workers, {figures['target']}, links {plan.describe()}"))
    print(cpu_line(plan, results))
    innet, ring = results[0], results[1]
    if innet.ok and ring.ok:
        print(f"\nin-network / ring algorithm bandwidth: {innet.algbw_mbps / ring.algbw_mbps:.2f}x "
              f"(the bytes on each host link bound it at {in_network_ceiling(plan, workers, frame_values):.2f}x: "
              f"{frame_values}-value frames against the ring's)")
        print(f"switches: {innet.agg_ops}; parameter server packets during the in-network run: "
              f"{innet.server.get('packets_in', 0)}")
    png = Path(png_path or DEFAULT_PNG)
    draw(png, results)
    report.say_written(png, json_path, figures)
    failed = [LABELS[r.algorithm] + ": " + "; ".join(r.errors) for r in results if not r.ok]
    if failed:
        print("\nfailed: " + " | ".join(failed))
    return 0 if not failed else 1


def cpu_line(plan: LinkPlan, results: list[RunResult]) -> str:
    """The link rate and the CPU the runs took: whether the links, not the CPU, set the times."""
    def span(values: list[float]) -> str:
        lo, hi = round(100 * min(values)), round(100 * max(values))
        return f"{lo}%" if lo == hi else f"{lo}-{hi}%"
    return (f"\nlinks at {plan.rate.describe()} per direction; during the runs the switch processes took "
            f"{span([r.switch_cpu for r in results])} of the machine's CPU (all cores), the machine was "
            f"{span([r.cpu_busy for r in results])} busy")


def retransmit_timeout(plan: LinkPlan, workers: int) -> float:
    """Retransmission timeout: a window of every worker's packets queued at one link, twice."""
    return max(0.5, 2 * 32 * workers / plan.packets_per_s)


def draw(path: Path, results: list[RunResult]) -> None:
    plt = report.pyplot()

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    results = [r for r in results if r.unmeasured is None]      # a failed run has no bar (the table says why)
    labels = [LABELS[r.algorithm] for r in results]
    colours = {"innetwork": "tab:green", "ring": "tab:blue", "ps": "tab:gray"}
    a.bar(labels, [r.algbw_kbps for r in results], color=[colours[r.algorithm] for r in results])
    a.set_ylabel("algorithm bandwidth (kB/s)")
    a.set_title("AllReduce speed (higher is better)")
    x = range(len(results))
    sent = [r.per_tensor("bytes_sent") for r in results]
    recv = [r.per_tensor("bytes_received") for r in results]
    b.bar([i - 0.2 for i in x], sent, width=0.4, label="sent")
    b.bar([i + 0.2 for i in x], recv, width=0.4, label="received")
    b.set_xticks(list(x), labels)
    b.set_ylabel("bytes per worker / tensor bytes")
    b.set_title("Traffic on each worker's link")
    b.legend()
    report.save_figure(fig, path)

