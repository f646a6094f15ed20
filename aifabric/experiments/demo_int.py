"""``aifabric demo int``: congestion you can see, with INT and ECN on a k-ary fat-tree.

Brings the fabric up with ECN marking and INT-MD (`controller.telemetry.entries`), the
telemetry bridge and the INT collector (`aifabric.lab.lab.Lab(telemetry=...)`), and ECMP seeds.
The receiver's host-facing port is rate-limited (the target's queue rate) and given a deep
queue; one flow, from pod 0 to the receiver in the last pod, is on the INT watchlist.

1. Congested: the watched flow and several senders in other pods send ECN-capable (ECT(0)) UDP
   to the receiver, more than its port's rate: its queue builds up.
2. Alone: the same watched flow, same rate, nothing else.

For each run it shows the watched flow's INT path (switch names from the address plan and
ports, checked against the paths the controller installed) and each hop's latency and queue
depth (mean and max over the watched packets), the CE-marked packets counted at the receiver
from the IP ECN bits and by the switches' ``ecn_marked`` counters, and whether the receiver got
exactly the bytes that were sent (INT stripped by the sink). A PNG draws both runs per hop;
``--json`` writes the per-hop records and the counts.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aifabric.lab import report, traffic
from aifabric.lab.lab import Lab
from controller.fabric_controller import Pipeline
from controller.telemetry import entries as TE
from controller.telemetry.int_collector import FlowSummary
from controller.telemetry.int_report import FlowKey, HopRecord, metadata_bytes
from controller.paths import PathHop, installed_paths, path_of_int
from controller.telemetry.entries import TelemetryConfig, WatchRule
from topologies.fabric import Fabric, fat_tree

INT_BITMAP = 0xFC00  # the fabric's instruction set (p4src/README.md)
INT_HEADER_BYTES = 16  # shim + INT-MD header, added once per packet
WATCHED_SPORT = 40000
DPORT = 5001
PAYLOAD = 200  # UDP payload bytes per datagram
ECT0 = 0x02
DEFAULT_PNG = "out/int_demo.png"
MAX_SECONDS = 600.0  # a run longer than ten minutes is a benchmark, not a demo


@dataclass(frozen=True)
class DemoPlan:
    """Who sends to whom, how fast, and how the receiver's port is limited."""

    receiver: str
    watched: str
    congestors: tuple[str, ...]
    queue_rate_pps: int = 100  # the receiver's host-facing port
    queue_depth: int = 1024  # deep enough that nothing is dropped: received bytes == sent bytes
    watched_pps: int = 25
    congestor_pps: int = 60
    seconds: float = 3.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.seconds) and 0 < self.seconds <= self.max_seconds):
            raise ValueError(
                f"demo int --seconds {self.seconds:g}: must be > 0 and at most {self.max_seconds:.1f} s (the "
                f"receiver's queue of {self.queue_depth} packets fills at {self.excess_pps} packets/s while "
                f"congested; a longer run would drop packets)")

    @property
    def excess_pps(self) -> int:
        """How much faster the congested run offers packets than the receiver's port sends them."""
        return self.watched_pps + self.congestor_pps * len(self.congestors) - self.queue_rate_pps

    @property
    def max_seconds(self) -> float:
        """The longest run whose backlog the receiver's queue holds without a drop (MAX_SECONDS at most)."""
        return min(MAX_SECONDS, self.queue_depth / self.excess_pps) if self.excess_pps > 0 else MAX_SECONDS

    @classmethod
    def for_fat_tree(cls, fabric: Fabric, **kw: object) -> "DemoPlan":
        k = fabric.params["k"]
        if k < 4:
            raise ValueError(f"demo int needs a fat-tree with k >= 4 (pods for the senders), got k={k}")
        half = k // 2
        receiver = f"p{k - 1}e{half - 1}h{half - 1}"
        others = [f"p{p}e{e}h0" for p in range(1, k - 1) for e in range(half)]
        return cls(receiver=receiver, watched="p0e0h0", congestors=tuple(others[:3]), **kw)  # type: ignore[arg-type]


@dataclass
class PhaseResult:
    name: str
    path: list[dict] = field(default_factory=list)  # per hop: switch, ports, latency/queue stats
    reports: int = 0
    records: list[list[dict]] = field(default_factory=list)  # per report: its hops
    sent_packets: int = 0
    sent_bytes: int = 0
    received_packets: int = 0
    received_bytes: int = 0
    corrupt: int = 0
    ce_watched: int = 0  # at the receiver, from the IP ECN bits
    ce_all: int = 0
    ecn_marked: dict[str, int] = field(default_factory=dict)  # switch counters, "switch:port" -> delta
    matches_installed_path: bool = False
    hop_count: int = 0
    senders: dict[str, traffic.SentFlow] = field(default_factory=dict)  # every sender's count and duration

    @property
    def ecn_marked_total(self) -> int:
        return sum(self.ecn_marked.values())


def run(
    k: int = 4,
    target: str = "softswitch",
    json_path: str | None = None,
    png_path: str | None = None,
    pipeline: Pipeline | None = None,
    seconds: float = 3.0,
) -> int:
    fabric = fat_tree(k)
    plan = DemoPlan.for_fat_tree(fabric, seconds=seconds)
    say = report.progress
    src, dst = fabric.host(plan.watched), fabric.host(plan.receiver)
    flow = watched_flow(fabric, plan)
    telemetry = telemetry_for(flow)
    figures: dict = {"topology": f"fat-tree k={k}", "target": target, "flow": str(flow), "plan": asdict(plan)}
    t_start = time.monotonic()

    with Lab(fabric, target=target, pipeline=pipeline, progress=say, telemetry=telemetry) as lab:
        figures["target"] = lab.switch(fabric.switches[0].name).target_kind
        limit_receiver_port(lab, plan)
        say(f"{dst.switch} port {dst.port} (to {dst.name}) limited to {plan.queue_rate_pps} packets/s, "
            f"queue depth {plan.queue_depth}")
        assert lab.controller is not None
        expected = installed_paths(fabric, lab.controller.forwarding, src.name, dst.name)
        figures["installed_paths"] = [[asdict(h) for h in p] for p in expected]
        phases = []
        for name, congest in (("congested", True), ("alone", False)):
            phases.append(run_phase(lab, plan, flow, expected, name, congest))
        figures["collector"] = asdict(lab.collector.counters()) if lab.collector else {}
    figures["wall_s"] = round(time.monotonic() - t_start, 1)

    congested, alone = phases
    hops = max(congested.hop_count, alone.hop_count)
    figures["int_bytes"] = {"per_hop": metadata_bytes(INT_BITMAP),
                            "per_packet": INT_HEADER_BYTES + metadata_bytes(INT_BITMAP) * hops, "hops": hops}
    figures["phases"] = {p.name: {**asdict(p), "ecn_marked_total": p.ecn_marked_total} for p in phases}

    _print_tables(flow, congested, alone, figures)
    checks = _checks(congested, alone)
    png = Path(png_path or DEFAULT_PNG)
    draw(png, congested, alone, flow)
    figures["checks"] = checks
    report.say_written(png, json_path, figures)
    failed = [c for c, ok in checks.items() if not ok]
    if failed:
        print("\nchecks that failed: " + ", ".join(failed))
    unmeasured = report.say_failed(figures)
    return 0 if not failed and not unmeasured else 1


def _read_ecn(lab: Lab) -> dict[str, int]:
    assert lab.controller is not None
    out = {}
    for sw in lab.fabric.switches:
        for port, c in lab.controller.read_port_counters(sw.name, TE.ECN_MARKED).items():
            out[f"{sw.name}:{port}"] = c.packets
    return out


def watched_flow(fabric: Fabric, plan: DemoPlan) -> FlowKey:
    src, dst = fabric.host(plan.watched), fabric.host(plan.receiver)
    return FlowKey(str(src.ip4.ip), str(dst.ip4.ip), 17, WATCHED_SPORT, DPORT)


def telemetry_for(flow: FlowKey) -> TelemetryConfig:
    """ECN on every port (default thresholds) and INT on the one watched flow."""
    return TelemetryConfig(watchlist=(WatchRule.flow(flow.src_ip, flow.dst_ip, flow.protocol, flow.src_port, flow.dst_port),))


def limit_receiver_port(lab: Lab, plan: DemoPlan) -> None:
    """The congested link: the receiver's host-facing port at ``queue_rate_pps``, deep queue."""
    dst = lab.fabric.host(plan.receiver)
    edge = lab.switch(dst.switch)
    edge.set_queue_rate(plan.queue_rate_pps, dst.port)
    edge.set_queue_depth(plan.queue_depth, dst.port)


def run_phase(lab: Lab, plan: DemoPlan, flow: FlowKey, expected: list[tuple[PathHop, ...]], name: str,
              congest: bool) -> PhaseResult:
    """One run: the watched flow (and the congestors when ``congest``) to the receiver, then
    what INT, the receiver and the switches' ECN counters saw."""
    say = report.progress
    fabric = lab.fabric
    names = {sw.device_id: sw.name for sw in fabric.switches}
    assert lab.collector is not None
    lab.collector.reset_flows()
    ecn_before = _read_ecn(lab)
    dst = fabric.host(plan.receiver)
    count = int(plan.watched_pps * plan.seconds)
    limit = plan.seconds * 4 + 30
    rx = traffic.start_receiver(lab.host(plan.receiver), DPORT, quiet=2.5, limit=limit)
    senders = [(plan.watched, traffic.start_paced_sender(lab.host(plan.watched), str(dst.ip4.ip), WATCHED_SPORT, DPORT,
                                                         plan.watched_pps, count, ECT0, PAYLOAD))]
    if congest:
        for i, host in enumerate(plan.congestors, start=1):
            senders.append((host, traffic.start_paced_sender(
                lab.host(host), str(dst.ip4.ip), WATCHED_SPORT + i, DPORT, plan.congestor_pps,
                int(plan.congestor_pps * plan.seconds), ECT0, PAYLOAD)))
    who = ", ".join(h for h, _ in senders)
    offered = plan.watched_pps + (plan.congestor_pps * len(plan.congestors) if congest else 0)
    say(f"{name}: {who} -> {plan.receiver}, {offered} packets/s offered to a {plan.queue_rate_pps} packets/s port, "
        f"{plan.seconds:g} s")
    sent = {h: traffic.sender_result(p) for h, p in senders}
    received = traffic.receiver_result(rx)
    lab.collector.wait_quiet(quiet=1.0, timeout=15)
    summary = lab.collector.flow(flow)
    history = lab.collector.history(flow)
    ecn_after = _read_ecn(lab)

    result = PhaseResult(name, senders=sent)
    watched_key = f"{flow.src_ip}:{flow.src_port}"
    got = received.get(watched_key)
    result.sent_packets, result.sent_bytes = sent[plan.watched].sent, sent[plan.watched].bytes
    if got is not None:
        result.received_packets, result.received_bytes = got.packets, got.bytes
        result.corrupt, result.ce_watched = got.corrupt, got.ce
    result.ce_all = sum(r.ce for r in received.values())
    result.ecn_marked = {k: v - ecn_before.get(k, 0) for k, v in ecn_after.items() if v - ecn_before.get(k, 0)}
    if summary is not None:
        result.reports = summary.reports
        result.hop_count = summary.hop_count
        result.path = _hop_rows(summary, names)
        result.records = [[_record(h, names) for h in r.path] for _, r in history]
        result.matches_installed_path = path_of_int(summary.path, names) in expected
    say(f"{name}: {result.reports} INT reports of the watched flow, receiver got {result.received_packets}/"
        f"{result.sent_packets} packets, {result.ce_all} CE-marked")
    return result


def _record(hop: HopRecord, names: dict[int, str]) -> dict:
    return {"switch": names.get(hop.switch_id or 0, str(hop.switch_id)), **{k: v for k, v in asdict(hop).items() if v is not None}}


def _hop_rows(summary: FlowSummary, names: dict[int, str]) -> list[dict]:
    rows = []
    for hop, stats in zip(summary.path, summary.hops):
        rows.append({
            "switch": names.get(hop.switch_id or 0, str(hop.switch_id)),
            "switch_id": hop.switch_id,
            "ingress_port": hop.ingress_port,
            "egress_port": hop.egress_port,
            "samples": stats.samples,
            "latency_mean_us": _carried(stats.latency_mean_us, "hop latency"),
            "latency_max_us": _carried(stats.latency_max_us, "hop latency"),
            "queue_mean": _carried(stats.queue_mean, "queue occupancy"),
            "queue_max": _carried(stats.queue_max, "queue occupancy"),
        })
    return rows


def _carried(value: float | None, what: str) -> report.Measured[float]:
    """A hop figure, or failed when none of the hop's INT reports carried it."""
    return report.Failed(f"no INT report carried this hop's {what}") if value is None else round(value, 1)


def _at_most(value: report.Measured[float], limit: float) -> bool:
    """A measured figure within ``limit`` (a failed one is not)."""
    return not isinstance(value, report.Failed) and value <= limit


def _checks(congested: PhaseResult, alone: PhaseResult) -> dict[str, bool]:
    checks = {}
    for p in (congested, alone):
        checks[f"{p.name}: INT reports received"] = p.reports > 0
        checks[f"{p.name}: hop count == installed path length"] = p.matches_installed_path and p.hop_count == len(p.path)
        checks[f"{p.name}: receiver bytes == sent bytes"] = (
            p.received_bytes == p.sent_bytes and p.received_packets == p.sent_packets and p.corrupt == 0)
    if congested.path:
        last, others = congested.path[-1], congested.path[:-1]
        checks["congested: queue rises at the rate-limited hop only"] = (
            not isinstance(last["queue_max"], report.Failed) and last["queue_max"] >= 10
            and all(_at_most(h["queue_max"], 3) for h in others))
    checks["congested: packets marked CE"] = congested.ce_all > 0 and congested.ecn_marked_total > 0
    checks["alone: no queue, no CE"] = alone.ce_watched == 0 and all(_at_most(h["queue_max"], 3) for h in alone.path)
    return checks


def _print_tables(flow: FlowKey, congested: PhaseResult, alone: PhaseResult, figures: dict) -> None:
    hops = congested.path or alone.path
    print(f"\nINT path of the watched flow {flow} "
          f"({'the' if congested.matches_installed_path else 'NOT the'} path the controller installed):")
    rows = []
    for i, hop in enumerate(hops):
        quiet = alone.path[i] if i < len(alone.path) else {}
        rows.append((i + 1, hop["switch"], hop["ingress_port"], hop["egress_port"],
                     hop["latency_mean_us"], hop["latency_max_us"], hop["queue_mean"], hop["queue_max"],
                     quiet.get("latency_mean_us", "-"), quiet.get("latency_max_us", "-"),
                     quiet.get("queue_mean", "-"), quiet.get("queue_max", "-")))
    print(report.table(
        ["hop", "switch", "in", "out", "lat mean us", "lat max us", "queue mean", "queue max",
         "alone: lat mean", "lat max", "queue mean", "queue max"], rows,
        title="\nPer hop, congested run (left) and the same flow alone (right); queue in packets"))
    b = figures["int_bytes"]
    print(report.table(["figure", "congested", "alone"], [
        ("watched packets sent / received", f"{congested.sent_packets} / {congested.received_packets}",
         f"{alone.sent_packets} / {alone.received_packets}"),
        ("watched bytes sent / received", f"{congested.sent_bytes} / {congested.received_bytes}",
         f"{alone.sent_bytes} / {alone.received_bytes}"),
        ("INT reports of the watched flow", congested.reports, alone.reports),
        ("CE-marked at the receiver (watched flow)", congested.ce_watched, alone.ce_watched),
        ("CE-marked at the receiver (all flows)", congested.ce_all, alone.ce_all),
        ("ecn_marked counters of the switches", congested.ecn_marked_total, alone.ecn_marked_total),
        ("INT bytes per hop / per packet", f"{b['per_hop']} / {b['per_packet']}", f"{b['per_hop']} / {b['per_packet']}"),
    ], title="\nCounts"))
    marks = ", ".join(f"{k}: {v}" for k, v in sorted(congested.ecn_marked.items())) or "none"
    print(f"\nswitch ports that marked CE (congested run): {marks}")


def _plotted(value: report.Measured[float]) -> float:
    """A figure for the picture: a failed one is left out (NaN draws nothing; the table says why)."""
    return float("nan") if isinstance(value, report.Failed) else value


def draw(path: Path, congested: PhaseResult, alone: PhaseResult, flow: FlowKey) -> None:
    """Per-hop queue depth and latency (mean bars, max markers) for both runs, and the
    congested hop's queue over the watched packets."""
    plt = report.pyplot()
    hops = congested.path or alone.path
    labels = [f"{i + 1}. {h['switch']}\n{h['ingress_port']}->{h['egress_port']}" for i, h in enumerate(hops)]
    x = list(range(len(hops)))
    width = 0.38
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, key, unit in ((axes[0], "queue", "packets"), (axes[1], "latency", "µs")):
        for offset, phase, color in ((-width / 2, congested, "tab:red"), (width / 2, alone, "tab:blue")):
            means = [_plotted(h[f"{key}_mean" if key == "queue" else "latency_mean_us"]) for h in phase.path]
            maxes = [_plotted(h[f"{key}_max" if key == "queue" else "latency_max_us"]) for h in phase.path]
            xs = [i + offset for i in range(len(phase.path))]
            ax.bar(xs, means, width, color=color, alpha=0.75, label=f"{phase.name}: mean")
            ax.scatter(xs, maxes, color=color, marker="v", zorder=3, label=f"{phase.name}: max")
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylabel(unit)
        ax.set_title("queue depth per hop" if key == "queue" else "hop latency per hop")
        if key == "latency":
            ax.set_yscale("symlog", linthresh=100)
        ax.legend(fontsize=8)
    ax = axes[2]
    for phase, color in ((congested, "tab:red"), (alone, "tab:blue")):
        series = [r[-1].get("queue_occupancy", 0) for r in phase.records if r]
        ax.plot(range(len(series)), series, color=color, label=f"{phase.name}")
    last = hops[-1]["switch"] if hops else "last hop"
    ax.set_title(f"queue at {last} for each watched packet")
    ax.set_xlabel("watched packet (report order)")
    ax.set_ylabel("packets")
    ax.legend(fontsize=8)
    fig.suptitle(f"INT of {flow}: congested vs alone (CE at receiver: {congested.ce_all} vs {alone.ce_all})")
    report.save_figure(fig, path)
