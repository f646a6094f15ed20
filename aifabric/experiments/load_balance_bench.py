"""Load-balancing modes compared on one k=4 fat-tree with the same flows: the measurement behind
`benchmarks/load_balance.py` and `aifabric bench load-balance` (`bench lb` for short).

Every switch port's queue (and every host's uplink, with TBF) is limited to ``rate`` (bits/s,
aifabric.lab.links), so the links are the bottleneck; every flow sends full 1514-byte frames,
offered at the link's rate, so a flow alone on its path gets
it and two flows sharing a link get half. For each mode the same seeded flows run (same hosts,
same source ports); the figures per run:

* throughput / ideal: the flows' mean delivery rate over the rate each would get on a
  non-blocking fabric (a permutation: every flow its full rate);
* core-link imbalance: max / mean of the packets on the 32 aggregation-core link directions;
  beside it the floor for flows that each keep one path (ECMP, TE pins, PLB between its moves):
  each flow between pods crosses two of those directions, a mean of m = 2 x flows / 32 flows a
  direction, and flows of equal size on one path each put ceil(m) on some direction, so
  max / mean >= ceil(m) / m (on k=4, with at most four flows leaving and entering each pod, a core
  per flow reaches it). Splitting flows (spraying, flowlets, many moves) can go below it;
* flow completion time p50 / p99, packets delivered out of order, lost;
* CPU busy share of the machine during the run, and the switch processes' share of it;
* te: how long its rounds took from reading the samples to the last pin written (median and
  max over the rounds that changed a pin) and the writes' part of it.

Modes: ``ecmp``, ``spray`` (random member per packet), ``flowlet`` (gap ``flowlet_gap_us``) and
``static`` (ECMP, every flow pinned before it starts to a path spread evenly over the
links, `controller.load_balance.static`: DeepSeek's static routing); ``te`` (ECMP plus Hedera's loop, `controller.load_balance.te.loop.TeLoop`: the edge switches sample one
packet in ``te_one_in`` to the controller, and every ``te_period_s`` the controller detects the
elephants, places them with Global First Fit and installs the pins); ``plb`` (ECMP, with the
eBPF host agents of hostagent/agent moving a flow to another source port after ``N`` congested
PLB rounds of ``plb_round_s``) and ``plb+dcqcn`` (the same, and DCQCN setting the senders'
rates from CNPs); ``kernel-plb`` (ECMP, the same flows as TCP over IPv6 with DCTCP, and the
kernel's own PLB repathing them by flow label, `hostagent.load_balance_kernel_plb`: where the kernel has
DCTCP); ``disjoint`` and ``qp-scaling`` (ECMP, the hosts choosing their flows' source ports
with the fabric's hash: `aifabric.experiments.host_load_balance`). ECN marks every ECN-capable packet above ``ecn_threshold`` packets of queue (step
marking, as DCTCP's K); only the agents and DCTCP make packets ECN-capable, so the other modes
are never marked. Per run also: CE marks (the switches' ``ecn_marked`` counters), PLB repaths
and CNPs (the agents' counters; for ``kernel-plb`` the kernel's TCPPLBRehash). With
``int_queues`` the switches also add INT metadata to every flow's packets, and the collector's
reports give the egress queue depth at every hop: per run the hot port (the egress port with
the deepest mean queue) and the deepest queue seen.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from aifabric.experiments.host_load_balance import DEFAULT_QPS, HOST_MODES, merge_queue_pairs, spread
from aifabric.lab.cpu_meter import CpuMeter
from aifabric.lab.lab import Lab
from aifabric.lab.links import MTU_FRAME, LinkPlan, LinkRate, limit_links
from aifabric.lab.report import Failed
from controller.telemetry.entries import ECN_MARKED
from controller.telemetry.int_collector import CollectorSnapshot
from controller.load_balance import LbModes
from controller.load_balance.hash_paths import FiveTuple
from controller.load_balance.static import static_pins
from controller.load_balance.te.engine import TeConfig
from controller.load_balance.te.loop import TeLoop
from controller.telemetry.entries import EcnThresholds, TelemetryConfig, WatchRule
from hostagent import load_balance_kernel_plb as kernel_plb
from hostagent.agent.config import AgentConfig
from hostagent.agent.launch import start_agents
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.traffic import patterns
from hostagent.traffic.drive import run_traffic
from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec
from hostagent.traffic.ratecontrol import RATE_CONTROL_PORT
from topologies.fabric import Role

KERNEL_PLB = "kernel-plb"
STATIC = "static"
MODES = ("ecmp", "spray", "flowlet", "te", STATIC, "plb", "plb+dcqcn", KERNEL_PLB, *HOST_MODES)
AGENT_MODES = ("plb", "plb+dcqcn")
PATTERNS = ("permutation", "collective", "incast")
FRAME_BYTES = MTU_FRAME             # every flow's frames: full size
PAYLOAD = FRAME_BYTES - 42          # their UDP payload (Ethernet 14 + IPv4 20 + UDP 8)
UDP = 17


DEFAULT_RATE = LinkRate.parse("10M")   # every link direction: 812 full frames a second
FLOW_SECONDS = 4.0                  # a flow's length alone on its path: packets = this x rate
QUEUE_SECONDS = 10.24               # switch queues hold this long at the rate (1024 packets at 100/s)
SAMPLES_PER_S = 12.5                # TE samples per second of a flow at the full rate (one in 8 at 100/s)


@dataclass(frozen=True)
class LbPlan:
    """What a run does; ``packets``, ``queue_depth`` and ``te_one_in`` left None are scaled to
    the link's full frames a second (a flow lasts `FLOW_SECONDS` alone, a queue holds
    `QUEUE_SECONDS`, TE samples `SAMPLES_PER_S` packets of a flow a second), so the same seconds
    hold at every rate."""
    rate: LinkRate = DEFAULT_RATE
    packets: int | None = None       # per flow (None: FLOW_SECONDS at the rate)
    queue_depth: int | None = None   # switch queues, packets (None: QUEUE_SECONDS at the rate)
    flowlet_gap_us: int = 50_000
    te_period_s: float = 0.5         # a TE round every this many seconds
    te_one_in: int | None = None     # edge switches sample one packet in this many for TE (None: scaled)
    plb_round_s: float = 0.1         # PLB round: about one RTT with a few packets queued at 100 packets/s
    plb_rehash_rounds: int = PlbParams.rehash_rounds   # PLB's N: congested rounds before a repath
    ecn_threshold: int = 10          # packets of queue above which ECN-capable packets are marked
    int_queues: bool = False         # INT on the flows: queue depth per hop from the collector
    qps: int = DEFAULT_QPS           # qp-scaling: queue pairs (flows) a peer pair

    def __post_init__(self) -> None:
        if not self.packets_per_s >= 1:
            raise ValueError(f"link rate {self.rate}: carries less than one {FRAME_BYTES}-byte frame a second")
        scaled = {"packets": round(FLOW_SECONDS * self.packets_per_s),
                  "queue_depth": round(QUEUE_SECONDS * self.packets_per_s),
                  "te_one_in": max(2, round(self.packets_per_s / SAMPLES_PER_S))}
        for name, value in scaled.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        PlbParams(rehash_rounds=self.plb_rehash_rounds)      # a bad N is named before any bring-up
        if not self.plb_round_s > 0:
            raise ValueError(f"PLB round {self.plb_round_s * 1000:g} ms: must be positive")
        if not 1 <= self.qps <= self.packets:
            raise ValueError(f"QP scaling over {self.qps} queue pairs: 1..{self.packets} (the packets of a flow)")

    def links(self) -> LinkPlan:
        return LinkPlan(self.rate, queue_depth=self.queue_depth, frame_bytes=FRAME_BYTES)

    @property
    def packets_per_s(self) -> float:
        """The flows' full frames a link carries a second (a flow alone on its path is offered this)."""
        return self.rate.packets_per_s(FRAME_BYTES)

    @property
    def link_bps(self) -> float:
        return self.rate.bits_per_s(FRAME_BYTES)

    def telemetry(self) -> TelemetryConfig:
        """ECN step marking at ``ecn_threshold``; INT on the flows' UDP port if ``int_queues``."""
        k = self.ecn_threshold
        watch = (WatchRule(protocol=UDP, dst_ports=(ROCEV2_PORT, ROCEV2_PORT)),) if self.int_queues else ()
        return TelemetryConfig(ecn=EcnThresholds(kmin=k, kmax=k, pmax=1.0), int_enabled=self.int_queues,
                               watchlist=watch)

    @property
    def plb(self) -> PlbParams:
        return PlbParams(rehash_rounds=self.plb_rehash_rounds)

    def agent_config(self, mode: str, seed: int) -> AgentConfig:
        return AgentConfig(mode, round_s=self.plb_round_s, line_rate_bps=self.link_bps, seed=seed, plb=self.plb)


@dataclass
class ModeRun:
    mode: str
    pattern: str
    seed: int
    flows: list[dict] = field(default_factory=list)
    core_links: dict[str, int] = field(default_factory=dict)
    cpu_busy: float = 0.0
    switch_cpu: float = 0.0          # the switch processes' part of the machine's CPU
    pins: int = 0                    # te: pins installed at most at once; static: its pins
    pins_moved: int = 0              # te: pins a later round moved to another port
    te_rounds: list = field(default_factory=list)   # te: (s from start, elephants, placed, unplaced) per round
    pin_delays: list = field(default_factory=list)  # te: s from samples read to pins written, rounds that changed pins
    write_times: list = field(default_factory=list)  # te: s writing the pins of those rounds
    ce_marks: int = 0                # packets the switches marked CE
    agents: dict = field(default_factory=dict)   # plb modes: the agents' totals, summed over hosts
    queues: dict = field(default_factory=dict)   # int_queues: hot port, its mean queue, deepest queue

    def failed_flows(self) -> Failed | None:
        """Why the flows' figures are not measured: flows whose sender failed, in its words."""
        errors = [f"flow {f['id']} {f['src']}->{f['dst']}: {f['error']}" for f in self.flows if f["error"]]
        if not errors:
            return None
        return Failed("; ".join(errors[:3]) + (f" (and {len(errors) - 3} more flows)" if len(errors) > 3 else ""))

    def figures(self, plan: LbPlan, ideal_rate: dict[int, float]) -> dict:
        fcts = sorted(f["fct_s"] for f in self.flows if f["fct_s"])
        rates = [(f["delivered_bytes"] / PAYLOAD) / f["fct_s"] / ideal_rate[f["id"]]
                 for f in self.flows if f["fct_s"]]
        loads = list(self.core_links.values())
        mean = statistics.mean(loads) if loads else 0
        senders = self.failed_flows()
        timed = senders or (None if fcts else Failed("no flow completed"))    # throughput and FCT need one
        return {"mode": self.mode, "pattern": self.pattern, "seed": self.seed,
                "throughput_vs_ideal": timed or round(statistics.mean(rates), 3),
                "core_imbalance": round(max(loads) / mean, 2) if mean else None,
                "core_imbalance_floor": imbalance_floor(self.flows, len(loads)),
                "fct_p50_s": timed or round(_pct(fcts, 50), 2),
                "fct_p99_s": timed or round(_pct(fcts, 99), 2),
                "out_of_order": senders or sum(f["out_of_order"] or 0 for f in self.flows),
                "lost": senders or sum(f["lost"] for f in self.flows),
                "complete": senders or sum(f["complete"] for f in self.flows),
                "flows": len(self.flows), "pins": self.pins, "pins_moved": self.pins_moved, "te_rounds": self.te_rounds, "ce_marks": self.ce_marks,
                "repaths": self.agents.get("repaths"), "cnps": self.agents.get("cnps_sent"), "cpu_busy": round(self.cpu_busy, 2),
                "switch_cpu": round(self.switch_cpu, 3),
                "te_round_ms": _ms(statistics.median(self.pin_delays)) if self.pin_delays else None,
                "te_round_max_ms": _ms(max(self.pin_delays)) if self.pin_delays else None,
                "te_write_ms": _ms(statistics.median(self.write_times)) if self.write_times else None,
                "hot_port": self.queues.get("hot_port"), "hot_queue_mean": self.queues.get("hot_queue_mean"),
                "queue_max": self.queues.get("queue_max"),
                "per_flow": [{k: f[k] for k in ("src", "dst", "sport", "complete", "lost", "fct_s", "out_of_order",
                                                "sender_late_s", "error")} for f in self.flows]}


def imbalance_floor(flows: list[dict], directions: int) -> float | None:
    """A lower bound of the core imbalance of ``flows`` (equal sizes) placed on one path each."""
    between = sum(patterns.pod_of(f["src"]) != patterns.pod_of(f["dst"]) for f in flows)
    if not between or not directions:
        return None
    mean = 2 * between / directions
    return round(math.ceil(mean) / mean, 2)


def _ms(seconds: float) -> float:
    return round(1000 * seconds, 1)


def _pct(values: list[float], p: float) -> float:
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def make_flows(lab: Lab, pattern: str, seed: int, plan: LbPlan) -> list[FlowSpec]:
    names = [h.name for h in lab.fabric.hosts]
    kw = dict(size=plan.packets, rate_pps=plan.packets_per_s, payload=PAYLOAD)
    if pattern == "permutation":
        return patterns.permutation(names, seed, **kw)
    if pattern == "collective":
        return patterns.collective(names, seed, **kw)
    if pattern == "incast":
        return patterns.incast(names, names[-1], 4, seed=seed, **kw)
    raise ValueError(f"pattern {pattern!r}: one of {', '.join(PATTERNS)}")


def ideal_rates(lab: Lab, flows: list[FlowSpec], plan: LbPlan) -> dict[int, float]:
    """Each flow's rate on a non-blocking fabric: its share of its sender's and receiver's link."""
    out_deg: dict[str, int] = {}
    in_deg: dict[str, int] = {}
    for f in flows:
        out_deg[f.src] = out_deg.get(f.src, 0) + 1
        in_deg[f.dst] = in_deg.get(f.dst, 0) + 1
    rate = plan.packets_per_s
    return {i: min(rate, rate / out_deg[f.src], rate / in_deg[f.dst])
            for i, f in enumerate(flows)}


def core_links(lab: Lab) -> dict[str, int]:
    """Packets sent so far on every aggregation -> core and core -> aggregation link."""
    fabric, ctl = lab.fabric, lab.controller
    cores = {s.name for s in fabric.switches if s.role == Role.CORE}
    out = {}
    for sw in fabric.switches:
        if sw.role not in (Role.AGGREGATION, Role.CORE):
            continue
        counters = ctl.read_port_counters(sw.name)
        for port, peer in fabric.ports_of(sw.name).items():
            if (sw.name in cores) != (peer in cores):
                out[f"{sw.name}->{peer}"] = counters[port].packets if port in counters else 0
    return out


def run_mode(lab: Lab, modes: LbModes, te: TeLoop, mode: str, pattern: str, seed: int, plan: LbPlan) -> ModeRun:
    flows = make_flows(lab, pattern, seed, plan)
    modes.set(mode if mode in ("spray", "flowlet") else "ecmp", gap_us=plan.flowlet_gap_us)
    parents = None                  # host modes: the flow each of theirs stands for
    if mode in HOST_MODES:
        flows, parents = spread(lab.controller, mode, flows, seed, plan.qps)
    run = ModeRun(mode, pattern, seed)
    hosts = {n: lab.host(n) for n in {f.src for f in flows} | {f.dst for f in flows}}
    agents, addr_of = None, None
    if mode == KERNEL_PLB:
        flows = kernel_plb.as_tcp(flows)
        addr_of = lambda name: str(lab.fabric.host(name).ip6.ip)  # noqa: E731  (the kernel labels IPv6 only)
        for name in {f.src for f in flows}:
            kernel_plb.enable(hosts[name], plan.plb)
        rehashed0 = sum(kernel_plb.rehashes(h) for h in hosts.values())
    if mode in AGENT_MODES:      # started first: compiling their programs costs a second of CPU each
        agents = start_agents(hosts, plan.agent_config(mode, seed), Path(lab.log_dir) / "lb-agents")
    if lab.collector is not None:
        lab.collector.reset_flows()
    before, marks0, cpu = core_links(lab), ce_marks(lab), CpuMeter(lab.switch_pids)
    if mode == "te":
        te.start()
    if mode == STATIC:
        te.overrides.replace(static_pins(lab.controller, [FiveTuple(f.src, f.dst, f.sport, f.dport, f.protocol)
                                                          for f in flows]))
        run.pins = len(te.overrides.pins)
    try:
        results = run_traffic(hosts, flows, quiet=2.0, deadline=plan.packets / plan.packets_per_s * 4 + 20,
                              addr_of=addr_of, rate_control_port=RATE_CONTROL_PORT if mode == "plb+dcqcn" else 0)
    finally:
        if mode == STATIC:
            te.overrides.replace([])
        if mode == "te":
            te.stop()
            run.pins = max((len(r.desired) for r in te.rounds), default=0)
            run.pins_moved = te.pins_moved
            run.te_rounds = [(round(t, 2), len(r.elephants), len(r.placement.placed), len(r.unplaced))
                             for t, r in zip(te.round_times, te.rounds)]
            run.pin_delays, run.write_times = list(te.pin_delays), list(te.write_times)
        if agents is not None:
            run.agents = agents.totals()
            agents.stop()
        if mode == KERNEL_PLB:
            run.agents = {"repaths": sum(kernel_plb.rehashes(h) for h in hosts.values()) - rehashed0}
            for name in {f.src for f in flows}:
                kernel_plb.disable(hosts[name])
    share = cpu.read()
    after = core_links(lab)
    run.ce_marks = ce_marks(lab) - marks0
    run.core_links = {k: after[k] - before[k] for k in after}
    run.cpu_busy, run.switch_cpu = share.busy, share.switches
    run.flows = [r.summary() for r in results]
    if parents is not None:
        run.flows = merge_queue_pairs(run.flows, parents)
    if plan.int_queues and lab.collector is not None:
        lab.collector.wait_quiet()
        run.queues = hot_port(lab.collector.snapshot(), {s.device_id: s.name for s in lab.fabric.switches})
    modes.set("ecmp")
    return run


def hot_port(snap: CollectorSnapshot, names: dict[int, str]) -> dict:
    """From the INT reports of a run: the egress port whose packets met the deepest mean queue
    (over every report of every flow through it), that mean, and the deepest queue any report saw."""
    n: dict[tuple, int] = {}
    total: dict[tuple, float] = {}
    deepest = 0
    for flow in snap.flows.values():
        for hop in flow.hops:
            if hop.queue_mean is None:
                continue
            key = (hop.switch_id, hop.egress_port)
            n[key] = n.get(key, 0) + hop.samples
            total[key] = total.get(key, 0.0) + hop.queue_mean * hop.samples
            deepest = max(deepest, hop.queue_max or 0)
    if not n:
        return {}
    hot = max(n, key=lambda k: total[k] / n[k])
    return {"hot_port": f"{names.get(hot[0], hot[0])}:{hot[1]}", "hot_queue_mean": round(total[hot] / n[hot], 2),
            "queue_max": deepest, "reports": sum(f.reports for f in snap.flows.values())}


def ce_marks(lab: Lab) -> int:
    """Packets marked CE so far, all switches and ports."""
    return sum(c.packets for sw in lab.fabric.switches
               for c in lab.controller.read_port_counters(sw.name, ECN_MARKED).values())


def setup(lab: Lab, plan: LbPlan) -> tuple[LbModes, TeLoop]:
    limit_links(lab, plan.links())
    te = TeLoop(lab.controller, TeConfig(host_link_bps=plan.link_bps),
                period_s=plan.te_period_s, one_in=plan.te_one_in)
    return LbModes(lab.controller), te


def summarise(runs: list[dict]) -> list[dict]:
    """Medians over seeds, per (pattern, mode); failed where a seed's figure failed (with why)."""
    keys = ("throughput_vs_ideal", "core_imbalance", "core_imbalance_floor", "fct_p50_s", "fct_p99_s", "out_of_order", "lost",
            "pins_moved", "repaths", "cnps", "ce_marks", "cpu_busy", "switch_cpu", "te_round_ms", "te_round_max_ms",
            "te_write_ms", "hot_queue_mean", "queue_max")
    out = []
    for pattern in dict.fromkeys(r["pattern"] for r in runs):
        for mode in dict.fromkeys(r["mode"] for r in runs):
            sel = [r for r in runs if r["pattern"] == pattern and r["mode"] == mode]
            if sel:
                row = {"pattern": pattern, "mode": mode, "runs": len(sel)}
                for k in keys:
                    failed = [f"seed {r['seed']}: {r[k].why}" for r in sel if isinstance(r[k], Failed)]
                    vals = [r[k] for r in sel if r[k] is not None]
                    if failed:
                        row[k] = Failed("; ".join(failed))
                    else:
                        row[k] = round(statistics.median(vals), 3) if vals else None
                out.append(row)
    return out
