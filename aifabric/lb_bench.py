"""Load-balancing modes compared on one k=4 fat-tree with the same flows: the measurement behind
`benchmarks/load_balance.py` and `aifabric bench lb`.

Every switch port's queue (and every host's uplink, with TBF) is limited to ``rate_pps``, so the
links are the bottleneck; every flow is offered at that rate, so a flow alone on its path gets
it and two flows sharing a link get half. For each mode the same seeded flows run (same hosts,
same source ports); the figures per run:

* throughput / ideal: the flows' mean delivery rate over the rate each would get on a
  non-blocking fabric (a permutation: every flow its full rate);
* core-link imbalance: max / mean of the packets on the 32 aggregation-core link directions;
* flow completion time p50 / p99, packets delivered out of order, lost;
* CPU busy share of the machine during the run.

Modes: ``ecmp``, ``spray`` (random member per packet), ``flowlet`` (gap ``flowlet_gap_us``) and
``te`` (ECMP plus Hedera's placement, a round shortly after the flows start; its measurement
source here is the flows' own sending rates as their senders pace them, not switch sampling).
"""
from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field

from aifabric.allreduce_lab import FRAME_BYTES, LinkPlan, cpu_times, limit_links
from aifabric.lab import Lab
from controller.lb import LbModes, Pin, TeOverrides
from controller.te.elephants import FlowCounts
from controller.te.engine import TeConfig, TrafficEngineer
from controller.te.flows import Flow
from hostagent.traffic import patterns
from hostagent.traffic.drive import run_traffic
from hostagent.traffic.flows import FlowSpec
from topologies.fabric import Role

MODES = ("ecmp", "spray", "flowlet", "te")
PATTERNS = ("permutation", "collective", "incast")
PAYLOAD = FRAME_BYTES - 42          # UDP payload of a full-size frame (Ethernet 14 + IPv4 20 + UDP 8)


@dataclass(frozen=True)
class LbPlan:
    rate_pps: int = 100
    packets: int = 400               # per flow: 4 s alone at 100 packets/s
    flowlet_gap_us: int = 50_000
    te_delay_s: float = 1.0          # TE's round this long after the flows start


@dataclass
class ModeRun:
    mode: str
    pattern: str
    seed: int
    flows: list[dict] = field(default_factory=list)
    core_links: dict[str, int] = field(default_factory=dict)
    cpu_busy: float = 0.0
    pins: int = 0

    def figures(self, plan: LbPlan, ideal_rate: dict[int, float]) -> dict:
        fcts = sorted(f["fct_s"] for f in self.flows if f["fct_s"])
        rates = [(f["delivered_bytes"] / PAYLOAD) / f["fct_s"] / ideal_rate[f["id"]]
                 for f in self.flows if f["fct_s"]]
        loads = list(self.core_links.values())
        mean = statistics.mean(loads) if loads else 0
        return {"mode": self.mode, "pattern": self.pattern, "seed": self.seed,
                "throughput_vs_ideal": round(statistics.mean(rates), 3) if rates else 0.0,
                "core_imbalance": round(max(loads) / mean, 2) if mean else None,
                "fct_p50_s": round(_pct(fcts, 50), 2) if fcts else None,
                "fct_p99_s": round(_pct(fcts, 99), 2) if fcts else None,
                "out_of_order": sum(f["out_of_order"] or 0 for f in self.flows),
                "lost": sum(f["lost"] for f in self.flows), "complete": sum(f["complete"] for f in self.flows),
                "flows": len(self.flows), "pins": self.pins, "cpu_busy": round(self.cpu_busy, 2),
                "per_flow": [{k: f[k] for k in ("src", "dst", "sport", "complete", "lost", "fct_s", "out_of_order",
                                                "sender_late_s", "error")} for f in self.flows]}


def _pct(values: list[float], p: float) -> float:
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def make_flows(lab: Lab, pattern: str, seed: int, plan: LbPlan) -> list[FlowSpec]:
    names = [h.name for h in lab.fabric.hosts]
    kw = dict(size=plan.packets, rate_pps=plan.rate_pps, payload=PAYLOAD)
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
    return {i: min(plan.rate_pps, plan.rate_pps / out_deg[f.src], plan.rate_pps / in_deg[f.dst])
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


def run_mode(lab: Lab, modes: LbModes, overrides: TeOverrides, mode: str, pattern: str, seed: int,
             plan: LbPlan) -> ModeRun:
    flows = make_flows(lab, pattern, seed, plan)
    modes.set("ecmp" if mode == "te" else mode, gap_us=plan.flowlet_gap_us)
    overrides.replace([])
    run = ModeRun(mode, pattern, seed)
    stop = threading.Event()
    te_thread = None
    if mode == "te":
        te_thread = threading.Thread(target=_te_round, args=(lab, overrides, flows, plan, stop, run))
        te_thread.start()
    before, cpu0 = core_links(lab), cpu_times()
    hosts = {n: lab.host(n) for n in {f.src for f in flows} | {f.dst for f in flows}}
    try:
        results = run_traffic(hosts, flows, quiet=2.0, deadline=plan.packets / plan.rate_pps * 4 + 20)
    finally:
        stop.set()
        if te_thread is not None:
            te_thread.join()
    cpu1 = cpu_times()
    after = core_links(lab)
    run.core_links = {k: after[k] - before[k] for k in after}
    run.cpu_busy = 1 - (cpu1[1] - cpu0[1]) / max(1e-9, cpu1[0] - cpu0[0])
    run.flows = [r.summary() for r in results]
    overrides.replace([])
    modes.set("ecmp")
    return run


def _te_round(lab: Lab, overrides: TeOverrides, flows: list[FlowSpec], plan: LbPlan,
              stop: threading.Event, run: ModeRun) -> None:
    """One Hedera round ``te_delay_s`` after the flows start, from the flows' sending rates."""
    if stop.wait(plan.te_delay_s + 1.0):       # run_traffic starts the senders 1 s after it is called
        return
    fabric = lab.fabric
    bytes_by_flow = {Flow.between(fabric.host(f.src), fabric.host(f.dst), f.sport, f.dport):
                     int(f.rate_pps * plan.te_delay_s * FRAME_BYTES) for f in flows}
    engineer = TrafficEngineer(lab.controller.model, lambda: FlowCounts(bytes_by_flow, plan.te_delay_s),
                               TeConfig(host_link_bps=plan.rate_pps * FRAME_BYTES * 8))

    def apply(rnd) -> None:
        pins = [Pin(e.switch, e.flow.src_ip, e.flow.dst_ip, e.flow.protocol, e.flow.src_port, e.flow.dst_port,
                    e.egress_port) for e in rnd.desired.values()]
        overrides.replace(pins)
        run.pins = len(pins)

    engineer.run_round(apply)


def setup(lab: Lab, plan: LbPlan) -> tuple[LbModes, TeOverrides]:
    limit_links(lab, LinkPlan(rate_pps=plan.rate_pps))
    return LbModes(lab.controller), TeOverrides(lab.controller)


def summarise(runs: list[dict]) -> list[dict]:
    """Medians over seeds, per (pattern, mode)."""
    keys = ("throughput_vs_ideal", "core_imbalance", "fct_p50_s", "fct_p99_s", "out_of_order", "lost", "cpu_busy")
    out = []
    for pattern in dict.fromkeys(r["pattern"] for r in runs):
        for mode in dict.fromkeys(r["mode"] for r in runs):
            sel = [r for r in runs if r["pattern"] == pattern and r["mode"] == mode]
            if sel:
                row = {"pattern": pattern, "mode": mode, "runs": len(sel)}
                for k in keys:
                    vals = [r[k] for r in sel if r[k] is not None]
                    row[k] = round(statistics.median(vals), 3) if vals else None
                out.append(row)
    return out
