"""The scenes of ``aifabric demo lossless`` (aifabric.experiments.demo_lossless), each run on a
k=4 fat-tree whose links are limited in bits (aifabric.lab.links), class 3 ("rdma", DSCP 26)
made lossless or not (PFC on or off) with the same flows:

* incast: 8 hosts of pods 0-2 each send 0.5 s of line rate to one host in pod 3: drops against
  pauses, and the bottleneck's throughput (its delivered wire bits over the time its frames took);
* victim: the same incast, one of its senders also sending a victim flow to an idle host
  elsewhere (both at half the line rate, one class): PFC pauses that host's class for the incast,
  and the victim with it (head-of-line blocking). Theory of pausing: a flow held with its class
  sends its offered rate only while the class is not paused, so it gets offered x (1 - the
  fraction of its life its host's class was paused: the host's eBPF counts it);
* dcqcn: the incast with DCQCN (the hosts' agents: CNPs on CE, the senders' rates), class 3's
  ECN threshold (Kmin = Kmax, ecn_class_config) below XOFF (4 packets, XOFF being 16) and above it
  (100 packets, never reached before PAUSE): the time ports held their neighbours paused;
* storm: a host that never drains (hostagent.lossless.storm: PAUSE every 20 ms) receiving four
  flows while two flows go to its neighbour on the same edge switch: without the watchdog the
  pause spreads (link directions paused), with it the storm is caught within its limit plus one
  poll and the neighbour's flows go on;
* deadlock: the link p0a0-p0e0 fails and p0a0, its way down gone, bounces a flow from pod 1 to
  p0e0h0 back up to c0 (a routing bounce: a TE pin, as a transient route would), which sends it
  down to p0a0 again: a loop whose two buffers, full, pause each other (cyclic buffer
  dependency). Without the watchdog it is stuck (nothing moves on the loop for seconds after
  the sender is held); with it, broken within its limit plus one poll.

Every run's figures are deltas of the switches' class counters (controller.lossless's poller,
which also gives the picture's pauses over time) and of the flows' records.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from aifabric.lab.failures import Failures
from aifabric.lab.lab import Lab
from aifabric.lab.links import MTU_FRAME, LinkRate
from aifabric.lab.lossless import RDMA_DSCP, RDMA_PFC, RDMA_PRIORITY, rdma_classes
from controller.load_balance import Pin, TeOverrides
from controller.lossless import LosslessConfig, WatchdogConfig
from controller.telemetry.entries import EcnThresholds
from hostagent.agent.config import AgentConfig
from hostagent.agent.launch import start_agents
from hostagent.traffic import drive
from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec
from hostagent.traffic.ratecontrol import RATE_CONTROL_PORT
from softswitch.queues import wire_bytes

CLASS, DSCP = RDMA_PRIORITY, RDMA_DSCP
RATE = LinkRate.parse("10M")
FRAME = MTU_FRAME                       # every flow's frames: 1514 bytes
PAYLOAD = FRAME - 42                    # their UDP payload
WIRE_BITS = wire_bytes(FRAME) * 8
PFC = RDMA_PFC
WATCHDOG = WatchdogConfig(detect_ms=200, restore_ms=400, poll_ms=20)
ECN_BELOW, ECN_ABOVE = 4, 100           # packets: below XOFF (16 frames) and never reached before it
RECEIVER = "p3e1h1"
SENDERS = ("p0e0h0", "p0e0h1", "p0e1h0", "p1e0h0", "p1e1h0", "p1e1h1", "p2e0h0", "p2e1h0")
VICTIM_TO = "p2e1h1"
STORM_NEIGHBOUR = "p3e1h0"
LOOP_SRC, LOOP_DST, LOOP_AGG, LOOP_CORE = "p1e0h0", "p0e0h0", "p0a0", "c0"


def demo_config() -> LosslessConfig:
    """The lab's RoCE class (aifabric.lab.lossless.rdma_classes), lossless while a scene asks."""
    return rdma_classes()


@dataclass
class Run:
    """One run of a scene: its variant, what the flows did, the switches' class-3 figures over it."""
    scene: str
    variant: str
    pfc: bool
    seconds: float = 0.0
    flows: list[dict] = field(default_factory=list)
    totals: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    timeline: list[tuple[float, int, int]] = field(default_factory=list)   # (s, ports pausing, PAUSEs sent since)


# -- the switches' figures ---------------------------------------------------------------------------
COUNTED = ("pause_sent", "xon_sent", "pause_received", "lossless_drops", "drops", "watchdog_drops", "storms",
           "restores", "tx_packets")


def totals(snapshot: dict, priority: int = CLASS) -> dict:
    """Class ``priority`` over every switch and port: counters summed, seconds paused (egress
    queues held) and pausing (neighbours held), ports paused now, and per port its storms so far
    with how long the last one took to be caught (``detections``)."""
    out = {k: 0 for k in COUNTED} | {"paused_s": 0.0, "pausing_s": 0.0, "ports_paused": 0, "ports_pausing": 0}
    detections = {}
    for sw, ports in snapshot.items():
        for port, classes in ports.items():
            f = classes.get(priority)
            if f is None:
                continue
            for k in COUNTED:
                out[k] += f.get(k) or 0
            out["paused_s"] += f.get("paused_us", 0.0) / 1e6
            out["pausing_s"] += (f.get("pausing_us") or 0.0) / 1e6
            out["ports_paused"] += bool(f.get("paused"))
            out["ports_pausing"] += bool(f.get("pausing"))
            detections[(sw, port)] = (f.get("storms") or 0, f.get("detected_after_us"))
    out["detections"] = detections
    return out


def delta(before: dict, after: dict) -> dict:
    """What changed between two `totals`; ``detected_after_ms`` is the slowest catch among the
    ports whose watchdog caught a storm in between (None: none did)."""
    out = {k: after[k] - before[k] for k in (*COUNTED, "paused_s", "pausing_s")}
    caught = [us for key, (storms, us) in after["detections"].items()
              if us is not None and storms > before["detections"].get(key, (0, None))[0]]
    out.update(ports_paused=after["ports_paused"], ports_pausing=after["ports_pausing"],
               detected_after_ms=round(max(caught) / 1e3, 1) if caught else None)
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


class Scenes:
    """The scenes on one lab (its traffic classes: demo_config(); links limited to ``rate``)."""

    def __init__(self, lab: Lab, rate: LinkRate = RATE, say=print):
        self.lab, self.rate, self.say = lab, rate, say
        self.pps = rate.packets_per_s(FRAME)
        self.lossless = lab.lossless
        self.poller = lab.lossless.poller
        self.poller.history = True

    # -- the common steps --------------------------------------------------------------------
    def pfc(self, on: bool) -> None:
        if on:
            self.lossless.use("demo", {CLASS})
        else:
            self.lossless.release("demo")

    def snapshot(self) -> dict:
        self.poller.poll_once()
        return totals(self.poller.snapshot())

    def flow(self, src: str, dst: str, sport: int, seconds: float, share: float = 1.0) -> FlowSpec:
        """``seconds`` of ``share`` of the line rate, class 3."""
        return FlowSpec(src, dst, "udp", sport, ROCEV2_PORT, max(1, round(seconds * self.pps * share)),
                        payload=PAYLOAD, rate_pps=self.pps * share, dscp=DSCP, priority=CLASS)

    def begin(self, run: Run) -> tuple[dict, float]:
        self.poller.polls.clear()
        self.say(f"{run.scene}: {run.variant}")
        return self.snapshot(), time.monotonic()

    def end(self, run: Run, before: dict, t0: float, results=None) -> Run:
        after = self.snapshot()
        run.seconds = round(time.monotonic() - t0, 2)
        run.totals = delta(before, after)
        run.flows = [r.summary() for r in results or []]
        first = None
        for t, snap in self.poller.polls:
            tot = totals(snap)
            first = tot["pause_sent"] if first is None else first
            run.timeline.append((round(t - t0, 2), tot["ports_pausing"], tot["pause_sent"] - first))
        return run

    def traffic(self, flows: list[FlowSpec], *, deadline: float, during=None, rate_control: bool = False,
                reports: bool = True):
        """Run ``flows`` (``during(senders, receivers)`` meanwhile) and pair their reports; with
        ``reports=False`` the processes are stopped once ``during`` returns and nothing is paired
        (a flow held in a deadlock has no end to wait for)."""
        hosts = {n: self.lab.host(n) for n in {f.src for f in flows} | {f.dst for f in flows}}
        receivers = drive.start_receivers(hosts, flows, quiet=2.0, deadline=deadline)
        try:
            senders = drive.start_senders(hosts, flows, pause=self.lossless.sender_pause(),
                                          rate_control_port=RATE_CONTROL_PORT if rate_control else 0)
        except BaseException:
            drive.stop(receivers)
            raise
        if during is not None:
            try:
                during(senders, receivers)
            except BaseException:
                drive.stop([*senders, *receivers])
                raise
        if not reports:
            drive.stop([*senders, *receivers])
            return []
        return drive.collect(flows, senders, receivers)

    def host_paused_s(self, host: str) -> float:
        c = self.lossless.hosts.counters(self.lossless.host_ids[host]).get(CLASS)
        return 0.0 if c is None else c.paused_total_ns(time.monotonic_ns()) / 1e9

    # -- incast and its victim ---------------------------------------------------------------
    def incast_flows(self, victim: bool) -> list[FlowSpec]:
        flows = [self.flow(s, RECEIVER, 50000 + i, 0.5, 0.5 if victim and i == 0 else 1.0)
                 for i, s in enumerate(SENDERS)]
        if victim:
            flows.append(self.flow(SENDERS[0], VICTIM_TO, 51000, 0.5, 0.5))
        return flows

    def incast(self, pfc: bool, victim: bool = False) -> Run:
        self.pfc(pfc)
        run = Run("victim" if victim else "incast", f"PFC {'on' if pfc else 'off'}", pfc)
        before, t0 = self.begin(run)
        host0 = self.host_paused_s(SENDERS[0])
        results = self.traffic(self.incast_flows(victim), deadline=60)
        self.end(run, before, t0, results)
        incast = [r for r in results if r.flow.dst == RECEIVER]
        run.figures = bottleneck(incast, self.rate)
        run.figures["lost"] = sum(r.lost for r in incast)
        if victim:
            v = next(r for r in results if r.flow.dst == VICTIM_TO)
            offered = v.flow.rate_pps * WIRE_BITS
            life = v.fct_s or run.seconds
            paused = self.host_paused_s(SENDERS[0]) - host0
            got = v.delivered_bytes / PAYLOAD * WIRE_BITS / life if life else 0.0
            run.figures.update(victim_bps=round(got), victim_offered_bps=round(offered),
                               victim_share=round(got / offered, 3), host_paused_s=round(paused, 3),
                               victim_life_s=round(life, 3),
                               theory_bps=round(offered * max(0.0, 1 - paused / life)) if life else None,
                               fair_share_bps=round(self.rate.bits_per_s(FRAME) / len(SENDERS)))
        return run

    # -- DCQCN below and above XOFF --------------------------------------------------------------
    def dcqcn(self, pfc: bool, ecn_packets: int) -> Run:
        self.pfc(pfc)
        klass = self.lossless.classes.config.klass(CLASS)
        self.lossless.classes.replace_class(replace(klass, ecn=EcnThresholds(ecn_packets, ecn_packets, 1.0)))
        where = "below" if ecn_packets * FRAME < PFC.xoff else "above"
        run = Run("dcqcn", f"PFC {'on' if pfc else 'off'}, ECN at {ecn_packets} packets ({where} XOFF)", pfc)
        hosts = {n: self.lab.host(n) for n in (*SENDERS, RECEIVER)}
        agents = start_agents(hosts, AgentConfig("dcqcn", line_rate_bps=self.rate.bits_per_s(FRAME)),
                              Path(self.lab.log_dir) / "lossless-agents")
        try:
            before, t0 = self.begin(run)
            flows = [self.flow(s, RECEIVER, 52000 + i, 0.6) for i, s in enumerate(SENDERS)]
            results = self.traffic(flows, deadline=90, rate_control=True)
            self.end(run, before, t0, results)
            run.figures = {**bottleneck(results, self.rate), "lost": sum(r.lost for r in results),
                           "cnps": agents.totals().get("cnps_sent")}
        finally:
            agents.stop()
            self.lossless.classes.replace_class(klass)
        return run

    # -- a pause storm --------------------------------------------------------------------------
    def storm(self, pfc: bool, watchdog: bool, seconds: float = 3.0) -> Run:
        self.pfc(pfc)
        self.lossless.classes.set_watchdog(WATCHDOG if watchdog else None)
        run = Run("storm", f"PFC {'on' if pfc else 'off'}" + (", watchdog" if watchdog else ""), pfc)
        flows = [self.flow(s, RECEIVER, 53000 + i, seconds, 0.5) for i, s in enumerate(SENDERS[:4])]
        flows += [self.flow(s, STORM_NEIGHBOUR, 54000 + i, seconds, 0.5) for i, s in enumerate(SENDERS[4:6])]
        peak = [0]

        def storming(senders, receivers) -> None:
            node = self.lab.host(RECEIVER)
            proc = node.popen([sys.executable, "-m", "hostagent.lossless.storm", "--iface", node.defaultIntf().name,
                               "--priority", str(CLASS), "--seconds", str(seconds + 0.5)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            end = time.monotonic() + seconds + 0.5
            while time.monotonic() < end:
                time.sleep(0.25)
                peak[0] = max(peak[0], self.snapshot()["ports_pausing"])
            proc.wait(timeout=10)

        try:
            before, t0 = self.begin(run)
            results = self.traffic(flows, deadline=seconds + 8, during=storming)
            self.end(run, before, t0, results)
        finally:
            self.lossless.classes.set_watchdog(None)
        neighbour = [r for r in results if r.flow.dst == STORM_NEIGHBOUR]
        run.figures = {"neighbour_delivered": round(sum(r.delivered_bytes for r in neighbour) /
                                                    sum(r.flow.bytes for r in neighbour), 3),
                       "stormed_delivered": round(sum(r.delivered_bytes for r in results if r.flow.dst == RECEIVER) /
                                                  sum(r.flow.bytes for r in results if r.flow.dst == RECEIVER), 3),
                       "directions_pausing_peak": peak[0], "detected_after_ms": run.totals["detected_after_ms"],
                       "limit_ms": WATCHDOG.detect_ms + WATCHDOG.poll_ms if watchdog else None}
        return run

    # -- a deadlock ------------------------------------------------------------------------------
    def deadlock(self, pfc: bool, watchdog: bool) -> Run:
        self.pfc(pfc)
        self.lossless.classes.set_watchdog(WATCHDOG if watchdog else None)
        run = Run("deadlock", f"PFC {'on' if pfc else 'off'}" + (", watchdog" if watchdog else ""), pfc)
        failures = Failures(self.lab)
        te = TeOverrides(self.lab.controller)
        failures.fail_link(LOOP_AGG, "p0e0")
        flow = self.flow(LOOP_SRC, LOOP_DST, 55000, 0.3)
        te.replace(loop_pins(self.lab, flow))
        figures: dict = {}

        def watch(senders, receivers) -> None:
            time.sleep(1.0 + flow.duration + 1.5)       # the senders' start, the flow sent (or held), the loop full
            a = loop_figures(self.poller, self.lab)
            time.sleep(1.0)
            b = loop_figures(self.poller, self.lab)
            figures.update(loop_queued=b["queued"], loop_moved_in_1s=b["tx"] - a["tx"],
                           loop_pausing=b["pausing"], stuck=b["queued"] > 0 and b["tx"] == a["tx"] and b["pausing"] > 0)
            if figures["stuck"] and not watchdog:     # shown stuck: the watchdog breaks it now
                t = time.monotonic()
                self.lossless.classes.set_watchdog(WATCHDOG)
                while loop_figures(self.poller, self.lab)["queued"] and time.monotonic() - t < 5:
                    time.sleep(0.02)
                figures["broken_after_watchdog_on_ms"] = round((time.monotonic() - t) * 1e3)

        try:
            before, t0 = self.begin(run)
            results = self.traffic([flow], deadline=30, during=watch, reports=False)
            self.end(run, before, t0, results)
        finally:
            te.replace([])
            failures.restore_link(LOOP_AGG, "p0e0")
            self.lab.controller.remove_state_source(te)
            self.lossless.classes.set_watchdog(None)
        run.figures = {**figures, "detected_after_ms": run.totals["detected_after_ms"],
                       "limit_ms": WATCHDOG.detect_ms + WATCHDOG.poll_ms if watchdog else None}
        return run


def bottleneck(results, rate: LinkRate) -> dict:
    """The receiver's link: its frames' wire bits over the time from the first arrival to the last,
    against the link's rate."""
    got = [r.received for r in results if r.received is not None and r.received.unique]
    if not got:
        return {"bottleneck_util": None, "delivered_frames": 0}
    frames = sum(g.unique for g in got)
    span = max(g.last_arrival for g in got) - min(g.first_arrival for g in got)
    return {"bottleneck_util": round(frames * WIRE_BITS / span / rate.bits_per_s(FRAME), 3) if span else None,
            "delivered_frames": frames}


def port_to(lab: Lab, switch: str, neighbour: str) -> int:
    return next(p for p, n in lab.fabric.ports_of(switch).items() if n == neighbour)


def loop_pins(lab: Lab, f: FlowSpec) -> list[Pin]:
    """The flow up to c0 through pod 1's first agg, and p0a0 bouncing it back up to c0 (its way
    down failed); c0's own route sends it down to p0a0."""
    src, dst = str(lab.fabric.host(f.src).ip4.ip), str(lab.fabric.host(f.dst).ip4.ip)
    hops = (("p1e0", "p1a0"), ("p1a0", LOOP_CORE), (LOOP_CORE, LOOP_AGG), (LOOP_AGG, LOOP_CORE))
    return [Pin(sw, src, dst, 17, f.sport, f.dport, port_to(lab, sw, nxt)) for sw, nxt in hops]


def loop_figures(poller, lab: Lab) -> dict:
    """The loop's two class-3 queues: packets in them, packets they sent so far, ports pausing."""
    poller.poll_once()
    snap = poller.snapshot()
    out = {"queued": 0, "tx": 0, "pausing": 0}
    for sw, nxt in ((LOOP_CORE, LOOP_AGG), (LOOP_AGG, LOOP_CORE)):
        f = snap.get(sw, {}).get(port_to(lab, sw, nxt), {}).get(CLASS, {})
        out["queued"] += f.get("occupancy", 0)
        out["tx"] += f.get("tx_packets", 0)
        out["pausing"] += bool(f.get("pausing"))
    return out


def as_json(run: Run) -> dict:
    return json.loads(json.dumps(asdict(run), default=str))
