"""AllReduce on a running fabric: in the switches, by ring, or through a parameter server.

The pieces the demo (`aifabric demo allreduce`), the benchmark (benchmarks/allreduce.py) and the
tests share (the links are limited by `aifabric.lab.links.limit_links`): `run_allreduce` runs one AllReduce of the workers' tensors with
one algorithm and collects what every worker measured, what the parameter server and the
switches' ``agg_ops`` counters saw, and how busy the machine's CPUs were meanwhile (and the
switch processes' share of them).

Every worker process builds its tensor from (seed, rank) and also checks its result against the
exact sum of all of them, so a run is correct only when every worker said so.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES, in_network_job, read_agg_ops
from aifabric.experiments.rank_processes import communicate, last_json, last_words
from aifabric.lab.cpu_meter import CpuMeter
from aifabric.lab.lab import Lab
from aifabric.lab.report import Failed, Measured
from controller.aggregation import JobManager
from topologies.fabric import Fabric

ALGORITHMS = ("innetwork", "ring", "ps")
WORKER_DEADLINE_S = 600.0
CELLS = ("correct", "time (s)", "algbw (kB/s)", "sent / tensor", "received / tensor", "retransmissions", "CPU busy",
         "switches CPU")


def spread_workers(fabric: Fabric, n: int) -> tuple[list[str], str]:
    """``n`` workers spread over racks and pods (host 0 of edge 0 of every pod, then of edge 1,
    ...), and a host that is none of them for the parameter server."""
    by_edge = [h for h in sorted(fabric.hosts, key=lambda h: (h.port, h.switch[2:], h.switch))]
    if n > len(fabric.hosts) - 1:
        raise ValueError(f"{n} workers: {fabric.describe()} has {len(fabric.hosts)} hosts, one is the parameter server")
    workers = [h.name for h in by_edge[:n]]
    server = next(h.name for h in fabric.hosts if h.name not in workers)
    return workers, server


@dataclass
class RunResult:
    algorithm: str
    workers: list[str]
    elements: int
    dtype: str
    per_worker: list[dict] = field(default_factory=list)
    server: dict = field(default_factory=dict)         # parameter server counters (innetwork, ps)
    agg_ops: dict[str, int] = field(default_factory=dict)
    in_network: bool = False
    tree: str = ""
    cpu_busy: float = 0.0                               # machine CPU busy fraction during the run
    switch_cpu: float = 0.0                             # the switch processes' part of it (of every core)
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and len(self.per_worker) == len(self.workers) and all(w["ok"] for w in self.per_worker)

    @property
    def unmeasured(self) -> Failed | None:
        """Why the run's figures are not measured: a worker that gave no report (a worker
        that reported a wrong result was still timed)."""
        if len(self.per_worker) == len(self.workers):
            return None
        return Failed("; ".join(self.errors) or f"{len(self.per_worker)} of {len(self.workers)} workers reported")

    @property
    def time_s(self) -> Measured[float]:
        """The slowest worker's time."""
        return self.unmeasured or max(w["time_s"] for w in self.per_worker)

    @property
    def tensor_bytes(self) -> int:
        return self.per_worker[0]["tensor_bytes"] if self.per_worker else 0

    @property
    def algbw_mbps(self) -> Measured[float]:
        """Algorithm bandwidth: tensor bytes per second of the slowest worker, in MB/s."""
        return self.unmeasured or self.tensor_bytes / self.time_s / 1e6

    @property
    def algbw_kbps(self) -> Measured[float]:
        """`algbw_mbps` in kB/s."""
        return self.unmeasured or self.algbw_mbps * 1000

    def mean(self, key: str) -> Measured[float]:
        """A worker figure's mean over the workers."""
        return self.unmeasured or sum(w[key] for w in self.per_worker) / len(self.per_worker)

    def per_tensor(self, key: str) -> Measured[float]:
        """A worker figure's mean over the workers, in tensors (bytes sent or received)."""
        return self.unmeasured or self.mean(key) / self.tensor_bytes

    def total(self, key: str) -> Measured[int]:
        """A worker figure summed over the workers (retransmissions)."""
        return self.unmeasured or sum(w.get(key, 0) for w in self.per_worker)

    def cells(self) -> tuple:
        """The run's figures as a table row under `CELLS`; a figure not measured shows why."""
        return ("yes" if self.ok else "NO", self.time_s, self.algbw_kbps, self.per_tensor("bytes_sent"),
                self.per_tensor("bytes_received"), self.total("retransmissions"), f"{100 * self.cpu_busy:.0f}%",
                f"{100 * self.switch_cpu:.0f}%")

    def summary(self) -> dict:
        return {"algorithm": self.algorithm, "workers": len(self.workers), "elements": self.elements,
                "dtype": self.dtype, "ok": self.ok, "time_s": round(self.time_s, 3),
                "algbw_MBps": round(self.algbw_mbps, 4), "tensor_bytes": self.tensor_bytes,
                "bytes_sent_per_worker": round(self.mean("bytes_sent")),
                "bytes_received_per_worker": round(self.mean("bytes_received")),
                "retransmissions": self.total("retransmissions"),
                "in_network": self.in_network, "tree": self.tree, "server": self.server,
                "agg_ops": self.agg_ops, "cpu_busy": round(self.cpu_busy, 3),
                "switch_cpu": round(self.switch_cpu, 3), "errors": self.errors}


def _python_cmd(*args: object) -> list[str]:
    return [sys.executable, "-m", "hostagent.collectives", *map(str, args)]


def run_allreduce(lab: Lab, manager: JobManager, algorithm: str, workers: Sequence[str], server: str, *,
                  elements: int, dtype: str = "float32", seed: int = 1, slots: int = 32, timeout: float = 1.0,
                  retries: int = 100, ring_window: int = 32, frame_values: int = LAB_FRAME_VALUES) -> RunResult:
    """One AllReduce with ``algorithm`` (innetwork, ring or ps) among ``workers``; ``server`` runs
    the parameter server (the fallback aggregator of innetwork and ps jobs)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm!r}: one of {', '.join(ALGORITHMS)}")
    fabric = lab.fabric
    result = RunResult(algorithm, list(workers), elements, dtype)
    n = len(workers)
    tensor = ["--size", elements, "--dtype", dtype, "--seed", seed, "--timeout", timeout, "--retries", retries]
    if algorithm == "ring":
        peers = ",".join(str(fabric.host(w).ip4.ip) for w in workers)
        cmds = {w: _python_cmd("ring", "--peers", peers, "--rank", r, "--window", ring_window,
                               "--frame-values", frame_values, *tensor)
                for r, w in enumerate(workers)}
        before = read_agg_ops(lab)
        _run_workers(lab, result, cmds)
        after = read_agg_ops(lab)
        result.agg_ops = {k: after[k] - before[k] for k in after}     # a ring's: none of them the switches'
        return result
    with in_network_job(lab, workers, manager=manager, server=server, slots=slots,
                        in_network=algorithm == "innetwork", frame_values=frame_values) as job:
        result.in_network, result.tree = job.in_network, job.tree
        cmds = {}
        for w in workers:
            cfg = job.config(w)
            cmds[w] = _python_cmd("worker", "--ps", cfg["aggregator"], "--job", cfg["job_id"],
                                  "--workers", n, "--worker-id", cfg["worker_id"], "--rank", cfg["rank"],
                                  "--slots", slots, "--frame-values", cfg["frame_values"], *tensor)
        _run_workers(lab, result, cmds)
    result.agg_ops, result.server = job.agg_ops, job.server_stats
    return result


def _run_workers(lab: Lab, result: RunResult, cmds: dict[str, list[str]]) -> None:
    """Every worker's command on its host, timed, with the machine's CPU share meanwhile and
    the switches' part of it."""
    meter, t0 = CpuMeter(lab.switch_pids), time.monotonic()
    collect_workers(result, {w: lab.host(w).popen(cmd) for w, cmd in cmds.items()})
    result.wall_s = time.monotonic() - t0
    cpu = meter.read()
    result.cpu_busy, result.switch_cpu = cpu.busy, cpu.switches


def collect_workers(result: RunResult, procs: dict, deadline_s: float = WORKER_DEADLINE_S) -> None:
    """Every worker process's report into ``result`` (in ``procs``' order); a worker with no
    report, or with a wrong result, into its errors with what it said."""
    for w, proc in procs.items():
        out, err = communicate(proc, deadline_s)
        report = last_json(out)
        if report is None:
            result.errors.append(f"{w}: {last_words(err, proc)}")
        else:
            report["host"] = w
            result.per_worker.append(report)
            if not report.get("ok"):
                result.errors.append(f"{w}: wrong result (max error {report.get('max_abs_error')})")
