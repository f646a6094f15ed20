"""``aifabric bench cc``: the hosts' congestion controls on the same incast, each on one k=4
fat-tree of softswitches whose links are limited in bits (class 3, "rdma", lossy: PFC off).

Eight hosts of pods 0-2 each send a long flow (``--long-seconds`` of line rate) to one host of
pod 3, and short flows (``SHORT_FRAMES`` datagrams each, seeded sources and start times) arrive
at the same host meanwhile: the question of the Swift and HPCC papers, what the long flows'
queue does to the short flows' completion times. Every control runs the same flows:

* none: every flow at line rate, nothing slows it (the queue fills; its tail drops);
* dcqcn: the hosts' agents (CNPs on CE marks, the senders' rates), the class's ECN threshold at
  ``ECN_PACKETS`` (Kmin = Kmax, as `aifabric.experiments.lossless_scenes` runs it);
* timely, swift: the senders' own controls (`hostagent.traffic.controlled`; every datagram
  acknowledged), their published defaults scaled to the lab's line rate and to the path's
  store-and-forward RTT (`physical_rtt`: what six links at this rate take for a frame and its
  acknowledgement). The emulator's own unloaded RTT is measured first and reported: it is
  shorter, since an idle link's token bucket lets a frame through at once.

Figures per control and seed: the bottleneck's throughput against its rate (`bottleneck`), its
queue (packets, sampled every ``QUEUE_POLL_S`` from the edge switch's class counters: median and
peak), the long flows' fairness (Jain's index of their throughputs), the short flows' completion
times (median and 99th percentile of those that completed, and how many did not), datagrams
lost; medians over seeds (the short flows' percentiles over all of them, pooled). Beside them what each control's own arithmetic predicts for the
standing queue (`predicted_queue`): Swift holds the fabric delay at its (flow-scaled) target,
TIMELY the RTT between T_low and T_high. The traffic tools do not resend: a short flow that lost
a datagram is counted incomplete (a real transport would wait out a timeout for it). HPCC is
not offered: it needs each hop's tx bytes and link rate in the data packets' telemetry, which
the fabric program does not stamp.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

from aifabric.experiments.lossless_scenes import CLASS, DSCP, FRAME, PAYLOAD, RECEIVER, SENDERS, bottleneck, port_to
from aifabric.lab import report
from aifabric.lab.cpu_meter import CpuMeter
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate, limit_links, rate_arg, store_and_forward_rtt
from aifabric.lab.lossless import rdma_classes
from controller.lossless import ClassPoller
from controller.telemetry.entries import EcnThresholds
from hostagent.agent.config import AgentConfig
from hostagent.agent.launch import start_agents
from hostagent.congestion import make_control
from hostagent.traffic import drive
from hostagent.congestion import SENDER_CONTROLS, CcSettings
from hostagent.traffic.flows import ROCEV2_PORT, FlowSpec
from hostagent.traffic.ratecontrol import RATE_CONTROL_PORT
from hostagent.traffic.wire import ACK_BYTES
from topologies.fabric import fat_tree

CONTROLS = ("none", "dcqcn", "timely", "swift")
RATE = LinkRate.parse("10M")
SHORT_FLOWS = 16
SHORT_FRAMES = 8
ECN_PACKETS = 4
BUFFER = 256                        # class 3's queue, packets: 310 ms at 10 Mbit/s
QUEUE_POLL_S = 0.02
CALIBRATION_FRAMES = 40             # the base-RTT flow: this many datagrams at a tenth of line rate
BOTTLENECK_SWITCH = "p3e1"          # RECEIVER's edge switch
PATH_LINKS = 6                      # host, edge, aggregation, core, aggregation, edge, host
ACK_FRAME = ACK_BYTES + 8 + 20 + 14   # an acknowledgement's frame: UDP, IPv4, Ethernet
DEFAULT_JSON, DEFAULT_PNG = "out/cc_bench.json", "out/cc_bench.png"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--controls", nargs="+", choices=CONTROLS, default=list(CONTROLS),
                   help="host congestion controls to compare on the same flows (default: all)")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="short flows' sources and starts "
                                                                           "(default 1 2 3)")
    p.add_argument("--long-seconds", type=float, default=1.0,
                   help="each long flow's size in seconds of line rate (default %(default)s)")
    p.add_argument("--rate", type=rate_arg, default=RATE, help="every link's rate per direction (default 10M)")
    p.add_argument("--buffer", type=int, default=BUFFER, help="the class's queue at every port, packets "
                                                               "(default %(default)s)")
    p.add_argument("--target", choices=("softswitch",), default="softswitch",
                   help="the switches (the bottleneck's queue is read from softswitch's class counters)")
    p.add_argument("--json", default=DEFAULT_JSON, help="figures (default %(default)s)")
    p.add_argument("--png", default=DEFAULT_PNG, help="picture (default %(default)s)")


def incast_flows(seed: int, pps: float, long_seconds: float) -> list[FlowSpec]:
    """The long flows (one a sender) and the seeded short ones, all of class 3 at line rate; the
    short ones start while every long flow still sends, whatever the control (the long flows'
    first ``long_seconds``: unslowed, they take that long to send)."""
    rng = random.Random(seed)
    size = max(1, round(long_seconds * pps))
    flows = [FlowSpec(s, RECEIVER, "udp", 52000 + i, ROCEV2_PORT, size, payload=PAYLOAD, rate_pps=pps,
                      dscp=DSCP, priority=CLASS) for i, s in enumerate(SENDERS)]
    flows += [FlowSpec(rng.choice(SENDERS), RECEIVER, "udp", 53000 + j, ROCEV2_PORT, SHORT_FRAMES,
                       start=round(rng.uniform(0.2, 0.9) * long_seconds, 3), payload=PAYLOAD, rate_pps=pps,
                       dscp=DSCP, priority=CLASS) for j in range(SHORT_FLOWS)]
    return flows


class QueueSampler:
    """The bottleneck port's class-3 queue, polled every QUEUE_POLL_S in a thread (CLOCK_REALTIME
    times, the clock the flows' records use)."""

    def __init__(self, lab: Lab):
        self.port = port_to(lab, BOTTLENECK_SWITCH, RECEIVER)
        self.poller = ClassPoller(lab.lossless.poller.runtime, [BOTTLENECK_SWITCH], QUEUE_POLL_S, history=True,
                                  clock=time.time)

    def __enter__(self) -> "QueueSampler":
        self.poller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.poller.stop()

    def samples(self) -> list[tuple[float, int]]:
        """(time, packets queued) of every poll."""
        return [(t, snap[BOTTLENECK_SWITCH][self.port].get(CLASS, {}).get("occupancy", 0))
                for t, snap in self.poller.polls if BOTTLENECK_SWITCH in snap]


def measure_base_rtt(lab: Lab, rate: LinkRate) -> float:
    """The least RTT of a slow acknowledged flow from the first sender to the receiver, seconds."""
    pps = rate.packets_per_s(FRAME)
    flow = FlowSpec(SENDERS[0], RECEIVER, "udp", 51900, ROCEV2_PORT, CALIBRATION_FRAMES, payload=PAYLOAD,
                    rate_pps=pps / 10, dscp=DSCP, priority=CLASS)
    hosts = {n: lab.host(n) for n in (flow.src, flow.dst)}
    probe = CcSettings("swift", rate.bits_per_s(FRAME), 0.01)
    r = drive.run_traffic(hosts, [flow], quiet=1.0, deadline=30, cc=probe)[0]
    if not r.sent or not r.sent.acks:
        raise RuntimeError(f"base RTT: no acknowledgement came back ({r.summary()})")
    return r.sent.rtt_min_us / 1e6


def physical_rtt(rate: LinkRate) -> float:
    """The incast path's store-and-forward RTT (`store_and_forward_rtt`): a full frame over
    PATH_LINKS links, an acknowledgement back."""
    return store_and_forward_rtt(rate, PATH_LINKS, FRAME, ACK_FRAME)


def predicted_queue(control: str, rate: LinkRate, control_rtt_s: float, measured_rtt_s: float,
                    flows: int = len(SENDERS)) -> str | None:
    """What the control's own parameters (scaled to ``control_rtt_s``) say the standing queue at
    the bottleneck is, packets, with ``flows`` long flows sharing it and the fabric's delay the
    measured unloaded RTT plus the queue's. Swift: the queue at which that delay meets the
    target, whose flow-scaling part grows as each flow's window ((BDP + q) / flows) shrinks: a
    fixed point. TIMELY: the RTT between T_low and T_high."""
    if control not in SENDER_CONTROLS:
        return None
    c = make_control(control, rate.bits_per_s(FRAME), control_rtt_s, FRAME)
    per_s = rate.packets_per_s(FRAME)
    if control == "timely":
        low, high = c.params.t_low_s, c.params.t_high_s
        return f"{max(0.0, low - measured_rtt_s) * per_s:.0f}-{max(0.0, high - measured_rtt_s) * per_s:.0f}"
    q = 0.0
    for _ in range(200):
        target = c.target_for(c.params.hops, (control_rtt_s * per_s + q) / flows)
        q = 0.5 * q + 0.5 * max(0.0, target - measured_rtt_s) * per_s
    return f"{q:.1f}"


def run_control(lab: Lab, control: str, flows: list[FlowSpec], rate: LinkRate, control_rtt_s: float) -> dict:
    hosts = {n: lab.host(n) for n in {f.src for f in flows} | {f.dst for f in flows}}
    classes = lab.lossless.classes
    klass = classes.config.klass(CLASS)
    agents = None
    cc = CcSettings(control, rate.bits_per_s(FRAME), control_rtt_s) if control in SENDER_CONTROLS else None
    try:
        if control == "dcqcn":
            classes.replace_class(replace(klass, ecn=EcnThresholds(ECN_PACKETS, ECN_PACKETS, 1.0)))
            agents = start_agents(hosts, AgentConfig("dcqcn", line_rate_bps=rate.bits_per_s(FRAME)),
                                  Path(lab.log_dir) / "cc-agents")
        deadline = 30 + 4 * sum(f.size for f in flows) / rate.packets_per_s(FRAME)
        with QueueSampler(lab) as queue:
            results = drive.run_traffic(hosts, flows, quiet=2.0, deadline=deadline, cc=cc,
                                        rate_control_port=RATE_CONTROL_PORT if agents else 0)
        samples = queue.samples()
    finally:
        if agents is not None:
            agents.stop()
            classes.replace_class(klass)
    return figures(control, results, samples, rate)


def figures(control: str, results, samples: list[tuple[float, int]], rate: LinkRate) -> dict:
    """One run's figures; the queue's are taken while the long flows ran (their first send to
    their last arrival), its samples kept as seconds from that start."""
    long = [r for r in results if r.flow.size > SHORT_FRAMES]
    short = [r for r in results if r.flow.size <= SHORT_FRAMES]
    fct = sorted(r.fct_s for r in short if r.fct_s is not None)
    got = [r.received for r in long if r.received is not None and r.received.unique]
    start = min((g.first_send for g in got), default=0.0)
    end = max((g.last_arrival for g in got), default=0.0)
    queue = [(round(t - start, 3), q) for t, q in samples if start <= t <= end]
    rates = [g.unique * FRAME * 8 / (g.last_arrival - g.first_send) for g in got if g.last_arrival > g.first_send]
    return {"control": control, **bottleneck(long, rate), "fairness": jain(rates),
            "short_fct_p50_ms": round(statistics.median(fct) * 1e3, 1) if fct else None,
            "short_fct_p99_ms": round(percentile(fct, 0.99) * 1e3, 1) if fct else None,
            "short_incomplete": len(short) - len(fct), "short_fct_ms": [round(f * 1e3, 2) for f in fct],
            "queue_median": statistics.median(q for _, q in queue) if queue else None,
            "queue_peak": max((q for _, q in queue), default=None),
            "lost": sum(r.lost for r in results),
            "acks_missing": sum(r.sent.acks_missing for r in results if r.sent is not None),
            "errors": [r.sent.error for r in results if r.sent is not None and r.sent.error],
            "queue": queue, "flows": [r.summary() for r in results],
            "rates": {r.id: r.sent.cc_trace for r in long if r.sent is not None and r.sent.cc_trace}}


def jain(values: list[float]) -> float | None:
    """Jain's fairness index: 1 when all are equal, 1/n when one takes everything."""
    if not values or not any(values):
        return None
    return round(sum(values) ** 2 / (len(values) * sum(x * x for x in values)), 3)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted ``values``."""
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


SUMMARY = ("bottleneck_util", "fairness", "short_fct_p50_ms", "short_fct_p99_ms", "short_incomplete",
           "queue_median", "queue_peak", "lost")
POOLED = ("short_fct_p50_ms", "short_fct_p99_ms", "short_incomplete")


def summarise(runs: list[dict], controls: list[str]) -> list[dict]:
    """Per control: medians over seeds, but the short flows pooled over them (their percentiles
    over every completed one, and how many of all did not complete)."""
    rows = []
    for control in controls:
        mine = [r for r in runs if r["control"] == control]
        row = {"control": control}
        for key in SUMMARY:
            values = [r[key] for r in mine if key not in POOLED and r.get(key) is not None]
            row[key] = statistics.median(values) if values else None
        fct = sorted(f for r in mine for f in r["short_fct_ms"])
        row.update(short_fct_p50_ms=round(statistics.median(fct), 1) if fct else None,
                   short_fct_p99_ms=round(percentile(fct, 0.99), 1) if fct else None,
                   short_incomplete=f"{sum(r['short_incomplete'] for r in mine)} of {SHORT_FLOWS * len(mine)}")
        rows.append(row)
    return rows


def run_args(args) -> int:
    t0 = time.monotonic()
    say = report.progress
    runs: list[dict] = []
    with Lab(fat_tree(4), target=args.target, progress=say, lossless=rdma_classes()) as lab:
        limit_links(lab, LinkPlan(args.rate, frame_bytes=FRAME))
        classes = lab.lossless.classes
        classes.replace_class(replace(classes.config.klass(CLASS), depth=args.buffer))
        measured_rtt, control_rtt = measure_base_rtt(lab, args.rate), physical_rtt(args.rate)
        say(f"links at {args.rate.describe()}, class {CLASS}'s queues {args.buffer} packets; unloaded RTT "
            f"{measured_rtt * 1e3:.2f} ms measured (least of {CALIBRATION_FRAMES} acknowledged datagrams), "
            f"{control_rtt * 1e3:.2f} ms store-and-forward: the controls' base RTT")
        cpu = CpuMeter(lab.target_pids)
        pps = args.rate.packets_per_s(FRAME)
        for seed in args.seeds:
            flows = incast_flows(seed, pps, args.long_seconds)
            for control in args.controls:
                say(f"seed {seed}: {control}")
                runs.append({"seed": seed, **run_control(lab, control, flows, args.rate, control_rtt)})
        share = cpu.read()
    rows = summarise(runs, args.controls)
    for row in rows:
        row["predicted_queue"] = predicted_queue(row["control"], args.rate, control_rtt, measured_rtt)
    print(report.table(["control", *SUMMARY, "predicted_queue"], [[r[k] for k in ("control", *SUMMARY,
                                                                                 "predicted_queue")] for r in rows],
                       title=f"incast 8 to 1 at {args.rate.describe()}, medians of seeds {args.seeds} "
                             f"(short flows pooled over them)"))
    print(f"CPU: machine {share.busy:.0%} busy, switches {share.switches:.0%}; "
          f"{time.monotonic() - t0:.0f} s in all")
    plot(args.png, runs, args.controls, args.seeds[0])
    report.write_json(args.json, {"rate": args.rate.to_dict(), "measured_rtt_s": measured_rtt,
                                  "control_rtt_s": control_rtt, "seeds": args.seeds,
                                  "buffer_packets": args.buffer,
                                  "long_seconds": args.long_seconds, "controls": args.controls,
                                  "cpu": {"busy": share.busy, "switches": share.switches},
                                  "summary": rows, "runs": runs})
    print(f"figures written to {Path(args.json).resolve()}, picture to {Path(args.png).resolve()}")
    broken = [r for r in runs if r["errors"]]
    for r in broken:
        print(f"failed: {r['control']}, seed {r['seed']}: {r['errors'][0]}")
    return 1 if broken else 0


def plot(path: str, runs: list[dict], controls: list[str], seed: int) -> None:
    """The bottleneck queue over time per control (first seed) and the short flows' FCTs."""
    plt = report.pyplot()
    fig, (queue_ax, fct_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for control in controls:
        run = next((r for r in runs if r["control"] == control and r["seed"] == seed), None)
        if run and run["queue"]:
            queue_ax.plot([t for t, _ in run["queue"]], [q for _, q in run["queue"]], label=control)
    queue_ax.set(title=f"bottleneck queue (seed {seed})", xlabel="s", ylabel="packets")
    queue_ax.legend()
    medians = summarise(runs, controls)
    x = range(len(controls))
    fct_ax.bar([i - 0.2 for i in x], [r["short_fct_p50_ms"] or 0 for r in medians], 0.4, label="median")
    fct_ax.bar([i + 0.2 for i in x], [r["short_fct_p99_ms"] or 0 for r in medians], 0.4, label="99th percentile")
    for i, r in enumerate(medians):      # what the bars leave out: flows that lost a datagram
        top = max(r["short_fct_p50_ms"] or 0, r["short_fct_p99_ms"] or 0)
        fct_ax.annotate(f"{r['short_incomplete']} incomplete", (i, top), ha="center",
                        va="bottom", fontsize=8)
    fct_ax.set_xticks(list(x), controls)
    fct_ax.set(title=f"short flows' completion ({SHORT_FRAMES} datagrams)", ylabel="ms")
    fct_ax.legend()
    report.save_figure(fig, path)
