"""`aifabric train`: a training workload (aifabric.workloads) executed on a running fabric, one
`python -m hostagent.workload_runner` per rank on the host its placement gives it. The plan file
hands every rank its ops and the process groups (the world, every collective's group, every
send/recv pair), each group on its own UDP port. Reports per iteration and rank step time, compute,
exposed communication and time per collective kind, draws a timeline per rank and writes JSON.
Collectives run by ring (the library's host algorithms); with a job manager the data-parallel
all-reduces are summed in the switches instead (`in_network_groups`: one in-network job per DP
group, a host that is no rank as every job's fallback aggregator). Every run also reads the
link load (aifabric.experiments.link_load) and sets the analytic estimate of the same iteration
(aifabric.workloads.estimate, on the emulated links, in-network or ring) beside each measured one.
With ``host_agent`` (hostagent.agent.config.AgentConfig: plb, dcqcn or plb+dcqcn) the ranks'
hosts run the eBPF host agents for the run and the ranks send RoCEv2-like (hostagent.collectives
.rocev2), so PLB repaths their flows and DCQCN paces them; the agents' summed counters are
reported (`WorkloadRun.agents`).
"""
from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES, WORKLOAD_SLOTS, in_network_jobs
from aifabric.experiments.collectives_bench import min_rto_s
from aifabric.experiments.failure_schedule import (FOR_GOOD, FailureSchedule, clean_median, effective_ratio, locate,
                                                 time_lost)
from aifabric.experiments.host_agents import agents_on, rocev2_settings
from aifabric.experiments.job_restarts import Attempt, kept_seconds, replace_lost, restart_costs
from aifabric.experiments.link_load import LinkLoad, link_counters
from aifabric.experiments.rank_ports import disjoint_group_ports, queue_pair_ports, ring_pairs
from aifabric.experiments.rank_processes import collect_ranks
from aifabric.experiments.warm_ranks import WarmRanks
from aifabric.lab.cpu_meter import busy_between, cpu_times
from aifabric.lab import report
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan
from aifabric.workloads import Workload, estimate
from aifabric.workloads.estimate import in_switches
from aifabric.workloads.latency import Costs, fabric_hops
from controller.aggregation import JobManager
from controller.load_balance.hash_paths import FiveTuple, HashPaths
from hostagent.agent.config import AgentConfig
from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, frame_bytes
from hostagent.congestion import CcSettings
from hostagent.workload_runner import progress as ranks_progress
from hostagent.workload_runner.checkpoint import resume_iteration

BASE_PORT = 48000
RANK_WINDOW = 64         # packets in flight per link of a rank's process groups (the library's default)
SEED_PORTS = 97          # a seed's port shift: more than a workload's groups, and odd so hashes move
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


def base_port(seed: int) -> int:
    """The first group's UDP port under ``seed`` (the others follow it, one a group)."""
    return BASE_PORT + SEED_PORTS * seed


def workload_flows(workload: Workload, seed: int = 0, ports: list[list[int]] | None = None) -> list[FiveTuple]:
    """The flows the ranks' groups carry (`rank_ports.ring_pairs`; what ``static`` load balancing
    pins), on the ports `run_workload` gives them (``ports``: each member's own, as ``disjoint``
    chooses them)."""
    hosts, groups, pairs = _talking(workload)
    port = _ports(groups, seed, ports)
    return [FiveTuple(hosts[a], hosts[b], port[(i, a)], port[(i, b)]) for i, a, b in pairs if hosts[a] != hosts[b]]


def disjoint_ports(controller, workload: Workload, seed: int = 0) -> list[list[int]]:
    """Each member's port in each group, chosen with the fabric's hash (`rank_ports`)."""
    hosts, groups, pairs = _talking(workload)
    with HashPaths.of(controller) as paths:
        return disjoint_group_ports(paths, hosts, groups, pairs, range(base_port(seed), AGG_UDP_PORT), seed,
                                    group_bytes(workload, groups))


def qp_ports_for(controller, workload: Workload, qps: int, seed: int = 0) -> list[list[list[int]]]:
    """Each member's queue pairs' source ports in each group (after the first, its group's port),
    chosen with the fabric's hash so that its queue pairs to a peer take distinct paths where
    there are that many (`rank_ports.queue_pair_ports`)."""
    hosts, groups, pairs = _talking(workload)
    port = _ports(groups, seed, None)
    own = [[port[(i, r)] for r in g] for i, g in enumerate(groups)]
    free = range(base_port(seed) + len(groups), AGG_UDP_PORT)
    with HashPaths.of(controller) as paths:
        return queue_pair_ports(paths, hosts, groups, pairs, own, qps, free, seed)


def group_bytes(workload: Workload, groups: list[list[int]]) -> list[float]:
    """Per group, the bytes its communication ops name in an iteration (at least 1)."""
    index = {tuple(g): i for i, g in enumerate(groups)}
    total = [0.0] * len(groups)
    for op in workload.all_ops():
        if op.is_compute:
            continue
        key = tuple(sorted(op.group)) if op.kind.value in ("send", "recv") else tuple(op.group)
        if key in index:
            total[index[key]] += op.bytes
    return [max(t, 1.0) for t in total]


def _talking(workload: Workload) -> tuple[list[str], list[list[int]], list]:
    if workload.placement is None:
        raise ValueError("the workload needs a placement on the fabric's hosts (aifabric.workloads.place)")
    hosts = [workload.placement.host(r) for r in range(workload.job.parallelism.world)]
    groups = groups_of(workload)
    all_to_all = {tuple(op.group) for op in workload.all_ops() if op.kind.value == "all_to_all"}
    return hosts, groups, ring_pairs(groups, all_to_all)


def _ports(groups: list[list[int]], seed: int, ports: list[list[int]] | None) -> dict[tuple[int, int], int]:
    """(group index, rank) -> the port it binds: the group's, or its own from ``ports``."""
    base = base_port(seed)
    if ports is None:
        return {(i, r): base + i for i, g in enumerate(groups) for r in g}
    return {(i, r): ports[i][k] for i, g in enumerate(groups) for k, r in enumerate(g)}


def in_network_groups(workload: Workload) -> list[list[int]]:
    """The groups whose all-reduces the switches sum: every data-parallel group, in first use. A
    rank is in one at most (its worker binds the aggregation port): a later group with a rank
    already taken (MoE's expert-DP beside the dense DP group) stays on the ring."""
    taken: set[int] = set()
    groups: list[list[int]] = []
    for op in workload.all_ops():
        if in_switches(op) and list(op.group) not in groups and not taken & set(op.group):
            groups.append(list(op.group))
            taken |= set(op.group)
    return groups


def comm_streams(workload: Workload) -> int:
    """The most streams of communication one rank runs at once (DP, TP, PP, EP: each its own
    process group's window on the rank's one host link)."""
    return max((len({op.stream for op in ops if not op.is_compute}) for ops in workload.ranks), default=1) or 1


def timeouts_for(link: LinkPlan | None, streams: int = 1) -> dict:
    """The ranks' transport settings on links limited by ``link``: the first retransmission
    timeout is the time the full windows of a rank's ``streams`` take through its host link (the
    largest frames), the in-network resend timeout that of two windows of aggregation frames.
    With one window's time where a rank's TP, DP and PP groups sent at once, their queue outgrew
    it: DP2 x TP2 x PP2 at 4 Mbit/s resent 5,021 packets that had arrived and took 2.16x its
    estimate; with the three windows' time, 5 and 1.18x. Not limited (None): the library's defaults."""
    if link is None:
        return {}
    return {"window": RANK_WINDOW, "rto_s": min_rto_s(link, RANK_WINDOW * streams),
            "agg_timeout_s": max(0.1, link.rate.seconds(frame_bytes(LAB_FRAME_VALUES), 2 * WORKLOAD_SLOTS))}


def free_host(lab: Lab, hosts: list[str]) -> str:
    """A host of the fabric that runs no rank: the in-network jobs' fallback aggregator."""
    for h in lab.fabric.hosts:
        if h.name not in hosts:
            return h.name
    raise ValueError(f"in-network collectives need a host that runs no rank for the fallback aggregator: "
                     f"all {len(hosts)} hosts of {lab.fabric.describe()} are ranks")


def plan_of(workload: Workload, addresses: list[str], iterations: int, base_port: int = BASE_PORT) -> dict:
    return {"addresses": addresses, "groups": groups_of(workload), "iterations": iterations, "base_port": base_port,
            "ops": [[op.to_dict() for op in ops] for ops in workload.ranks]}


@dataclass
class WorkloadRun:
    hosts: list[str]
    reports: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cpu_busy: float = 0.0
    wall_s: float = 0.0
    in_network: bool = False           # every DP group's job in the switches
    agg_ops: dict[str, int] = field(default_factory=dict)
    server_stats: dict = field(default_factory=dict)
    link_load: dict = field(default_factory=dict)
    estimate: dict = field(default_factory=dict)      # the link-bound analytic step on the emulated links
    latency_estimate: dict = field(default_factory=dict)   # the latency-aware one, with a calibration's costs
    agents: dict = field(default_factory=dict)        # with host agents: their counters summed over hosts
    failures: list[dict] = field(default_factory=list)   # with a failure schedule: each event, the iteration it hit
    time_lost: dict[str, dict] = field(default_factory=dict)   # failure -> iterations it overlapped, time lost
    effective_ratio: float | None = None   # with failures: useful training time over the iterations' wall time
    restarts: list[dict] = field(default_factory=list)   # each failed attempt the job restarted from its checkpoint
    first_iteration: int = 0           # the reports' first iteration: where the last attempt resumed

    def slowest(self, i: int) -> dict:
        return max((r["iterations"][i] for r in self.reports), key=lambda it: it["step_s"])

    def comparison_rows(self) -> list[tuple]:
        """Per iteration: measured step (slowest rank) beside the link-bound estimate and the
        latency-aware one (where calibrated), measured / each, and exposed communication beside
        the latency-aware estimate's (else the link-bound one's)."""
        bound, aware = self.estimate, self.latency_estimate or {}
        exposed = (aware or bound)["exposed_comm_s"]
        rows = []
        for i in range(len(self.reports[0]["iterations"])):
            it = self.slowest(i)
            rows.append((self.first_iteration + i, it["step_s"], bound["step_s"], _ratio(it["step_s"], bound["step_s"]),
                         aware.get("step_s", "-"), _ratio(it["step_s"], aware.get("step_s")),
                         it["exposed_comm_s"], exposed))
        return rows

    def kind_rows(self, i: int = -1) -> list[tuple]:
        """Per collective kind, iteration ``i``: the most any rank spent in it, beside each estimate's."""
        measured: dict[str, float] = {}
        for r in self.reports:
            for k, v in r["iterations"][i]["comm_by_kind_s"].items():
                measured[k] = max(measured.get(k, 0.0), v)
        bound, aware = self.estimate.get("comm_s_by_kind", {}), self.latency_estimate.get("comm_s_by_kind", {})
        return [(k, v, bound.get(k, "-"), _ratio(v, bound.get(k)), aware.get(k, "-"), _ratio(v, aware.get(k)))
                for k, v in sorted(measured.items())]

    def summary(self) -> dict:
        return {"hosts": self.hosts, "ok": self.ok, "errors": self.errors, "cpu_busy": round(self.cpu_busy, 3),
                "wall_s": round(self.wall_s, 2), "in_network": self.in_network, "agg_ops": self.agg_ops,
                "server": self.server_stats, "link_load": self.link_load, "estimate": self.estimate,
                "latency_estimate": self.latency_estimate,
                "agents": self.agents, "resent": self.resent, "repaths": self.repaths, "cc": self.cc, "paused_s": self.paused_s, "failures": self.failures,
                "time_lost": self.time_lost, "effective_ratio": self.effective_ratio, "restarts": self.restarts,
                "first_iteration": self.first_iteration,
                "iterations": [{k: v for k, v in self.slowest(i).items() if k != "ops"}
                               for i in range(len(self.reports[0]["iterations"]))] if self.ok else []}

    @property
    def ok(self) -> bool:
        return not self.errors and len(self.reports) == len(self.hosts)

    @property
    def paused_s(self) -> float:
        """Seconds PFC held the ranks' sends, summed over ranks (0 without a lossless class)."""
        return round(sum(r.get("paused_s", 0.0) for r in self.reports), 3)

    @property
    def cc(self) -> dict | None:
        """The ranks' congestion control in their transport, its figures summed (None: none ran)."""
        ccs = [r["cc"] for r in self.reports if r.get("cc")]
        if not ccs:
            return None
        return {"name": ccs[0]["name"], **{k: round(sum(c[k] for c in ccs), 3) for k in ("samples", "losses", "paced_s")}}

    @property
    def repaths(self) -> int:
        """How often the ranks' flows moved to another path by themselves (`repath`), summed."""
        return sum(r.get("repaths", 0) for r in self.reports)

    @property
    def resent(self) -> int:
        """Packets the ranks sent again over the run (their transports' and in-network frames')."""
        return sum(sum(r["resent"].values()) for r in self.reports)

    def iteration_rows(self) -> list[tuple]:
        rows = []
        for i in range(len(self.reports[0]["iterations"])):
            its = [r["iterations"][i] for r in self.reports]
            slowest = max(its, key=lambda it: it["step_s"])
            kinds: dict[str, float] = {}
            for it in its:
                for k, v in it["comm_by_kind_s"].items():
                    kinds[k] = max(kinds.get(k, 0.0), v)
            rows.append((self.first_iteration + i, slowest["step_s"], slowest["compute_s"], slowest["exposed_comm_s"], slowest["idle_s"],
                         ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items()))))
        return rows


def class_settings(lab: Lab, klass: int, pfc: bool, hosts: list[str]) -> dict:
    """The plan's "lossless": the class's DSCP, its priority and, with ``pfc``, each rank's host's
    PFC state to honour; ValueError where the lab has no such class."""
    if lab.lossless is None:
        raise ValueError("a traffic class for the ranks needs a lab with classes: Lab(lossless=...)")
    c = lab.lossless.config.klass(klass)
    pause = lab.lossless.sender_pause() if pfc else {}
    return {"dscp": c.dscps[0], "priority": c.priority, "pause": {str(r): pause[h] for r, h in enumerate(hosts) if h in pause}}


@contextmanager
def _lossless_for(lab: Lab, job: str, klass: int):
    """Class ``klass`` lossless on every switch while the job runs."""
    lab.lossless.use(job, {klass})
    try:
        yield
    finally:
        lab.lossless.release(job)


def _ratio(a: float, b: float | None) -> float | str:
    return a / b if b else "-"


def _figures(est) -> dict:
    """An estimate's slowest rank as the run reports it."""
    r = est.slowest
    return {"step_s": r.step_s, "compute_s": r.compute_s, "exposed_comm_s": r.exposed_comm_s,
            "comm_s_by_kind": r.comm_s_by_kind}


def run_workload(lab: Lab, workload: Workload, iterations: int, plan_path: str | Path, *, timeout: float = 60.0,
                 silent_after: float = 5.0, deadline_s: float = 600.0, manager: JobManager | None = None,
                 link: LinkPlan | None = None, seed: int = 0, kill_rank_after: tuple[int, float] | None = None,
                 host_agent: AgentConfig | None = None, costs: Costs | None = None,
                 failures: FailureSchedule | None = None, klass: int | None = None, pfc: bool = True,
                 ports: list[list[int]] | None = None, repath: bool = False,
                 cc: CcSettings | None = None, qps: int = 1, qp_ports: list | None = None,
                 checkpoint_every: int = 0,
                 restarts: int = 0) -> WorkloadRun:
    """Every rank's ops, ``iterations`` times; with ``manager`` the data-parallel all-reduces in
    the switches. ``link``: how the links are limited (None: not), for the link load's shares and
    the ranks' first retransmission timeouts. ``seed`` moves the
    groups' UDP ports (``SEED_PORTS`` apart), so ECMP hashes the same traffic onto other paths. ``kill_rank_after``
    (rank, seconds) kills that rank's process that long after the first iteration began, to show
    how a run ends when a host dies. ``host_agent``: the host agents' configuration, for a run under PLB and/or
    DCQCN (see the module doc). ``costs``: a calibration's constants (aifabric.experiments.calibration),
    for the latency-aware estimate beside the link-bound one. ``failures``: a schedule started with
    the ranks, its events placed in the iterations they hit (``run.failures``, ``run.time_lost``).
    ``klass``: one of the lab's traffic classes (``Lab(lossless=...)``) the ranks' packets go in
    (their DSCP), made lossless for the run with ``pfc`` (the ranks then hold their sends while
    their host's class is paused, on the Python host path). ``ports``: each member's port in
    each group (`disjoint_ports`; None: a group's members share its port). ``repath``: a flow that
    loses packets moves to another path by itself (hostagent.collectives.repath; on the Python
    host path). ``cc``: a congestion control (TIMELY or Swift) sets every flow's window and pacing
    in the ranks' transport (hostagent.collectives.peer_cc; on the Python host path;
    `FabricConditions.transport_cc` makes it for the fabric). ``qps`` > 1: every message to a peer
    is cut into that many parts, each from a source port of its own, so ECMP spreads a peer pair
    over that many flows (QP scaling, load-balancing mode ``qp-scaling``; on the Python host path),
    from ``qp_ports`` (`qp_ports_for`: chosen with the fabric's hash) where given, else from
    ports the kernel gives.
    ``checkpoint_every``: every rank saves the iteration it begins every so many (its checkpoint,
    hostagent.workload_runner.checkpoint); ``restarts``: up to that many times a failed attempt
    has every rank stopped at once and the job started again from the last checkpoint, a lost
    host's ranks on a spare host (`run.restarts`: what each cost and the hosts it replaced,
    aifabric.experiments.job_restarts)."""
    if workload.placement is None:
        raise ValueError("the workload needs a placement on the fabric's hosts (aifabric.workloads.place)")
    world = workload.job.parallelism.world
    hosts = [workload.placement.host(r) for r in range(world)]
    addresses = [str(lab.fabric.host(h).ip4.ip) for h in hosts]
    plan = {**plan_of(workload, addresses, iterations, base_port(seed)),
            **timeouts_for(link, comm_streams(workload))}
    shared = range(plan["base_port"], plan["base_port"] + len(plan["groups"]))    # a port a group
    if shared.stop > AGG_UDP_PORT:          # kept below it and the ring baseline's port above it
        raise ValueError(f"seed {seed}: the groups' UDP ports {shared.start}..{shared.stop - 1} would reach the "
                         f"aggregation port {AGG_UDP_PORT}, which the switches intercept; take a smaller seed")
    if ports is not None:
        if host_agent is not None:
            raise ValueError("ports of the ranks' own (disjoint) are not offered with the host agents' RoCEv2 framing")
        plan["ports"] = ports
    if host_agent is not None:
        plan.update(rocev2_settings(host_agent, hosts))
    if klass is not None:
        plan["lossless"] = class_settings(lab, klass, pfc, hosts)
    if repath:
        if host_agent is not None:
            raise ValueError("repath moves the ranks' own flows; with the host agents' RoCEv2 framing PLB moves them")
        plan["repath"] = True
    if cc is not None:
        if host_agent is not None:
            raise ValueError("a congestion control in the ranks' transport is not offered with the host agents' "
                             "RoCEv2 framing, whose flows DCQCN paces")
        plan["cc"] = asdict(cc)
    if qps > 1:
        if host_agent is not None or repath or ports is not None:
            raise ValueError("QP scaling spreads the ranks' own flows over source ports of their own: not with the host "
                             "agents' RoCEv2 framing, repath or ports chosen for the ranks (disjoint)")
        plan["qps"] = qps
        if qp_ports is not None:
            plan["qp_ports"] = qp_ports
    if restarts < 0 or checkpoint_every < 0:
        raise ValueError(f"restarts ({restarts}) and checkpoint_every ({checkpoint_every}) cannot be below 0")
    if failures is not None and any(f.kind == "host" for f in failures.planned):
        if host_agent is not None or ports is not None or qp_ports is not None or klass is not None:
            raise ValueError("a lost host's ranks move to a spare host, which has no host agent, lossless class or "
                             "ports chosen with the fabric's hash for them: host failures are not offered with the "
                             "host agents, --lossless, disjoint or hash-chosen queue-pair ports")
    run = WorkloadRun(hosts)
    groups = in_network_groups(workload) if manager is not None else []
    job_classes = (_lossless_for(lab, "train", klass) if klass is not None and pfc else nullcontext())
    where = Path(plan_path).resolve().parent
    progress, checkpoints = where / "progress", where / "checkpoints"      # rank 0's iterations begun; ranks' saves
    progress.unlink(missing_ok=True)
    shutil.rmtree(checkpoints, ignore_errors=True)       # a job of its own, not an earlier one's
    if checkpoint_every:
        plan["checkpoint"] = {"every": checkpoint_every, "dir": str(checkpoints)}
    attempts: list[Attempt] = []
    warm = WarmRanks(lab)
    with job_classes, agents_on(lab, hosts, host_agent, where / "agents") as agents:
        links0, cpu0, t0 = link_counters(lab), cpu_times(), time.monotonic()
        if failures is not None:
            failures.progress = failures.progress or progress
            failures.start(t0)
        try:
            for attempt in range(restarts + 1):
                start = resume_iteration(checkpoints, world) if attempt else 0
                lost = failures.lost_hosts() if failures is not None else set()
                hosts, replaced = replace_lost(lab.fabric, hosts, lost)
                if replaced:
                    report.progress("restarting on spare hosts: " + ", ".join(f"{a}'s ranks on {b}"
                                                                           for a, b in replaced.items()))
                    plan["addresses"] = [str(lab.fabric.host(h).ip4.ip) for h in hosts]
                    run.hosts = hosts
                attempts.append(Attempt(time.monotonic(), start, replaced=replaced))
                # a fresh in-network job (a new epoch on the switches) every attempt: the slots'
                # state of a failed one is not the new workers'
                jobs = (in_network_jobs(lab, [[hosts[r] for r in g] for g in groups], manager=manager,
                                        server=free_host(lab, hosts + sorted(lost)), slots=WORKLOAD_SLOTS)
                        if groups else nullcontext())
                with jobs as agg:
                    if agg is not None:
                        index = {tuple(g): i for i, g in enumerate(plan["groups"])}
                        plan["aggregation"] = {str(r): {"group": index[tuple(g)], "slots": agg.slots,
                                                        **{k: agg.config(hosts[r])[k] for k in ("job_id", "worker_id", "aggregator", "frame_values")}}
                                               for g in groups for r in g}
                        run.in_network = agg.in_network
                    Path(plan_path).write_text(json.dumps({**plan, "start": start}))
                    warm_before = warm.warm_launches
                    procs = [warm.launch(r, h, ["--rank", str(r), "--plan", str(Path(plan_path).resolve()),
                                                "--timeout", str(timeout), "--silent-after", str(silent_after),
                                                *(["--progress", str(progress)] if r == 0 else [])])
                             for r, h in enumerate(hosts)]
                    attempts[-1] = replace(attempts[-1], warm=warm.warm_launches - warm_before)
                    if attempt < restarts:       # standbys for the next attempt, warming while this one runs
                        warm.prepare_after(list(hosts), lambda start=start, since=attempts[-1].started:
                                           ranks_progress.begun_at(ranks_progress.read(progress), start, since)
                                           is not None)
                    if failures is not None:
                        failures.ranks, failures.hosts = procs, hosts
                    run.reports, run.errors = collect_ranks(hosts, procs, deadline_s,
                                                            None if attempt else kill_rank_after, begun=progress,
                                                            stop_on_failure=attempt < restarts)
                if agg is not None:
                    run.agg_ops, run.server_stats = agg.agg_ops, agg.server_stats
                if run.ok or attempt == restarts:
                    break
                attempts[-1] = replace(attempts[-1], errors=tuple(run.errors))
        finally:
            warm.close()
            if failures is not None:
                failures.stop()
        run.wall_s = time.monotonic() - t0
        run.cpu_busy = busy_between(cpu0, cpu_times())
        run.link_load = LinkLoad.between(lab, links0, link_counters(lab), run.wall_s,
                                        link.bits_per_s if link else 0.0).summary()
    if agents is not None:
        run.agents = agents.totals()      # after they stopped: their last write is final
    _account_failures(run, failures, attempts, ranks_progress.read(progress))
    hops = fabric_hops(lab.fabric, workload.placement)
    run.estimate = {**_figures(estimate(workload, emulated=True, in_network=bool(groups), hops=hops)),
                    "in_network": bool(groups)}
    if costs is not None:
        run.latency_estimate = {**_figures(estimate(workload, emulated=True, in_network=bool(groups), costs=costs,
                                                    hops=hops)), "in_network": bool(groups)}
    return run


def _account_failures(run: WorkloadRun, failures: FailureSchedule | None, attempts: list[Attempt],
                      begun: list[tuple[int, float]]) -> None:
    """Each restart's cost (``begun``: rank 0's progress entries); with a failure schedule its
    events placed in the iterations they hit and what each cost, a killed rank's failure the
    restart it caused; the effective training time ratio over every attempt."""
    run.first_iteration = attempts[-1].resumed_from
    run.restarts = restart_costs(attempts, begun)
    if failures is None and not run.restarts:
        return
    events = failures.events if failures is not None else []
    spans = locate(events, run.reports, run.first_iteration, begun)
    began = begun[0][1] if begun else (spans[0][0] if spans else attempts[0].started)   # the job's first iteration
    costs = time_lost(events, spans)
    run.effective_ratio = (effective_ratio(costs, spans, kept_seconds(attempts, begun), began) if run.restarts
                           else effective_ratio(costs, spans))
    clean = clean_median(costs, spans)
    run.time_lost = {text: {**c, "iterations": [run.first_iteration + i for i in c["iterations"]]}
                     for text, c in costs.items()}
    for restart, failed, nxt in zip(run.restarts, attempts, attempts[1:]):
        for e in events:
            if e.down and e.error is None and e.failure.kind in FOR_GOOD and failed.started <= e.at < nxt.started:
                run.time_lost[e.failure.text] = {"iterations": restart["redone"], "lost_s": restart["lost_s"],
                                                 "clean_median_s": None if clean is None else round(clean, 3)}
    if failures is not None:
        run.failures = [e.to_dict(began) for e in events]
        run.failures += [{"failure": f.text, "what": "not fired: the job ended first", "at_s": None,
                          "iteration": None, "error": None} for f in failures.missed()]


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
