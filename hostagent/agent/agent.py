"""One host's agent: the TC programs on its interface, and every tick, per flow it sends, PLB
(per round) and DCQCN's reaction point (per CNP, timer and byte counter).

Signals per round, for PLB (`hostagent.agent.load_balance_plb`):

* TCP: ACKs and ECN-Echo ACKs the ingress program counted (ha_ack): the round's ratio is
  ECE ACKs / ACKs. Linux TCP without DCTCP echoes RFC 3168 style (ECE on every ACK from a CE
  mark until the sender's CWR), so this is the fraction of the round the flow spent signalled.
  In flight: the highest sequence sent (egress) past the highest ACK (ingress). An RTO
  (`hostagent.agent.tcpdiag`) repaths the flow and holds PLB still (`PlbState.on_rto`).
* RoCEv2-like UDP: the receiver's reports (packets and CE it counted, ha_fb): the round's
  ratio is the CE fraction the receiver saw since the previous round. In flight: the sender
  sent during the round.

Other UDP flows are counted, not moved (nothing tells their sender about CE). A repath draws a
new random flow label (IPv6) and, for RoCEv2, a new source port from 49152..65535; TCP over
IPv4 has no field to change (the kernel's PLB cannot move it either), its repaths are decided
and counted only. A flow that sent nothing for ``idle_forget_s`` is forgotten with its path:
its next packets take the kernel's own label and port again.

DCQCN (`hostagent.agent.dcqcn`): each RoCEv2 flow gets a reaction point at its first CNP
(before, it runs at the line rate, as a NIC's rate limiter does); every change of its rate
goes to the traffic sender (`hostagent.traffic.ratecontrol`).
"""
from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyroute2 import IPRoute

from hostagent.agent.bpf.loader import AckCounters, FeedbackCounters, TcProgram, TxCounters
from hostagent.agent.config import AgentConfig
from hostagent.agent.dcqcn import ReactionPoint
from hostagent.agent.flowkey import FlowKey
from hostagent.agent.load_balance_plb import PlbState, cong_ratio
from hostagent.agent.stats import AgentStats, ReceivedFlowStats, SentFlowStats, Totals
from hostagent.agent.tcpdiag import RtoWatch
from hostagent.traffic.ratecontrol import RateClient

ENTROPY_PORTS = (49152, 65535)
FLOW_LABEL_BITS = 20
MIN_TICK_S = 0.002
RATE_RESEND_REL = 0.001           # a rate change smaller than this is not sent


@dataclass
class SentFlow:
    """What the agent keeps for one flow this host sends."""

    key: FlowKey
    plb: PlbState
    last_active: float
    tx_packets: int = 0
    tx_bytes: int = 0
    label: int | None = None          # set by the agent (None: the kernel's)
    sport: int | None = None
    rtos: int = 0
    # baselines at the start of the current round
    round_tx: int = 0
    round_acks: int = 0
    round_ece: int = 0
    round_rx_packets: int = -1        # -1: no report yet (the first one is only a baseline: the
    round_rx_ce: int = 0              # receiver's counters may include an earlier flow's)
    # DCQCN
    cnps_seen: int = 0
    rp: ReactionPoint | None = None
    rate_sent: float | None = None


def serial_gap(a: int, b: int) -> int:
    """a - b in 32-bit sequence space (positive: a is after b)."""
    d = (a - b) & 0xFFFFFFFF
    return d - (1 << 32) if d >= 1 << 31 else d


def default_interface() -> str:
    """The one interface of a (Mininet) host besides lo (from netlink: /sys/class/net shows the
    namespace sysfs was mounted in, which a Mininet host shares with the machine)."""
    with IPRoute() as ipr:
        names = [link.get_attr("IFLA_IFNAME") for link in ipr.get_links()]
    names = [n for n in names if n != "lo"]
    if len(names) != 1:
        raise ValueError(f"give --iface: the namespace has {len(names)} interfaces besides lo ({', '.join(names)})")
    return names[0]


def _set_sysctl(name: str, value: str) -> str:
    """Set a sysctl of this process's network namespace, returning the value it had."""
    path = Path("/proc/sys") / name.replace(".", "/")
    old = path.read_text().strip()
    path.write_text(value)
    return old


class Agent:
    """Start, `step` (or `run`) and `close`, in the host's network namespace (the process runs
    there: a Mininet host's ``popen``)."""

    def __init__(self, config: AgentConfig, *, host: str | None = None,
                 clock: Callable[[], float] = time.monotonic, program: TcProgram | None = None):
        self.config = config
        self.host = host or os.uname().nodename
        self.clock = clock
        self.rng = random.Random(config.seed)
        self.program = program
        self.iface = config.iface or ""
        self.flows: dict[FlowKey, SentFlow] = {}
        self.totals = Totals()
        self.rto_watch: RtoWatch | None = None
        self.rates: RateClient | None = None
        self._saved_ecn: str | None = None
        self._next_round = 0.0
        self._next_stats = 0.0
        self._started = time.time()
        self._ids: dict[str, list[int]] = {}

    @property
    def tick_s(self) -> float:
        tick = self.config.round_s
        if self.config.dcqcn_on:
            p = self.config.dcqcn_params
            tick = min(tick, p.rate_timer_s / 4, p.alpha_timer_s / 4)
        return max(MIN_TICK_S, tick)

    # -- life ----------------------------------------------------------------------
    def start(self) -> dict[str, list[int]]:
        """Compile (unless given a program), attach, configure; returns the kernel ids of the
        programs and maps."""
        cfg = self.config
        self.iface = cfg.iface or default_interface()
        if self.program is None:
            self.program = TcProgram()
        self.program.attach(self.iface)
        self.program.configure(
            cnp_interval_ns=round(cfg.dcqcn_params.cnp_interval_s * 1e9) if cfg.dcqcn_on else 0,
            report_interval_ns=round(cfg.report_interval * 1e9) if cfg.plb_on else 0,
            set_ect=True)
        if cfg.plb_on:
            if cfg.tcp_ecn:
                self._saved_ecn = _set_sysctl("net.ipv4.tcp_ecn", "1")
            self.rto_watch = RtoWatch()
        if cfg.dcqcn_on:
            self.rates = RateClient(cfg.rate_control_port)
        self._ids = self.program.object_ids()
        now = self.clock()
        self._next_round = now + cfg.round_s
        return self._ids

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set."""
        while not stop.is_set():
            started = self.clock()
            self.step(started)
            stop.wait(max(0.0, self.tick_s - (self.clock() - started)))

    def close(self) -> None:
        """Detach, restore the sysctl, write the last stats (counted before detaching, marked
        stopped after); every step is tried."""
        errors = []
        final: list[AgentStats] = []
        for what, action in (("stats", lambda: final.append(self.stats())),
                             ("programs", self.program.close if self.program else lambda: None),
                             ("tcp_ecn", self._restore_ecn),
                             ("sockets", self._close_sockets)):
            try:
                action()
            except Exception as err:       # noqa: BLE001 - the rest must still run
                errors.append(f"{what}: {err}")
        if final and self.config.stats_path:
            final[0].stopped = not errors
            final[0].write(self.config.stats_path)
        if errors:
            raise OSError(f"host agent on {self.host}: {'; '.join(errors)}")

    def _restore_ecn(self) -> None:
        if self._saved_ecn is not None:
            _set_sysctl("net.ipv4.tcp_ecn", self._saved_ecn)
            self._saved_ecn = None

    def _close_sockets(self) -> None:
        for s in (self.rto_watch, self.rates):
            if s is not None:
                s.close()
        self.rto_watch = self.rates = None

    # -- one tick ------------------------------------------------------------------
    def step(self, now: float) -> None:
        cfg, program = self.config, self.program
        assert program is not None, "start() first"
        tx = program.tx()
        acks = program.acks() if cfg.plb_on else {}
        fb = program.feedback()
        round_due = cfg.plb_on and now >= self._next_round
        if round_due:
            self._next_round = max(self._next_round + cfg.round_s, now)
        rtos = self.rto_watch.poll() if round_due and self.rto_watch and any(
            k.protocol == "tcp" for k in tx) else set()
        for key, t in tx.items():
            if not (key.protocol == "tcp" or key.is_roce):
                continue
            flow = self.flows.get(key)
            if flow is None:
                flow = self.flows[key] = SentFlow(key, PlbState(cfg.plb), now)
            sent_bytes = t.bytes - flow.tx_bytes
            if t.packets != flow.tx_packets:
                flow.last_active = now
            flow.tx_packets, flow.tx_bytes = t.packets, t.bytes
            if cfg.dcqcn_on and key.is_roce:
                self._dcqcn(flow, fb.get(key), sent_bytes, now)
            if round_due:
                self._plb_round(flow, t, acks.get(key), fb.get(key), key in rtos, now)
        for key in [k for k, f in self.flows.items() if k not in tx or now - f.last_active > cfg.idle_forget_s]:
            del self.flows[key]
            program.forget(key)
            self.totals.flows_forgotten += 1
        if cfg.stats_path and now >= self._next_stats:
            self._next_stats = now + cfg.stats_interval_s
            self.write_stats()

    def _plb_round(self, flow: SentFlow, t: TxCounters, ack: AckCounters | None, fb: FeedbackCounters | None,
                   rto: bool, now: float) -> None:
        ratio = None
        if flow.key.protocol == "tcp":
            in_flight = ack is None or serial_gap(t.seq_next, ack.ack_seq) > 0
            if ack is not None:
                ratio = cong_ratio(ack.ece - flow.round_ece, ack.acks - flow.round_acks)
                flow.round_acks, flow.round_ece = ack.acks, ack.ece
        else:
            in_flight = t.packets > flow.round_tx
            if fb is not None and fb.reports:
                if 0 <= flow.round_rx_packets <= fb.rx_packets and flow.round_rx_ce <= fb.rx_ce:
                    ratio = cong_ratio(fb.rx_ce - flow.round_rx_ce, fb.rx_packets - flow.round_rx_packets)
                flow.round_rx_packets, flow.round_rx_ce = fb.rx_packets, fb.rx_ce
        flow.round_tx = t.packets
        before = (flow.plb.rounds, flow.plb.congested_rounds)
        if rto:
            flow.rtos += 1
            self.totals.rtos += 1
            self._repath(flow, t)
            flow.plb.on_rto(now, lambda pause: self.rng.random() * pause)
        flow.plb.update(ratio)
        if ratio is not None and flow.plb.check_rehash(now, in_flight):
            self._repath(flow, t)
        self.totals.rounds += flow.plb.rounds - before[0]
        self.totals.congested_rounds += flow.plb.congested_rounds - before[1]

    def _repath(self, flow: SentFlow, t: TxCounters) -> None:
        """A new random path: a new flow label (IPv6), a new source port (RoCEv2)."""
        key = flow.key
        if key.family == 6:
            flow.label = _draw(self.rng, 1, (1 << FLOW_LABEL_BITS) - 1, t.label)
        if key.is_roce:
            flow.sport = _draw(self.rng, *ENTROPY_PORTS, t.sport)
        if flow.label is not None or flow.sport is not None:
            self.program.set_path(key, label=flow.label, sport=flow.sport)
        self.totals.repaths += 1

    def _dcqcn(self, flow: SentFlow, fb: FeedbackCounters | None, sent_bytes: int, now: float) -> None:
        cnps = fb.cnps if fb is not None else 0
        new = max(0, cnps - flow.cnps_seen)
        flow.cnps_seen = cnps
        if new and flow.rp is None:
            flow.rp = ReactionPoint(self.config.dcqcn_params, now)
        if flow.rp is None:
            return
        self.totals.cnps_received += new
        for _ in range(new):
            flow.rp.on_cnp(now)
        flow.rp.on_sent(max(0, sent_bytes), now)
        rate = flow.rp.rate_bps
        if flow.rate_sent is None or abs(rate - flow.rate_sent) > RATE_RESEND_REL * flow.rate_sent:
            assert self.rates is not None
            self.rates.set_rate(flow.key.qp, rate)
            flow.rate_sent = rate
            self.totals.rate_updates += 1

    # -- reporting -----------------------------------------------------------------
    def stats(self) -> AgentStats:
        sent = []
        tx = self.program.tx() if self.program is not None else {}
        for key, f in sorted(self.flows.items()):
            t = tx.get(key)
            rp = f.rp
            sent.append(SentFlowStats(
                key.describe(), key.src, key.dst, key.protocol, key.sport, key.dport, key.qp,
                packets=f.tx_packets, bytes=f.tx_bytes, label=t.label if t else 0, wire_sport=t.sport if t else 0,
                rounds=f.plb.rounds, congested_rounds=f.plb.congested_rounds,
                consec_cong_rounds=f.plb.consec_cong_rounds,
                ce_fraction=None if f.plb.last_ratio is None else f.plb.last_ratio / 256,
                repaths=f.plb.rehashes + f.rtos, rtos=f.rtos, paused=f.plb.paused(self.clock()), cnps=f.cnps_seen,
                rate_bps=rp.rate_bps if rp else None, target_rate_bps=rp.rt if rp else None,
                alpha=rp.alpha if rp else None, stage=rp.stage if rp else None))
        received = []
        if self.program is not None:
            cnps = reports = 0
            for key, r in sorted(self.program.rx().items()):
                cnps, reports = cnps + r.cnps, reports + r.reports
                received.append(ReceivedFlowStats(key.describe(), r.packets, r.ce, r.cnps, r.reports))
            self.totals.cnps_sent, self.totals.reports_sent = cnps, reports
        return AgentStats(self.host, self.config.mode, self.iface, os.getpid(), self._started, time.time(),
                          self.totals, sent, received, self._ids)

    def write_stats(self) -> None:
        if self.config.stats_path:
            self.stats().write(self.config.stats_path)


def _draw(rng: random.Random, low: int, high: int, avoid: int) -> int:
    while True:
        value = rng.randint(low, high)
        if value != avoid:
            return value

