"""Process groups on a running fabric: one `python -m hostagent.collectives.runner` per host.

`run_group` starts a rank on each of ``hosts`` (rank order = the list's order), with the
hierarchical algorithm's groups taken from the topology (the hosts of one edge switch) and, for
in-network all_reduce, an aggregation job on the switches with its parameter server as fallback
aggregator; it returns every rank's report (each rank checked its own results against numpy).
The fabric tests and benchmarks/collectives.py share it.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

from aifabric.experiments.allreduce_lab import (_communicate, _last_json, _python_cmd, _read_agg_ops,
                                                _wait_listening)
from aifabric.lab.lab import Lab
from controller.aggregation import JobManager

RUNNER = "hostagent.collectives.runner"


@dataclass
class GroupRun:
    hosts: list[str]
    reports: list[dict] = field(default_factory=list)   # per rank, in rank order
    errors: list[str] = field(default_factory=list)     # ranks that reported nothing or a wrong result
    agg_ops: dict[str, int] = field(default_factory=dict)
    server: dict = field(default_factory=dict)
    in_network: bool = False
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors and len(self.reports) == len(self.hosts)

    def calls(self, rank: int = 0) -> list[dict]:
        return self.reports[rank]["calls"] if rank < len(self.reports) else []


def edge_groups(lab: Lab, hosts: Sequence[str]) -> str:
    """Ranks grouped by their edge switch, as the runner's --groups takes them."""
    by_switch: dict[str, list[int]] = {}
    for rank, h in enumerate(hosts):
        by_switch.setdefault(lab.fabric.host(h).switch, []).append(rank)
    return ";".join(",".join(map(str, g)) for g in by_switch.values())


def run_group(lab: Lab, hosts: Sequence[str], calls: str, elements: Sequence[int], *, dtype: str = "float32",
              repeat: int = 1, timeout: float = 60.0, window: int = 32, manager: JobManager | None = None,
              server: str | None = None, slots: int = 32, deadline_s: float = 900.0,
              even_splits: bool = False, extra_args: Sequence[str] = ()) -> GroupRun:
    """Every rank runs ``calls`` (OP:ALGO,...) for each length in ``elements``. With ``manager`` and
    ``server``, an in-network aggregation job is started for the group first and ended after."""
    run = GroupRun(list(hosts))
    ips = ",".join(str(lab.fabric.host(h).ip4.ip) for h in hosts)
    common = ["--peers", ips, "--calls", calls, "--elements", *elements, "--dtype", dtype, "--repeat", repeat,
              "--timeout", timeout, "--window", window, "--groups", edge_groups(lab, hosts)]
    if even_splits:
        common.append("--even-splits")
    common.extend(extra_args)  # further runner options (--rto, --silent-after, ...)
    job = ps_proc = None
    switches = [sw.name for sw in lab.fabric.switches]
    try:
        extra: dict[str, list] = {h: [] for h in hosts}
        if manager is not None:
            job = manager.start(list(hosts), server, slots=slots, in_network=True)
            run.in_network = job.in_network
            ps_proc = lab.host(server).popen(_python_cmd("ps", "--job", f"{job.job_id}:{len(hosts)}:{slots}"))
            _wait_listening(lab.host(server), ps_proc)
            for h in hosts:
                cfg = job.worker_config(h)
                extra[h] = ["--aggregator", cfg["aggregator"], "--job", cfg["job_id"], "--worker-id", cfg["worker_id"],
                            "--slots", slots]
        before = _read_agg_ops(lab, switches) if manager is not None else {}
        t0 = time.monotonic()
        procs = {h: lab.host(h).popen([sys.executable, "-m", RUNNER, "--rank", str(r),
                                       *map(str, common), *map(str, extra[h])])
                 for r, h in enumerate(hosts)}
        for h, proc in procs.items():
            out, err = _communicate(proc, deadline_s)
            report = _last_json(out)
            if report is None:
                said = err.strip().splitlines()
                run.errors.append(f"{h}: {said[-1] if said else f'no output (exit status {proc.returncode})'}")
                continue
            run.reports.append(report)
            for c in report["calls"]:
                if not c["ok"]:
                    run.errors.append(f"{h} {c['op']}:{c['algo']} {c['elements']}: {c.get('error', 'wrong result')}")
        run.wall_s = time.monotonic() - t0
        if manager is not None:
            after = _read_agg_ops(lab, switches)
            run.agg_ops = {k: after[k] - before[k] for k in after}
    finally:
        if ps_proc is not None:
            ps_proc.terminate()
            out, _ = _communicate(ps_proc, 10)
            run.server = _last_json(out) or {}
        if job is not None:
            manager.end(job)
    return run
