"""Failover measured on a k=4 fat-tree: the logic behind `benchmarks/failover.py`.

One run: a steady stream of numbered UDP probes (`aifabric.lab.probe`, ``probe_pps`` a second)
and a long UDP flow (``flow_pps``) from the first host of pod 0 to the last host of pod 3;
after ``warmup_s`` the element on the probes' path (found from the switches' egress port
counters during the warm-up) fails (`aifabric.lab.failures.Failures`), ``down_s`` later it is
restored. From the receiver's timestamps (CLOCK_MONOTONIC, the injector's clock too):

* ``outage_ms``: from the failure to the first probe delivered after the last probe lost;
  ``loss_ms``: the probes lost times the probe interval (loss-derived convergence time, as
  RFC 6413 measures it: the time traffic stopped, however many pieces it came in);
  ``path_back_ms``: from the failure to when that probe was sent (the path worked again then;
  the difference is the probes' one-way latency, ``latency_ms`` before the failure, which
  the switches' CPU share sets);
* ``probes_lost`` (around the failure), ``flow_lost`` (the long flow, whole run);
* ``recovered_by``: ``fabric`` when probes flowed again while the element was still down,
  ``restore`` when only the repair brought them back;
* for the heartbeat scenarios the handler's own times (`controller.failover.FailureHandler`:
  port found dead, ``port_status`` written, reroute finished), relative to the failure;
* ``moved_healthy``: packets the switches moved off a port to its backup during the warm-up,
  when nothing had failed (counter ``failed_over``, all switches): spurious silences, which
  reorder packets but lose none while the backup is alive;
* ``false_dead``: ports the controller's heartbeats found dead that the failure did not silence
  (summed over the runs), and ``stretched_ms``: the most a verdict of death waited beyond the
  detection time because heartbeats were arriving late (`controller.failover.monitor`);
  ``link_timeout_ms``: the data plane's link-heartbeat timeout at the end of the run, as failure
  handling raised it where switches skipped healthy ports (`controller.failover.link_timeout`;
  each run's handler starts from what the runs before it reached).

Scenarios (``SCENARIOS``):

* ``none``: no failure handling; the ECMP group keeps its dead member until the repair;
* ``heartbeat``: the failover handler (the bench's `HeartbeatConfig`, link heartbeats on): data-plane
  failover (``port_status`` written as soon as a port is dead) and then controller reroute;
* ``dataplane``: data-plane failover alone: the same handler with ``reroute=False``, so traffic
  comes back only through the switches' backup members (on the probes' path the failed link's
  aggregation switch has another core port; the way back down has none, and waits for the repair);
  the switches skip the dead port as soon as its link heartbeats stop (``link_interval_ms`` x
  ``link_multiplier``), the controller's ``port_status`` follows later;
* ``dataplane-controller``: the same with link heartbeats off: the data plane waits for the
  controller's heartbeats to find the port dead and write ``port_status``;
* ``oracle``: controller reroute alone, no heartbeats: the injector tells the controller's
  topology model the moment the link fails and every switch is reconciled (detection time zero);
* ``agg-kill`` (with heartbeats when available, else the oracle), ``agg-kill-oracle``: the
  aggregation switch on the probes' path killed (its process), restarted ``down_s`` later;
* ``allreduce`` (heartbeats, else the oracle), ``allreduce-oracle``: a core link failure with an
  in-network AllReduce of 4 workers running across it; its result must be exact (every worker
  checks it): ``exact``, ``WRONG``, or ``not run`` when the job could not start.

Times are counted from `failed_at` (the first end of the link told to go down, the switch killed).
The machine's CPU busy share over each run is reported (``/proc/stat``) to show it was not the
bottleneck.
"""
from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from aifabric.experiments.allreduce_lab import run_allreduce, spread_workers
from aifabric.lab.cpu_meter import cpu_times
from aifabric.lab.links import LinkPlan, LinkRate, limit_links
from aifabric.lab.failures import FailureEvent, Failures
from aifabric.lab.lab import Lab
from controller.failover import HeartbeatConfig, start_failure_handling
from topologies.fabric import Role

SCENARIOS = ("none", "heartbeat", "dataplane", "dataplane-controller", "oracle", "agg-kill", "agg-kill-oracle",
             "allreduce", "allreduce-oracle")
PROBE_PORT, FLOW_PORT = 7000, 7001
Progress = Callable[[str], None]


@dataclass(frozen=True)
class FailoverPlan:
    rate: LinkRate = LinkRate.parse("10M")   # every link direction, in the switches (and host uplinks, TBF)
    probe_pps: int = 1000
    flow_pps: int = 300
    flow_payload: int = 256
    warmup_s: float = 2.0
    down_s: float = 3.0
    after_s: float = 2.0
    allreduce_elements: int = 262144   # 4096 packets per worker: seconds at these rates
    restart_s: float = 6.0           # agg-kill: more stream after the repair (a restart takes seconds)

    @property
    def seconds(self) -> float:
        return self.warmup_s + self.down_s + self.after_s

    def links(self) -> LinkPlan:
        return LinkPlan(self.rate)


@dataclass
class FailoverRun:
    scenario: str
    run: int
    element: str = ""
    fail: FailureEvent | None = None
    restore: FailureEvent | None = None
    probes_sent: int = 0
    probes_lost: int = 0
    flow_sent: int = 0
    flow_lost: int = 0
    outage_ms: float | None = None
    loss_ms: float | None = None          # probes lost x probe interval
    path_back_ms: float | None = None     # send time of that first probe delivered again - the failure
    latency_ms: float | None = None       # probes' median one-way latency before the failure
    recovered_by: str = ""
    detected_ms: float | None = None      # handler: first port found dead
    written_ms: float | None = None       # handler: its port_status written
    reroute_ms: float | None = None       # handler: reroute finished / oracle: reconcile done
    moved_healthy: int | None = None      # packets moved to a backup before anything failed
    false_dead: int | None = None         # handler: ports found dead that were not the failed element's
    stretched_ms: float | None = None     # handler: most a verdict of death waited for late heartbeats
    link_timeout_ms: float | None = None  # handler: the data plane's link timeout at the end of the run
    cpu_busy: float = 0.0
    allreduce_ok: bool | None = None
    allreduce: dict = field(default_factory=dict)
    arrivals: list = field(default_factory=list)    # (ms since the failure, seq) of every probe
    errors: list[str] = field(default_factory=list)

    def figures(self) -> dict:
        return {"scenario": self.scenario, "run": self.run, "element": self.element,
                "outage_ms": _r(self.outage_ms), "loss_ms": _r(self.loss_ms), "path_back_ms": _r(self.path_back_ms),
                "latency_ms": _r(self.latency_ms), "recovered_by": self.recovered_by,
                "probes_sent": self.probes_sent, "probes_lost": self.probes_lost,
                "flow_sent": self.flow_sent, "flow_lost": self.flow_lost,
                "detected_ms": _r(self.detected_ms), "written_ms": _r(self.written_ms),
                "reroute_ms": _r(self.reroute_ms), "moved_healthy": self.moved_healthy,
                "false_dead": self.false_dead, "stretched_ms": _r(self.stretched_ms),
                "link_timeout_ms": _r(self.link_timeout_ms),
                "cpu_busy": round(self.cpu_busy, 2),
                "allreduce_ok": self.allreduce_ok, "allreduce": self.allreduce,
                "fail": self.fail.to_dict() if self.fail else None,
                "restore": self.restore.to_dict() if self.restore else None, "errors": self.errors}


def _element_ports(handler, element: str) -> set[tuple[str, int]]:
    """The monitored ports a failure of ``element`` ("agg-core": a link, "agg": a switch) silences."""
    names = set(element.split("-"))      # a link's two switches, or the one switch: on every link it names
    return {end for link in handler.links if names <= {link.a, link.b} for end in link.ends()}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


class Bench:
    """One lab, its links limited, the failover handler started and stopped per scenario."""

    def __init__(self, lab: Lab, plan: FailoverPlan, progress: Progress, out_dir: Path,
                 beats: HeartbeatConfig | None = None) -> None:
        self.lab, self.plan, self.progress = lab, plan, progress
        self.beats = beats or HeartbeatConfig()     # the heartbeat scenarios' settings
        self.out_dir = out_dir
        self.handler = None
        self.link_timeout_us: int | None = None    # the data plane's link timeout as the handlers raised it
        self._jobs = None
        hosts = lab.fabric.hosts
        self.src, self.dst = hosts[0].name, hosts[-1].name
        limit_links(lab, plan.links())

    # --- failure handling on/off ---------------------------------------------------------------

    def _handler_on(self, reroute: bool, link_heartbeats: bool) -> None:
        config = self.beats if link_heartbeats else replace(self.beats, link_interval_ms=None)
        # the link timeout as earlier runs raised it: one handler running all along would have it
        self.handler = start_failure_handling(self.lab.controller, config, reroute=reroute,
                                              link_timeout_us=self.link_timeout_us)
        time.sleep(self.handler.config.grace_ms / 1000 + 0.5)

    def _handler_off(self) -> None:
        if self.handler is not None:
            self.handler.stop()             # its threads joined: the timeout is final
            if self.handler.link_timeout_us is not None:
                self.link_timeout_us = self.handler.link_timeout_us
            self.handler = None
            self.lab.controller.wait_in_sync(30)

    # --- one run -------------------------------------------------------------------------------

    def run(self, scenario: str, n: int) -> FailoverRun:
        oracle = scenario.endswith("oracle")
        heartbeats = scenario != "none" and not oracle
        result = FailoverRun(scenario, n)
        if heartbeats:
            self._handler_on(reroute=not scenario.startswith("dataplane"),
                             link_heartbeats=scenario != "dataplane-controller")
        failures = Failures(self.lab, inform_controller=oracle)
        try:
            self._run(scenario, n, failures, result)
        finally:
            if heartbeats:
                self._collect_handler(result)
                self._handler_off()
            self.lab.controller.wait_in_sync(30)
        return result

    def _run(self, scenario: str, n: int, failures: Failures, result: FailoverRun) -> None:
        plan, lab = self.plan, self.lab
        files = {k: self.out_dir / f"{scenario}-{n}-{k}.json" for k in ("probe_rx", "probe_tx", "flow_rx", "flow_tx")}
        dst_ip = str(lab.fabric.host(self.dst).ip4.ip)
        kill = scenario.startswith("agg-kill")
        seconds = plan.seconds + (plan.restart_s if kill else 0.0)
        rx_s = seconds + 2.0
        procs = [lab.host(self.dst).popen(_probe("recv", "--port", PROBE_PORT, "--seconds", rx_s, "--out", files["probe_rx"])),
                 lab.host(self.dst).popen(_probe("recv", "--port", FLOW_PORT, "--seconds", rx_s, "--out", files["flow_rx"]))]
        time.sleep(0.5)
        sport = 40000 + 7 * n
        procs += [lab.host(self.src).popen(_probe("send", "--dst", dst_ip, "--port", PROBE_PORT, "--sport", sport,
                                                  "--rate", plan.probe_pps, "--seconds", seconds,
                                                  "--out", files["probe_tx"])),
                  lab.host(self.src).popen(_probe("send", "--dst", dst_ip, "--port", FLOW_PORT, "--sport", sport + 1,
                                                  "--rate", plan.flow_pps, "--seconds", seconds,
                                                  "--payload", plan.flow_payload, "--out", files["flow_tx"]))]
        t0, cpu0 = time.monotonic(), cpu_times()
        moved0 = self._moved()
        allreduce: dict = {}
        try:
            time.sleep(0.3)
            _, agg, core = self._path(plan.warmup_s - 0.5)
            result.element = agg if kill else f"{agg}-{core}"
            worker = None
            if scenario.startswith("allreduce"):
                worker = threading.Thread(target=self._allreduce, args=(allreduce,), daemon=True)
                worker.start()
                time.sleep(0.5)
            _sleep_until(t0 + plan.warmup_s)
            result.moved_healthy = self._moved() - moved0
            self.progress(f"{scenario} run {n}: failing {result.element}")
            result.fail = failures.fail_switch(agg) if kill else failures.fail_link(agg, core)
            _sleep_until(result.fail.start + plan.down_s)
            result.restore = failures.restore_switch(agg) if kill else failures.restore_link(agg, core)
            if worker is not None:
                worker.join(120)
                result.allreduce_ok = allreduce.get("ok")
                result.allreduce = allreduce
        finally:
            for p in procs:
                p.wait(timeout=rx_s + 30)
            result.cpu_busy = _busy(cpu0, cpu_times())
        self._analyse(result, files)

    def _path(self, window: float) -> tuple[int, str, str]:
        """(edge uplink port, aggregation switch, core switch) the probes take: the uplinks whose
        egress counters grew most over ``window`` seconds."""
        fabric, ctl = self.lab.fabric, self.lab.controller
        edge = fabric.host(self.src).switch
        pod = fabric.switch(edge).pod
        up = {Role.EDGE: Role.AGGREGATION, Role.AGGREGATION: Role.CORE}
        uplinks = {sw.name: [(p, peer) for p, peer in fabric.ports_of(sw.name).items()
                             if _is_switch(fabric, peer) and fabric.switch(peer).role == up[sw.role]]
                   for sw in fabric.switches if sw.pod == pod and sw.role in up}
        before = {sw: ctl.read_port_counters(sw) for sw in uplinks}
        time.sleep(window)
        after = {sw: ctl.read_port_counters(sw) for sw in uplinks}

        def busiest(sw: str) -> tuple[int, str]:
            grown = [(_packets(after[sw], p) - _packets(before[sw], p), p, peer) for p, peer in uplinks[sw]]
            _, port, peer = max(grown)
            return port, peer

        port, agg = busiest(edge)
        return port, agg, busiest(agg)[1]

    def _moved(self) -> int:
        """Packets moved off a port to its backup so far, all switches together."""
        from controller.failover.entries import FAILED_OVER
        ctl = self.lab.controller
        return sum(c.packets for sw in self.lab.fabric.switches
                   for c in ctl.read_port_counters(sw.name, FAILED_OVER).values())

    def _allreduce(self, into: dict) -> None:
        from aifabric.experiments.demo_allreduce import retransmit_timeout
        from controller.aggregation import JobManager
        busy = (self.src, self.dst)      # the probes' hosts are left to the probes
        workers = [w for w in spread_workers(self.lab.fabric, 6)[0] if w not in busy][:4]
        server = next(h.name for h in self.lab.fabric.hosts if h.name not in (*workers, *busy))
        if self._jobs is None:
            self._jobs = JobManager(self.lab.controller)
        try:
            r = run_allreduce(self.lab, self._jobs, "innetwork", workers, server,
                              elements=self.plan.allreduce_elements,
                              timeout=retransmit_timeout(self.plan.links(), len(workers)))
            into.update({"ok": r.ok, "wrong": any(not w["ok"] for w in r.per_worker), "time_s": round(r.time_s, 3), "workers": workers, "tree": r.tree,
                         "retransmissions": sum(w.get("retransmissions", 0) for w in r.per_worker),
                         "agg_ops": r.agg_ops, "errors": r.errors})
        except Exception as err:     # noqa: BLE001 - reported, the run goes on
            into.update({"ok": False, "wrong": False, "errors": [repr(err)]})

    def _collect_handler(self, result: FailoverRun) -> None:
        h, fail = self.handler, result.fail
        if h is None or fail is None:
            return
        failed = _element_ports(h, result.element)
        deaths = [e for e in h.events if not e.alive]
        result.false_dead = sum((e.switch, e.port) not in failed for e in deaths)
        result.stretched_ms = 1000 * max((e.stretched for e in deaths), default=0.0)
        result.link_timeout_ms = None if h.link_timeout_us is None else h.link_timeout_us / 1000
        at = failed_at(fail)
        dead = [e for e in h.events if not e.alive and e.decided >= fail.start]
        if dead:
            result.detected_ms = 1000 * (min(e.decided for e in dead) - at)
            written = [e.written for e in dead if e.written is not None]
            result.written_ms = 1000 * (min(written) - at) if written else None
        reroutes = [r for r in h.reroutes if r.started >= fail.start and
                    (result.restore is None or r.started < result.restore.start)]
        if reroutes:
            result.reroute_ms = 1000 * (reroutes[0].finished - at)

    def _analyse(self, result: FailoverRun, files: dict[str, Path]) -> None:
        fail = result.fail
        if fail is None:
            return
        if result.reroute_ms is None and "controller_s" in fail.detail:
            result.reroute_ms = 1000 * (fail.end - fail.start + fail.detail["controller_s"])
        tx, rx = _load(files["probe_tx"]), _load(files["probe_rx"])
        ftx, frx = _load(files["flow_tx"]), _load(files["flow_rx"])
        if not tx or not rx:
            result.errors.append("the probe sender or receiver wrote nothing")
            return
        result.probes_sent, result.flow_sent = tx.get("sent", 0), ftx.get("sent", 0)
        result.flow_lost = result.flow_sent - len({a[0] for a in frx.get("arrivals", [])})
        arrivals = sorted((a[2], a[0]) for a in rx.get("arrivals", []))
        got = {seq for _, seq in arrivals}
        t_fail = failed_at(fail) * 1e9
        t_restore = result.restore.start * 1e9 if result.restore else float("inf")
        interval = 1e9 / tx["rate"] if tx.get("rate") else 0
        # lost probes sent from shortly before the failure (in flight on the link) to the repair
        burst = [s for s in range(result.probes_sent) if s not in got
                 and t_fail - 50e6 <= tx["start_ns"] + s * interval < t_restore + 50e6]
        result.probes_lost = len(burst)
        result.loss_ms = len(burst) * interval / 1e6
        result.arrivals = [(round((t - t_fail) / 1e6, 2), seq) for t, seq in arrivals]
        before = [(a[2] - a[1]) / 1e6 for a in rx["arrivals"] if a[1] < t_fail]
        result.latency_ms = statistics.median(before) if before else None
        if not burst:
            result.outage_ms, result.recovered_by = 0.0, "no loss"
            return
        after = [(t, seq) for t, seq in arrivals if seq > max(burst)]
        if not after:
            result.recovered_by = "never"
            return
        t_back, seq_back = after[0]
        result.outage_ms = (t_back - t_fail) / 1e6
        sent_back = tx["start_ns"] + seq_back * interval
        result.path_back_ms = (sent_back - t_fail) / 1e6
        result.recovered_by = "restore" if sent_back >= t_restore else "fabric"


def failed_at(fail: FailureEvent) -> float:
    """Time zero of a run: when the first end of the link was told to go down (an injection
    can take a while on a busy machine, and the link works until then; the earliest the cut
    can have taken effect, so outages are not understated), or when the switch was killed."""
    return fail.detail.get("first_end", fail.start)


def _is_switch(fabric, name: str) -> bool:
    return any(s.name == name for s in fabric.switches)


def _packets(counters: dict, port: int) -> int:
    return counters[port].packets if port in counters else 0


def _probe(*args: object) -> list[str]:
    return [sys.executable, "-m", "aifabric.lab.probe", *map(str, args)]


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def _busy(cpu0: tuple[float, float], cpu1: tuple[float, float]) -> float:
    total, idle = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    return 1 - idle / total if total else 0.0


def summarise(runs: list[FailoverRun]) -> list[dict]:
    """Medians over runs, per scenario."""
    out = []
    for scenario in dict.fromkeys(r.scenario for r in runs):
        sel = [r for r in runs if r.scenario == scenario]
        row: dict = {"scenario": scenario, "runs": len(sel),
                     "recovered_by": "/".join(sorted({r.recovered_by for r in sel}))}
        for key in ("outage_ms", "loss_ms", "path_back_ms", "latency_ms", "probes_lost", "flow_lost", "detected_ms",
                    "written_ms", "reroute_ms", "moved_healthy", "stretched_ms", "link_timeout_ms",
                    "cpu_busy"):
            vals = [getattr(r, key) for r in sel if getattr(r, key) is not None]
            row[key] = round(statistics.median(vals), 2) if vals else None
        false_dead = [r.false_dead for r in sel if r.false_dead is not None]
        row["false_dead"] = sum(false_dead) if false_dead else None      # all runs: each one is a false alarm
        took = [1000 * (r.restore.end - r.restore.start) for r in sel if r.restore is not None]
        row["restore_ms"] = round(statistics.median(took), 1) if took else None
        ran = [r.allreduce for r in sel if r.allreduce]
        row["allreduce"] = (f"{sum(a['ok'] for a in ran)} exact, {sum(a['wrong'] for a in ran)} WRONG, "
                            f"{sum(not a['ok'] and not a['wrong'] for a in ran)} not done") if ran else ""
        out.append(row)
    return out
