"""The conditions a workload meets on a running fabric: links limited to one rate, and a
load-balancing mode on every switch.

`FabricConditions(lab, rate)` limits every switch port and every host uplink to one `LinkRate`
(aifabric.lab.links.limit_links: the links, not the CPU, should be the bottleneck) and holds the
lab's load-balancing state; ``with conditions.load_balancing(mode):``
runs what it wraps under ``mode`` and puts ECMP back after:

* ``ecmp``, ``spray`` (a random member per packet), ``flowlet`` (a gap of ``FLOWLET_GAP_PACKETS`` full frames' times): the
  switches' ``lb_mode`` (controller.load_balance.LbModes);
* ``te``: ECMP plus Hedera's loop (controller.load_balance.te.loop.TeLoop): the edge switches
  sample packets, and every ``TE_PERIOD_S`` the controller places the elephants and pins them;
* ``static``: ECMP, and the job's flows (given: `train_runner.workload_flows`) pinned before it
  starts, spread evenly over the paths (controller.load_balance.static, DeepSeek's static routing);
* ``disjoint``: ECMP, the ranks binding ports chosen with the fabric's hash so that their flows
  spread (`train_runner.disjoint_ports`, given to `run_workload`: HPN's precise path control);
* ``qp-scaling``: ECMP, every message of the ranks cut over ``QPS`` source ports of their own
  (`run_workload(qps=, qp_ports=)`: Meta's QP scaling, more flows for the hash to spread, their
  ports chosen with it, `train_runner.qp_ports_for`);
* ``plb``: ECMP in the switches, and the hosts' eBPF agents (hostagent.agent) moving a flow to
  another source port after ``PLB_REHASH_ROUNDS`` congested rounds of ``PLB_ROUND_PACKETS`` full frames' times.

Congestion feedback (`CONGESTION`): ``none``; ``dcqcn`` (the agents' DCQCN setting each
flow's rate from the receivers' CNPs); ``timely`` or ``swift`` (the ranks' own transport sets
each flow's pacing and window from its round trips: hostagent.collectives.peer_cc, the controls'
published defaults scaled to the links' rate and to the fabric's longest path by
`transport_cc`). PLB and DCQCN hear congestion as ECN marks: every switch port marks
ECN-capable packets above ``ECN_THRESHOLD`` packets of queue (step marking, as DCTCP's K and the
load-balancing benchmark's); only the agents' RoCEv2 traffic is ECN-capable, so the other modes
are never marked. Both act on RoCEv2-like flows, so a run under either
carries the collectives RoCEv2-like (hostagent.collectives.rocev2); `host_agent` gives the
agents' configuration a run passes to aifabric.experiments.train_runner.run_workload.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import networkx as nx

from aifabric.experiments.host_load_balance import DEFAULT_QPS
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate, limit_links, store_and_forward_rtt
from controller.load_balance import LbModes, TeOverrides
from controller.load_balance.hash_paths import FiveTuple
from controller.load_balance.static import static_pins
from controller.load_balance.te.engine import TeConfig
from controller.load_balance.te.loop import TeLoop
from controller.telemetry import Telemetry, TelemetryConfig
from controller.telemetry.entries import EcnThresholds
from hostagent.agent.config import AgentConfig
from hostagent.agent.load_balance_plb import PlbParams
from hostagent.collectives.reliable import ACK_FRAME_BYTES, DATA_FRAME_BYTES
from hostagent.congestion import SENDER_CONTROLS, CcSettings

LB_MODES = ("ecmp", "spray", "flowlet", "te", "static", "disjoint", "qp-scaling", "plb")
CONGESTION = ("none", "dcqcn", "timely", "swift")
QPS = DEFAULT_QPS               # queue pairs a peer pair under qp-scaling
PLB_ROUND_PACKETS = 10       # a PLB round: about one RTT with a few full frames queued, in their times
PLB_REHASH_ROUNDS = PlbParams.rehash_rounds   # the kernel's N
ECN_THRESHOLD = 10           # packets of queue above which ECN-capable packets are marked
FLOWLET_GAP_PACKETS = 5      # a flowlet gap: a pause of five full frames' times, not a packet's spacing
TE_PERIOD_S = 0.5
TE_ONE_IN = 8


def transport_cc(fabric, rate: LinkRate, congestion: str, params: dict | None = None) -> CcSettings | None:
    """The congestion control the ranks' transport runs under ``congestion`` (None: none of its
    own), its defaults scaled to ``rate`` and to the store-and-forward RTT of ``fabric``'s longest
    path between two hosts, then ``params`` (its Params' fields) set."""
    if congestion not in SENDER_CONTROLS:      # run by the ranks' transport, not by the host agents
        return None
    hosts = [h.name for h in fabric.hosts]
    lengths = dict(nx.all_pairs_shortest_path_length(fabric.to_graph()))
    links = max(lengths[a][b] for a in hosts for b in hosts if b in lengths[a])
    return CcSettings(congestion, rate.bits_per_s(DATA_FRAME_BYTES),
                      store_and_forward_rtt(rate, links, DATA_FRAME_BYTES, ACK_FRAME_BYTES), dict(params or {}))


class FabricConditions:
    def __init__(self, lab: Lab, rate: LinkRate) -> None:
        self.lab = lab
        self.limit(rate)
        k = ECN_THRESHOLD
        self.ecn = Telemetry(lab.controller, TelemetryConfig(ecn=EcnThresholds(kmin=k, kmax=k, pmax=1.0),
                                                             int_enabled=False))
        self.modes = LbModes(lab.controller)
        self._te: TeLoop | None = None        # made on first use: its sampler is a state source
        self._pins: TeOverrides | None = None  # the pins of te and static (one owner of the table)
        self.te_rounds = 0

    def limit(self, rate: LinkRate) -> None:
        """Every link at ``rate`` from now on (a lab's links can change rate between runs)."""
        self.plan = LinkPlan(rate)
        limit_links(self.lab, self.plan)
        frame_us = self.plan.rate.seconds(self.plan.frame_bytes) * 1e6      # one full frame's time on a link
        self.plb_round_s = PLB_ROUND_PACKETS * frame_us / 1e6
        self.flowlet_gap_us = round(FLOWLET_GAP_PACKETS * frame_us)
        if getattr(self, "_te", None) is not None:       # its next start takes the new rate
            self._te.config = TeConfig(host_link_bps=self.plan.bits_per_s)

    def _overrides(self) -> TeOverrides:
        if self._pins is None:
            self._pins = TeOverrides(self.lab.controller)
        return self._pins

    def _te_loop(self) -> TeLoop:
        if self._te is None:
            self._te = TeLoop(self.lab.controller, TeConfig(host_link_bps=self.plan.bits_per_s),
                              period_s=TE_PERIOD_S, one_in=TE_ONE_IN, overrides=self._overrides())
        return self._te

    def host_agent(self, mode: str, congestion: str = "none", seed: int | None = None) -> AgentConfig | None:
        """The host agents a run under ``mode`` and ``congestion`` needs (None: none), DCQCN
        scaled to the links' rate."""
        if mode not in LB_MODES or congestion not in CONGESTION:
            raise ValueError(f"load balancing {mode!r} / congestion {congestion!r}: one of "
                             f"{', '.join(LB_MODES)} / {', '.join(CONGESTION)}")
        agent_mode = "+".join(m for m, on in (("plb", mode == "plb"), ("dcqcn", congestion == "dcqcn")) if on)
        if not agent_mode:
            return None
        return AgentConfig(agent_mode, round_s=self.plb_round_s, line_rate_bps=self.plan.bits_per_s, seed=seed,
                           plb=PlbParams(rehash_rounds=PLB_REHASH_ROUNDS))

    def transport_cc(self, congestion: str, params: dict | None = None) -> CcSettings | None:
        """`transport_cc` on this lab's fabric and links."""
        return transport_cc(self.lab.fabric, self.plan.rate, congestion, params)

    @staticmethod
    def queue_pairs(mode: str, qps: int | None = None) -> int:
        """Source ports a rank spreads each peer over under ``mode`` (1: one): ``qps`` under
        qp-scaling, by default QPS."""
        return (qps or QPS) if mode == "qp-scaling" else 1

    @contextmanager
    def load_balancing(self, mode: str, flows: Sequence[FiveTuple] = ()) -> Iterator[None]:
        """What it wraps runs under ``mode``; ``flows``: the job's, which ``static`` pins."""
        if mode not in LB_MODES:
            raise ValueError(f"load-balancing mode {mode!r}: one of {', '.join(LB_MODES)}")
        if mode == "static" and not flows:
            raise ValueError("static load balancing pins the job's flows: none were given")
        self.modes.set(mode if mode in ("spray", "flowlet") else "ecmp", gap_us=self.flowlet_gap_us)
        te = self._te_loop() if mode == "te" else None
        if te is not None:
            te.start()
        if mode == "static":
            self._overrides().replace(static_pins(self.lab.controller, flows))
        try:
            yield
        finally:
            if te is not None:
                te.stop()
                self.te_rounds = len(te.rounds)
            if mode == "static":
                self._overrides().replace([])
            self.modes.set("ecmp")
