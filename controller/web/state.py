"""The fabric's live state as one JSON document, from whatever the controller runs.

`FabricView(controller, ...)` reads, each time `snapshot()` is called:

* the switches as the controller sees them (session, in sync) and each one's load-balancing mode
  (the `LbModes` state source when one is registered, else the program's default, ECMP);
* each link direction's load (`controller.web.loads.LinkLoads`);
* the hot ports' queues: the INT collector's latest and peak queue occupancy and hop latency at
  each sending port (only ports INT saw);
* failures as failure handling sees them (the running `FailureHandler`'s failed links and switches
  and dead ports), the links the controller routes around (its topology model) and the links a
  change request took down (``injected``: what the server's `Changes` did);
* TE pins (`TeOverrides`) as paths, one per pinned flow;
* AllReduce jobs (`JobManager`) with their trees and progress (`controller.web.jobs.JobWatch`);
* the INT paths of the most recently seen flows, each hop with its switch, ports, latency and
  queue: the page's watched flow is one of them;
* the link directions PFC holds paused, and in which classes (``pfc``: a `ClassPoller`'s latest
  figures, `controller.lossless`).

No feature is required: what the controller does not run is absent (``null``) and the page
says so. The builders of each part are plain functions of plain inputs, tested without a fabric.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping

from controller.aggregation import JobManager
from controller.failover.handler import running_handler
from controller.load_balance import LbModes, Pin, TeOverrides
from controller.lossless.metrics import paused_ports
from controller.web.jobs import JobWatch
from controller.web.loads import LinkLoads
from controller.web.topology import Direction, directions, topology_json
from topologies.fabric import Fabric

FLOWS_SHOWN = 8            # INT flows listed (the most recently seen)
DEFAULT_LB_MODE = "ecmp"   # p4src/include/control/load_balance.p4: lb_mode's default action


def queues_json(ports: Mapping[tuple[int, int], object], names: Mapping[int, str],
                dirs: Iterable[Direction]) -> dict[str, dict]:
    """direction id -> INT's latest and peak queue occupancy (packets) and hop latency (us) at
    the sending port; ``ports``: the collector's (switch id, egress port) -> `PortTelemetry`."""
    by_port = {(d.src, d.port): d.id for d in dirs}
    out: dict[str, dict] = {}
    for (switch_id, port), pt in ports.items():
        direction = by_port.get((names.get(switch_id, str(switch_id)), port))
        if direction is None:
            continue
        out[direction] = {"queue": pt.queue_occupancy, "queue_peak": pt.queue_occupancy_peak,    # type: ignore[attr-defined]
                          "latency_us": pt.hop_latency_us, "latency_peak_us": pt.hop_latency_peak_us}  # type: ignore[attr-defined]
    return out


def paused_json(ports: Mapping[tuple[str, int], dict], dirs: Iterable[Direction]) -> dict[str, list[int]]:
    """direction id -> the classes PFC holds it paused in: its sender's queue paused (the
    receiver asked), or its receiver holding it (what a switch says of a host's link to it);
    ``ports``: `controller.lossless.paused_ports`."""
    out: dict[str, list[int]] = {}
    for d in dirs:
        held = {*ports.get((d.src, d.port), {}).get("paused", ()), *ports.get((d.dst, d.dst_port), {}).get("pausing", ())}
        if held:
            out[d.id] = sorted(held)
    return out


def flow_json(summary, names: Mapping[int, str], now: float) -> dict:
    """One INT flow (`FlowSummary`): its latest path, source first, hop by hop."""
    hops = []
    for hop in summary.path:
        name = names.get(hop.switch_id, str(hop.switch_id)) if hop.switch_id is not None else None
        hops.append({"switch": name, "ingress_port": hop.ingress_port, "egress_port": hop.egress_port,
                     "latency_us": hop.hop_latency_us, "queue": hop.queue_occupancy})
    return {"flow": str(summary.flow), "reports": summary.reports, "paths_seen": summary.paths_seen,
            "seen_s_ago": round(max(0.0, now - summary.last_seen), 1), "hops": hops}


def te_paths_json(fabric: Fabric, pins: Iterable[Pin]) -> list[dict]:
    """The pins of each flow as one path: [switch, next node] per pinned hop, in path order
    (from the pin no other pin leads to)."""
    flows: dict[tuple, list[Pin]] = {}
    for p in pins:
        flows.setdefault((p.src_ip, p.dst_ip, p.proto, p.sport, p.dport), []).append(p)
    out = []
    for (src, dst, proto, sport, dport), hops in sorted(flows.items()):
        step = {p.switch: fabric.ports_of(p.switch).get(p.port, f"port {p.port}") for p in hops}
        starts = [s for s in step if s not in step.values()] or sorted(step)
        path, cur = [], starts[0]
        while cur in step and len(path) < len(step):
            path.append([cur, step[cur]])
            cur = step[cur]
        path += [[s, n] for s, n in sorted(step.items()) if [s, n] not in path]    # pins off the chain
        name = {6: "tcp", 17: "udp"}.get(proto, str(proto))
        out.append({"flow": f"{name} {src}:{sport} -> {dst}:{dport}", "hops": path})
    return out


def failures_json(handler, routed_around: list[tuple[str, str]], injected: Mapping[str, list] | None) -> dict:
    """Failures as failure handling sees them (``handler``: a running `FailureHandler` or None),
    the links routes avoid, and what change requests took down."""
    detected = None
    if handler is not None:
        detected = {"failures": [{"kind": f.kind, "name": f.name, "links": list(f.links)} for f in handler.failures()],
                    "dead_ports": sorted([list(p) for p in handler.dead_ports()])}
    return {"handling": handler is not None, "detected": detected,
            "routed_around": [list(pair) for pair in routed_around],
            "injected": dict(injected) if injected is not None else None}


def _source(controller, kind: type):
    return next((s for s in getattr(controller, "state_sources", []) if isinstance(s, kind)), None)


class FabricView:
    """The live state of one `FabricController` (and its INT collector, if any)."""

    def __init__(self, controller, *, int_collector=None, loads: LinkLoads | None = None,
                 injected: Callable[[], Mapping[str, list]] | None = None,
                 clock: Callable[[], float] = time.monotonic, classes=None) -> None:
        """``classes``: a `controller.lossless.ClassPoller` (PFC's paused links), or None."""
        self.controller = controller
        self.classes = classes
        self.fabric: Fabric = controller.fabric
        self.int_collector = int_collector
        self.loads = loads
        self.injected = injected
        self.clock = clock
        self.directions = directions(self.fabric)
        self.switch_names = {sw.name for sw in self.fabric.switches}
        self.names_by_id = {sw.device_id: sw.name for sw in self.fabric.switches}
        self.jobs = JobWatch(controller.read_port_counters)
        self._topology = topology_json(self.fabric)
        self._seq = 0

    def topology(self) -> dict:
        return self._topology

    def lb_modes(self) -> dict[str, dict]:
        modes = _source(self.controller, LbModes)
        if modes is None:
            return {name: {"mode": DEFAULT_LB_MODE, "set": False} for name in sorted(self.switch_names)}
        return {name: {"mode": modes.mode(name), "set": True} for name in sorted(self.switch_names)}

    def switches_json(self) -> dict[str, dict]:
        lb = self.lb_modes()
        return {name: {"connected": st.connected, "in_sync": st.in_sync, "last_error": st.last_error,
                       "lb_mode": lb[name]["mode"], "lb_mode_set": lb[name]["set"]}
                for name, st in sorted(self.controller.status().items())}

    def snapshot(self) -> dict:
        self._seq += 1
        now = self.clock()
        snap = None if self.int_collector is None else self.int_collector.snapshot()
        te = _source(self.controller, TeOverrides)
        manager = _source(self.controller, JobManager)
        recent = [] if snap is None else sorted(snap.flows.values(), key=lambda f: f.last_seen, reverse=True)
        return {
            "seq": self._seq,
            "time": time.time(),
            "switches": self.switches_json(),
            "loads": None if self.loads is None else self.loads.loads(self.directions, self.switch_names),
            "link_rates": None if self.loads is None else {
                "nominal_bps": self.loads.rates.nominal_bps,
                "queue_pps": {f"{n}:{p}": r for (n, p), r in sorted(self.loads.rates.queue_pps.items())}},
            "queues": None if snap is None else queues_json(snap.ports, self.names_by_id, self.directions),
            "failures": failures_json(running_handler(self.controller), self.controller.model.down_links(),
                                      self.injected() if self.injected is not None else None),
            "te_paths": None if te is None else te_paths_json(self.fabric, te.pins),
            "jobs": None if manager is None else self.jobs.update(dict(manager.jobs)),
            "flows": None if snap is None else [flow_json(f, self.names_by_id, snap.taken)
                                                for f in recent[:FLOWS_SHOWN]],
            "pfc": None if self.classes is None else paused_json(paused_ports(self.classes.snapshot()),
                                                                 self.directions),
            "read_errors": {
                **({} if self.loads is None else self.loads.errors),
                "agg_ops": {"count": sum(self.jobs.read_errors.values()), "last": self.jobs.last_error}},
        }
