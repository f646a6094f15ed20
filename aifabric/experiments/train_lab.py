"""Data-parallel training on a running fabric: one `python -m hostagent.training.dp_rank` per host.

`digits_split` writes scikit-learn's digits (features scaled to [0, 1], a seeded test split of
360 images) to the .npz every rank reads its shard from. `train_on_fabric` starts a rank on each
host, with an in-network aggregation job on the switches when the algorithm is in_network, and
collects every rank's report; a rank that reports nothing or an error fails the run by name
(`TrainRun.errors`). ``kill_rank_after`` kills one rank's process that many seconds after the
start, ``exit_rank_at`` ends one at a step, to show how a run ends when a host dies; with
``checkpoint_every`` and ``restarts`` the job saves its parameters every so many steps and, when
an attempt fails, starts every rank again from the last checkpoint, as an elastic launcher does
(`TrainRun.restarts`: each failed attempt, its errors, the step it resumed from and the time it
cost). `reference` trains the same ranks in this process. With ``host_agent`` the hosts run the eBPF
agents (PLB, DCQCN) for the run and the ranks send RoCEv2-like (aifabric.experiments.host_agents);
`TrainRun.agents` holds the agents' summed counters.
"""
from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES, in_network_job
from aifabric.experiments.host_agents import agents_on, rank_args
from aifabric.experiments.rank_processes import collect_ranks
from aifabric.lab.cpu_meter import busy_between, cpu_times
from aifabric.lab.lab import Lab
from controller.aggregation import JobManager
from hostagent.agent.config import AgentConfig
from hostagent.training import reference
from hostagent.training.checkpoint import saved_step
from hostagent.training.data import Split
from hostagent.training.step import Config

RANK = "hostagent.training.dp_rank"
ALGORITHMS = ("in_network", "ring")
TEST_EXAMPLES = 360


class TrainingFailed(RuntimeError):
    """A run on the fabric in which some rank did not finish; the message names each."""


def digits_split(path: str | Path, seed: int = 0) -> Split:
    from sklearn.datasets import load_digits   # only here: the hosts read the .npz

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))
    x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    test, train = order[:TEST_EXAMPLES], order[TEST_EXAMPLES:]
    split = Split(x[train], y[train], x[test], y[test])
    split.save(path)
    return split


@dataclass
class TrainRun:
    algorithm: str
    hosts: list[str]
    reports: list[dict] = field(default_factory=list)   # per rank that reported, in rank order
    errors: list[str] = field(default_factory=list)
    agg_ops: dict[str, int] = field(default_factory=dict)
    server: dict = field(default_factory=dict)
    in_network: bool = False
    cpu_busy: float = 0.0
    wall_s: float = 0.0
    agents: dict = field(default_factory=dict)
    restarts: list[dict] = field(default_factory=list)     # failed attempts: errors, wall_s, resumed_from

    @property
    def ok(self) -> bool:
        return not self.errors and len(self.reports) == len(self.hosts)

    def steps(self, rank: int = 0) -> list[dict]:
        """The last attempt's steps (from its `first_step`, after a restart)."""
        return self.reports[rank]["steps"]

    @property
    def first_step(self) -> int:
        return self.reports[0].get("first_step", 0) if self.reports else 0

    def step_times(self) -> list[float]:
        """Each step's time on the slowest rank."""
        return [max(r["steps"][t]["step_s"] for r in self.reports) for t in range(len(self.steps()))]

    def summary(self) -> dict:
        return {"algorithm": self.algorithm, "hosts": self.hosts, "ok": self.ok, "errors": self.errors,
                "in_network": self.in_network, "agg_ops": self.agg_ops, "server": self.server,
                "cpu_busy": round(self.cpu_busy, 3), "wall_s": round(self.wall_s, 2), "agents": self.agents,
                "steps": self.steps() if self.ok else [], "first_step": self.first_step, "restarts": self.restarts,
                "stats": [r.get("stats", {}) for r in self.reports]}


def train_on_fabric(lab: Lab, hosts: Sequence[str], algorithm: str, data: str | Path, steps: int, *,
                    cfg: Config = Config(), manager: JobManager | None = None, server: str | None = None,
                    slots: int = 8, timeout: float = 30.0, silent_after: float = 5.0,
                    kill_rank_after: tuple[int, float] | None = None, exit_rank_at: tuple[int, int] | None = None,
                    checkpoint_every: int = 0, restarts: int = 0, deadline_s: float = 600.0,
                    host_agent: AgentConfig | None = None, agent_dir: str | Path | None = None) -> TrainRun:
    """``steps`` steps of data-parallel SGD, one rank per host (rank order = ``hosts``' order),
    the gradients all-reduced with ``algorithm``; in_network needs ``manager`` and ``server`` (the
    host of the job's fallback aggregator). ``host_agent``: the agents' configuration (their
    stats under ``agent_dir``, default the lab's log directory). ``exit_rank_at`` (rank, step)
    and ``kill_rank_after`` (rank, seconds) fail the first attempt; up to ``restarts`` more start
    from the checkpoint saved every ``checkpoint_every`` steps (beside ``data``)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm!r}: one of {', '.join(ALGORITHMS)}")
    if restarts and not checkpoint_every:
        raise ValueError("restarts need checkpoints: give checkpoint_every (steps between two)")
    run = TrainRun(algorithm, list(hosts))
    ips = ",".join(str(lab.fabric.host(h).ip4.ip) for h in hosts)
    checkpoint = Path(data).resolve().with_name(f"checkpoint-{algorithm}.npz")
    checkpoint.unlink(missing_ok=True)                  # a job of its own, not an earlier one's
    common = ["--peers", ips, "--data", Path(data).resolve(), "--steps", steps, "--algo", algorithm,
              "--hidden", cfg.hidden, "--batch", cfg.batch, "--lr", cfg.lr, "--seed", cfg.seed,
              "--timeout", timeout, "--silent-after", silent_after, *rank_args(host_agent, hosts)]
    if checkpoint_every:
        common += ["--checkpoint", checkpoint, "--checkpoint-every", checkpoint_every]
    if algorithm == "in_network" and (manager is None or server is None):
        raise ValueError("in_network training needs the job manager and a host for the fallback aggregator")
    agent_dir = Path(agent_dir if agent_dir is not None else lab.log_dir) / "train-agents"
    cpu0, t0 = cpu_times(), time.monotonic()
    with agents_on(lab, hosts, host_agent, agent_dir) as agents:
        for attempt in range(restarts + 1):
            crash = [] if attempt or exit_rank_at is None else ["--exit-at-step", str(exit_rank_at[1])]
            started = time.monotonic()
            # a fresh aggregation job (a new epoch on the switches) for every attempt: the slots'
            # state of a failed one is not the new workers'
            job_cm = (in_network_job(lab, hosts, manager=manager, server=server, slots=slots)
                      if algorithm == "in_network" else nullcontext())
            with job_cm as job:
                run.in_network = bool(job and job.in_network)
                procs = [lab.host(h).popen([sys.executable, "-m", RANK, "--rank", str(r), *map(str, common),
                                            *(crash if exit_rank_at and r == exit_rank_at[0] else []),
                                            *(job.worker_args(h) if job else [])]) for r, h in enumerate(hosts)]
                run.reports, run.errors = collect_ranks(list(hosts), procs, deadline_s,
                                                        None if attempt else kill_rank_after,
                                                        stop_on_failure=attempt < restarts)
            if job is not None:
                run.agg_ops, run.server = job.agg_ops, job.server_stats
            if run.ok or attempt == restarts:
                break
            run.restarts.append({"errors": run.errors, "wall_s": time.monotonic() - started,
                                 "resumed_from": saved_step(checkpoint)})
    run.wall_s = time.monotonic() - t0
    run.cpu_busy = busy_between(cpu0, cpu_times())
    if agents is not None:
        run.agents = agents.totals()      # after they stopped: their last write is final
    return run


def require_ok(run: TrainRun) -> TrainRun:
    """``run``, or TrainingFailed naming every rank that did not finish."""
    if not run.ok:
        raise TrainingFailed(f"{run.algorithm} training failed: " + "; ".join(run.errors))
    return run


def references(split: Split, cfg: Config, ranks: int, steps: int,
               frame_values: int = LAB_FRAME_VALUES) -> dict[str, list[dict]]:
    """The single-process runs: exact sums, and the switches' quantised sums replayed in frames of
    ``frame_values`` (the in-network job's, which sets the quantisation's chunks)."""
    return {c: reference.train(split, cfg, ranks, steps, c, frame_values) for c in reference.COMBINERS}
