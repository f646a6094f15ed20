"""`aifabric train`: a training workload (aifabric.workloads) executed on a running fabric, one
`python -m hostagent.workload_runner` per rank on the host its placement gives it. The plan file
hands every rank its ops and the process groups (the world, every collective's group, every
send/recv pair), each group on its own UDP port. Reports per iteration and rank step time, compute,
exposed communication and time per collective kind, draws a timeline per rank and writes JSON.
Collectives run by ring (the library's host algorithms) whatever the workload asks.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from aifabric.experiments.allreduce_lab import cpu_times
from aifabric.experiments.train_lab import collect_ranks
from aifabric.lab import report
from aifabric.lab.lab import Lab
from aifabric.workloads import Workload

RUNNER = "hostagent.workload_runner"
BASE_PORT = 48000
COLOURS = {"compute": "tab:gray", "all_reduce": "tab:blue", "reduce_scatter": "tab:cyan", "all_gather": "tab:purple",
           "all_to_all": "tab:red", "broadcast": "tab:olive", "send": "tab:orange", "recv": "tab:brown"}


def groups_of(workload: Workload) -> list[list[int]]:
    """The world first, then every collective's group and every send/recv pair, in first use."""
    seen: dict[tuple[int, ...], None] = {tuple(range(workload.job.parallelism.world)): None}
    for op in workload.all_ops():
        if op.kind.value in ("send", "recv"):
            seen.setdefault(tuple(sorted(op.group)), None)
        elif not op.is_compute:
            seen.setdefault(tuple(op.group), None)
    return [list(g) for g in seen]


def plan_of(workload: Workload, addresses: list[str], iterations: int) -> dict:
    return {"addresses": addresses, "groups": groups_of(workload), "iterations": iterations, "base_port": BASE_PORT,
            "ops": [[op.to_dict() for op in ops] for ops in workload.ranks]}


@dataclass
class WorkloadRun:
    hosts: list[str]
    reports: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cpu_busy: float = 0.0
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors and len(self.reports) == len(self.hosts)

    def iteration_rows(self) -> list[tuple]:
        rows = []
        for i in range(len(self.reports[0]["iterations"])):
            its = [r["iterations"][i] for r in self.reports]
            slowest = max(its, key=lambda it: it["step_s"])
            kinds: dict[str, float] = {}
            for it in its:
                for k, v in it["comm_by_kind_s"].items():
                    kinds[k] = max(kinds.get(k, 0.0), v)
            rows.append((i, slowest["step_s"], slowest["compute_s"], slowest["exposed_comm_s"], slowest["idle_s"],
                         ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items()))))
        return rows


def run_workload(lab: Lab, workload: Workload, iterations: int, plan_path: str | Path, *, timeout: float = 60.0,
                 silent_after: float = 5.0, deadline_s: float = 600.0,
                 kill_rank_after: tuple[int, float] | None = None) -> WorkloadRun:
    """Every rank's ops, ``iterations`` times; ``kill_rank_after`` (rank, seconds) kills that rank's
    process that long after the start, to show how a run ends when a host dies."""
    if workload.placement is None:
        raise ValueError("the workload needs a placement on the fabric's hosts (aifabric.workloads.place)")
    world = workload.job.parallelism.world
    hosts = [workload.placement.host(r) for r in range(world)]
    addresses = [str(lab.fabric.host(h).ip4.ip) for h in hosts]
    Path(plan_path).write_text(json.dumps(plan_of(workload, addresses, iterations)))
    run = WorkloadRun(hosts)
    cpu0, t0 = cpu_times(), time.monotonic()
    procs = [lab.host(h).popen([sys.executable, "-m", RUNNER, "--rank", str(r), "--plan", str(Path(plan_path).resolve()),
                                "--timeout", str(timeout), "--silent-after", str(silent_after)])
             for r, h in enumerate(hosts)]
    run.reports, run.errors = collect_ranks(hosts, procs, deadline_s, kill_rank_after)
    run.wall_s = time.monotonic() - t0
    cpu1 = cpu_times()
    run.cpu_busy = 1 - (cpu1[1] - cpu0[1]) / (cpu1[0] - cpu0[0]) if cpu1[0] > cpu0[0] else 0.0
    return run


def draw_timeline(path: str | Path, run: WorkloadRun, iteration: int = -1) -> None:
    """One row per rank, one row per stream inside it: compute and each collective as bars."""
    plt = report.pyplot()
    fig, ax = plt.subplots(figsize=(12, 0.5 + 0.45 * len(run.reports) * 2))
    labels, y = [], 0
    for r, rep in enumerate(run.reports):
        ops = rep["iterations"][iteration]["ops"]
        for stream in sorted({o["stream"] for o in ops}):
            for o in (o for o in ops if o["stream"] == stream):
                ax.barh(y, o["end"] - o["start"], left=o["start"], color=COLOURS.get(o["kind"], "black"), height=0.8)
            labels.append(f"rank {r} {stream}")
            y += 1
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the iteration's start (emulated)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), loc="upper right", fontsize=7)
    ax.set_title("Timeline per rank and stream")
    report.save_figure(fig, path)
