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
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Sequence

from aifabric.experiments.aggregation_job import in_network_job
from aifabric.experiments.rank_processes import communicate, last_json, last_words
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
              even_splits: bool = False, extra_args: Sequence[str] = (), rendezvous_port: int | None = None) -> GroupRun:
    """Every rank runs ``calls`` (OP:ALGO,...) for each length in ``elements``. With ``manager`` and
    ``server``, an in-network aggregation job is started for the group first and ended after. With
    ``rendezvous_port``, the ranks are not told each other's addresses: they meet at the store rank 0
    runs on its host and that port, each registering the address it reaches it from."""
    run = GroupRun(list(hosts))
    ips = [str(lab.fabric.host(h).ip4.ip) for h in hosts]
    where = (["--rendezvous", f"{ips[0]}:{rendezvous_port}", "--world-size", len(hosts)] if rendezvous_port
             else ["--peers", ",".join(ips)])
    common = [*where, "--calls", calls, "--elements", *elements, "--dtype", dtype, "--repeat", repeat,
              "--timeout", timeout, "--window", window, "--groups", edge_groups(lab, hosts)]
    if even_splits:
        common.append("--even-splits")
    common.extend(extra_args)  # further runner options (--rto, --silent-after, ...)
    if manager is not None and server is None:
        raise ValueError("an in-network run needs a host for the fallback aggregator (server)")
    job_cm = (in_network_job(lab, hosts, manager=manager, server=server, slots=slots) if manager is not None
              else nullcontext())
    with job_cm as job:
        extra = {h: job.worker_args(h) if job else [] for h in hosts}
        run.in_network = bool(job and job.in_network)
        t0 = time.monotonic()
        procs = {h: lab.host(h).popen([sys.executable, "-m", RUNNER, "--rank", str(r),
                                       *map(str, common), *extra[h]])
                 for r, h in enumerate(hosts)}
        for h, proc in procs.items():
            out, err = communicate(proc, deadline_s)
            report = last_json(out)
            if report is None:
                run.errors.append(f"{h}: {last_words(err, proc)}")
                continue
            run.reports.append(report)
            for c in report["calls"]:
                if not c["ok"]:
                    run.errors.append(f"{h} {c['op']}:{c['algo']} {c['elements']}: {c.get('error', 'wrong result')}")
        run.wall_s = time.monotonic() - t0
    if job is not None:
        run.agg_ops, run.server = job.agg_ops, job.server_stats
    return run
