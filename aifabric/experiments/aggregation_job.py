"""An in-network aggregation job around a run, for every lab that sums in the switches.

    with in_network_job(lab, hosts, manager=manager, server="p3e1h1") as job:
        ... start the ranks with job.worker_args(host) ...
    job.agg_ops, job.server_stats       # what the switches and the fallback aggregator saw

On entry: one job per group of hosts on the switches (`controller.aggregation.JobManager`), and
one parameter server on ``server`` as every job's fallback aggregator, listening before the
ranks start; the switches' ``agg_ops`` counters are read. On exit, even after an error: the
counters read again (the difference is the run's), the parameter server stopped (its report
kept) and every job ended, so its slots go back to the pool.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from aifabric.experiments.rank_processes import communicate, last_json
from aifabric.lab.lab import Lab
from controller.aggregation import Job, JobManager
from controller.aggregation.entries import AGG_OPS, OUTCOMES
from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, DEFAULT_SLOTS, MAX_FRAME_VALUES

# The training workloads' jobs keep 8 chunks in flight, not 32: the workloads' calls, scaled down
# with the links, are a few dozen frames, and 8 keep those links busy (calls within 5% of the
# latency-aware model, which counts the window). Chosen when a float32 call still sent a zero frame
# per slot before its data (its first exponents, now agreed in the call's header): 32 slots then
# doubled a call's frames (DP8 on the fat-tree: 2.49 s at 1 Mbit/s, 1.75 s at 4; with 8: 1.73, 1.70).
WORKLOAD_SLOTS = 8
# The lab's jobs carry the largest frame a 1500-byte MTU holds: softswitch and BMv2 cost mostly per
# packet, so SwitchML's 64-value frames (sized for a Tofino's pipeline) would make a frame cost a
# switch what a full ring frame does for a fifth of the values. 64 stays a job's choice.
LAB_FRAME_VALUES = MAX_FRAME_VALUES


@dataclass
class AggregationJob:
    """The jobs of one run (one per group) and, once the run is over, what it cost the switches."""
    jobs: list[Job]
    server: str
    slots: int
    agg_ops: dict[str, int] = field(default_factory=dict)     # per outcome, during the run
    server_stats: dict = field(default_factory=dict)          # the fallback aggregator's report

    @property
    def in_network(self) -> bool:
        """Every job in the switches (a job the slot pool could not hold runs on the aggregator)."""
        return all(j.in_network for j in self.jobs)

    @property
    def tree(self) -> str:
        return "; ".join(j.tree.describe() for j in self.jobs if j.tree)

    def job_of(self, host: str) -> Job:
        for j in self.jobs:
            if host in j.workers:
                return j
        raise KeyError(f"{host} is a worker of none of the jobs {[j.job_id for j in self.jobs]}")

    def config(self, host: str) -> dict[str, object]:
        """The host's worker configuration (job id, worker id on the wire, rank, aggregator's IP)."""
        return self.job_of(host).worker_config(host)

    def worker_args(self, host: str) -> list[str]:
        """The options hostagent's rank programs take for their in-network job."""
        c = self.config(host)
        return ["--aggregator", str(c["aggregator"]), "--job", str(c["job_id"]), "--worker-id", str(c["worker_id"]),
                "--slots", str(self.slots), "--frame-values", str(c["frame_values"])]


def read_agg_ops(lab: Lab) -> dict[str, int]:
    """The switches' aggregation outcomes so far, summed over every switch."""
    assert lab.controller is not None
    total = dict.fromkeys(OUTCOMES, 0)
    for sw in lab.fabric.switches:
        for index, c in lab.controller.read_port_counters(sw.name, AGG_OPS).items():
            if index < len(OUTCOMES):
                total[OUTCOMES[index]] += c.packets
    return total


@contextmanager
def in_network_jobs(lab: Lab, groups: Sequence[Sequence[str]], *, manager: JobManager, server: str,
                    slots: int = DEFAULT_SLOTS, in_network: bool = True,
                    frame_values: int = LAB_FRAME_VALUES) -> Iterator[AggregationJob]:
    """A job per group of hosts (a host in one group only: its worker binds the aggregation
    port), ``server`` the fallback aggregator of all; ``in_network=False`` routes every job to
    the parameter server alone."""
    agg = AggregationJob([], server, slots)
    ps_proc = None
    try:
        for hosts in groups:
            agg.jobs.append(manager.start(list(hosts), server, slots=slots, in_network=in_network,
                                          frame_values=frame_values))
        specs = [a for j in agg.jobs for a in ("--job", f"{j.job_id}:{len(j.workers)}:{slots}:{j.frame_values}")]
        ps_proc = lab.host(server).popen([sys.executable, "-m", "hostagent.collectives", "ps", *specs])
        wait_listening(lab.host(server), ps_proc)
        before = read_agg_ops(lab)
        try:
            yield agg
        finally:
            after = read_agg_ops(lab)
            agg.agg_ops = {k: after[k] - before[k] for k in OUTCOMES}
    finally:
        if ps_proc is not None:
            ps_proc.terminate()
            out, _ = communicate(ps_proc, 10)
            agg.server_stats = last_json(out) or {}
        for j in agg.jobs:
            manager.end(j)


@contextmanager
def in_network_job(lab: Lab, hosts: Sequence[str], *, manager: JobManager, server: str,
                   slots: int = DEFAULT_SLOTS, in_network: bool = True,
                   frame_values: int = LAB_FRAME_VALUES) -> Iterator[AggregationJob]:
    """`in_network_jobs` with one group."""
    with in_network_jobs(lab, [hosts], manager=manager, server=server, slots=slots, in_network=in_network,
                         frame_values=frame_values) as agg:
        yield agg


def wait_listening(host, proc, timeout: float = 10.0) -> None:
    """Until the parameter server's UDP port is bound in ``host``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"parameter server on {host.name} exited: {proc.stderr.read().decode()[-300:]}")
        if f":{AGG_UDP_PORT:04x} " in host.cmd("cat /proc/net/udp").lower():
            return
        time.sleep(0.05)
    raise RuntimeError(f"parameter server on {host.name} did not bind its port within {timeout:.0f} s")
