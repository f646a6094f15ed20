"""A running fabric: Mininet hosts and P4 switches, programmed by the fabric controller.

``Lab`` is a context manager: entering brings everything up (switch targets started and
ready, pipeline pushed, routes installed), leaving tears everything down (controller
sessions, target processes, namespaces, veths), also after Ctrl-C or an error halfway.

Teardown (`Lab.stop`) runs shielded from SIGINT/SIGTERM/SIGHUP (`aifabric.lab.interrupts`): a
signal arriving meanwhile is held, the user told once to wait, and raised only after the
teardown, when nothing else is already propagating. Every step is tried whatever the one
before did: the host agents, the INT collector, the controller (closed in a thread, as its sessions may hang on
switches going away), all switch targets and node shells at once (`stop_net`), and finally the
sweep (`emulation.cleanup.cleanup` for this lab's nodes) for whatever is left, which it checks
is nothing. Before the switches stop, teardown reads how many packets each softswitch failed to
process (`aifabric.lab.packet_errors`): ``lab.packet_errors()`` keeps answering with them.

With ``telemetry=TelemetryConfig(...)`` the lab also builds the telemetry network (every
switch's telemetry port on one bridge in the root namespace), installs ECN and INT through
the controller, and runs an INT collector bound to the bridge's address (``lab.collector``).

With ``failover=HeartbeatConfig(...)`` (`controller.failover`) the controller runs failure
handling once the fabric is programmed (``lab.failure_handler``, a `controller.failover.FailureHandler`:
heartbeats on every fabric port, data-plane failover, reroute, repair, localisation); off by
default. Its link heartbeats (``link_interval_ms``, on by default) need every switch to have a
generator port from the start and the generator running (``lab.heartbeats``, a
`emulation.failover_heartbeat_generator.HeartbeatGenerator`); ``link_heartbeat_ms=`` asks for them
without ``failover`` (a benchmark that starts failure handling itself later).

With ``run_controller=False`` the switches come up with no pipeline and no controller: a user's
controller owns them from the start (``lab.description()`` says where they are).

With ``lossless=LosslessConfig(...)`` (`controller.lossless`) the controller puts the traffic
classes on every switch (their DSCPs, queues, the lossless classes' PFC and the watchdog: softswitch
only) and every host honours PFC as a NIC does (``lab.lossless``, an `aifabric.lab.lossless.LabLossless`).

With ``hostagent=AgentConfig(...)`` (`hostagent.agent.config`) every host runs a host agent
(PLB and/or DCQCN, eBPF on its interface) once the fabric is programmed (``lab.agents``, an
`hostagent.agent.launch.AgentSet`; their stats files are in ``lab.agent_dir``); teardown stops
them first, and each detaches its programs before it exits.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from aifabric.lab import memory_plan, packet_errors
from aifabric.lab.interrupts import Terminated, exception_for, shielded
from controller.failover import FailureHandler, HeartbeatConfig, start_failure_handling
from controller.fabric_controller import FabricController, FabricError, Pipeline
from controller.telemetry.int_collector import IntCollector
from controller.telemetry import Telemetry, TelemetryConfig
from hostagent.agent.config import AgentConfig
from hostagent.agent.launch import AgentSet, start_agents
from topologies.fabric import Fabric
from topologies.addressing import TELEMETRY_BRIDGE
from emulation.failover_heartbeat_generator import NODE_NAME as HEARTBEATS_NODE
from mininet.log import setLogLevel      # after emulation: it undoes Mininet's logger class
from emulation.failover_heartbeat_generator import HeartbeatGenerator
from emulation.mininet_topo import make_net, stop_net
from softswitch.build_ahead import build_ahead
from emulation.cleanup import Leftovers, cleanup, leftovers
from emulation.p4switch import RUN_DIR, THRIFT_PORT_BASE, resolve_target

if TYPE_CHECKING:
    from aifabric.lab.description import FabricDescription
    from aifabric.lab.lossless import LabLossless
    from controller.lossless import LosslessConfig

log = logging.getLogger("aifabric.lab")
Progress = Callable[[str], None]
CONTROLLER_CLOSE_S = 10.0    # how long teardown waits for the controller's sessions to close
CONTROLLER_HEAD_START_S = 1.0   # ... before stopping the switches under them (it takes ~10 ms)
# labs running, and stopped ones whose teardown found packet errors no one took yet: a lab made
# and stopped inside one test is gone by the time the test's end looks for it
_started: list["Lab"] = []


def started_labs() -> list["Lab"]:
    """The labs this process started that run, or stopped with packet errors not yet taken."""
    return list(_started)


def forget_lab(lab: "Lab") -> None:
    """``lab``'s packet errors were taken (or it had none): no longer listed."""
    if any(x is lab for x in _started):
        _started[:] = [x for x in _started if x is not lab]


@dataclass
class BringUp:
    """How long each stage of bring-up took, in seconds."""

    targets_s: float = 0.0
    program_s: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.targets_s + self.program_s


@dataclass
class Teardown:
    """How the last teardown went: its duration, the steps that failed, what it left."""

    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    left: Leftovers | None = None       # None: the final check itself failed
    packet_errors: packet_errors.Counts = field(default_factory=dict)   # read before the switches stopped


class Lab:
    def __init__(self, fabric: Fabric, *, target: str = "auto", pipeline: Pipeline | None = None,
                 log_dir: Path | None = None, progress: Progress | None = None,
                 telemetry: TelemetryConfig | None = None, ecmp_seeds: bool = True,
                 hostagent: AgentConfig | None = None, run_controller: bool = True,
                 failover: HeartbeatConfig | None = None, failover_reroute: bool = True,
                 link_heartbeat_ms: float | None = None, switches_per_process: int | None = None,
                 lossless: "LosslessConfig | None" = None):
        if not run_controller and telemetry is not None:
            raise ValueError("telemetry needs our controller (it installs ECN and INT): "
                             "run_controller=False takes no telemetry=")
        if not run_controller and failover is not None:
            raise ValueError("failure handling needs our controller: run_controller=False takes no failover=")
        if not run_controller and lossless is not None:
            raise ValueError("traffic classes need our controller: run_controller=False takes no lossless=")
        self.fabric = fabric
        self.target = target
        self.pipeline = pipeline or Pipeline.from_build_dir()
        self.log_dir = log_dir or RUN_DIR / "logs"
        self.progress = progress or (lambda msg: None)
        self.telemetry = telemetry
        self.ecmp_seeds = ecmp_seeds
        self.hostagent = hostagent
        self.run_controller = run_controller
        self.failover = failover
        self.failover_reroute = failover_reroute     # False: data-plane failover alone, no route recomputed
        self.failure_handler: FailureHandler | None = None
        if link_heartbeat_ms is None and failover is not None:
            link_heartbeat_ms = failover.link_interval_ms
        self.link_heartbeat_ms = link_heartbeat_ms
        # > 1: softswitch serves that many switches a process (emulation.switch_group); None:
        # one process a switch while that takes at most half the memory (aifabric.lab.memory_plan)
        self.switches_per_process = switches_per_process
        self.heartbeats: HeartbeatGenerator | None = None
        self.agents: AgentSet | None = None
        self.lossless_config = lossless
        self.lossless: LabLossless | None = None
        self.net = None
        self.controller: FabricController | None = None
        self.collector: IntCollector | None = None
        self.bring_up = BringUp()
        self.teardown: Teardown | None = None

    def __enter__(self) -> "Lab":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        held = self.stop()
        if held and exc_type is None:
            raise exception_for(held[0])   # the user asked to stop: do not go on after the lab

    def start(self) -> None:
        setLogLevel("warning")
        forget_lab(self)
        _started.append(self)
        nsw = len(self.fabric.switches)
        int_on = self.telemetry is not None and self.telemetry.int_enabled
        ports = sum(len(self.fabric.ports_of(s.name)) for s in self.fabric.switches) \
            + nsw * (int_on + (self.link_heartbeat_ms is not None))      # the telemetry and heartbeat ports
        kind = resolve_target(self.target)[0]
        fabric_plan = memory_plan.plan(nsw, len(self.fabric.hosts), kind, memory_plan.mem_available_mib(),
                                       self.switches_per_process, ports)
        grouped = "" if fabric_plan.switches_per_process == 1 else \
            f" in {fabric_plan.processes} processes of up to {fabric_plan.switches_per_process}"
        self.progress(f"starting {nsw} switch targets{grouped} and {len(self.fabric.hosts)} hosts "
                      f"({self.fabric.describe()}, target {self.target})")
        switch_opts: dict = {}
        if kind == "softswitch" and fabric_plan.port_io == "packet":
            switch_opts["extra_args"] = ("--port-io", "packet")
            self.progress(f"AF_XDP on the switches' {ports} ports would pin "
                          f"{memory_plan.gib(round(ports * memory_plan.XSK_PORT_MIB))} more: they read their ports "
                          f"through AF_PACKET sockets (--port-io packet)")
        t0 = time.monotonic()
        self._build_packet_path()
        self.net = make_net(self.fabric, target=self.target, log_dir=self.log_dir, telemetry=int_on,
                            heartbeat_generator=self.link_heartbeat_ms is not None,
                            switches_per_process=fabric_plan.switches_per_process, **switch_opts)
        self.progress(f"{len(self.net.hosts)} hosts and {len(self.net.links)} links made; starting the switch targets")
        self.net.start()
        self.bring_up.targets_s = time.monotonic() - t0
        if self.link_heartbeat_ms is not None:
            self.heartbeats = HeartbeatGenerator(self.fabric.fabric_ports(), self.link_heartbeat_ms, RUN_DIR,
                                                 log_file=Path(self.log_dir) / "heartbeats.log")
            self.heartbeats.start()
            self.progress(f"link heartbeats every {self.link_heartbeat_ms:g} ms on every fabric port")
        if int_on:
            assert self.telemetry is not None
            self.collector = IntCollector(self.telemetry.collector_ip, self.telemetry.collector_port).start()
            host, port = self.collector.address
            self.progress(f"INT collector listening on {host}:{port} (telemetry bridge)")
        if not self.run_controller:
            self.progress(f"targets ready in {self.bring_up.targets_s:.1f} s; no controller: the switches "
                          f"have no pipeline")
        else:
            self._start_controller()
        if self.lossless_config is not None:
            self._start_lossless()
        if self.hostagent is not None:
            self._start_hostagents()

    def _start_lossless(self) -> None:
        from aifabric.lab.lossless import LabLossless, check_softswitch
        check_softswitch(self)
        t = time.monotonic()
        self.lossless = LabLossless(self, self.lossless_config).start()
        self.bring_up.stages["traffic classes"] = time.monotonic() - t
        lossless = sorted(self.lossless.classes.lossless)
        self.progress(f"traffic classes on every switch ({len(self.lossless_config.classes)} classes, lossless: "
                      f"{lossless or 'none yet'}), the hosts honouring PFC, in {self.bring_up.stages['traffic classes']:.1f} s")

    def _build_packet_path(self) -> None:
        """softswitch targets: their native data path (or compiled packet path) built before they
        start (see `softswitch.build_ahead`), not by one of them while the fabric runs."""
        if self.run_controller and resolve_target(self.target)[0] == "softswitch":
            self.progress(build_ahead(self.pipeline.device_config, self.progress))

    def _start_controller(self) -> None:
        self.progress(f"targets ready in {self.bring_up.targets_s:.1f} s; pushing the pipeline and routes")
        t1 = time.monotonic()
        self.controller = FabricController(self.fabric, self.pipeline, ecmp_seeds=self.ecmp_seeds)
        if self.telemetry is not None:
            Telemetry(self.controller, self.telemetry)
        try:
            self.controller.start()
        except FabricError as err:
            # a signal that came while waiting for the switches is the user's, not a switch's failure
            interrupt = next((e for e in err.errors.values() if isinstance(e, (KeyboardInterrupt, Terminated))), None)
            if interrupt is not None:
                raise interrupt from None
            raise
        self.controller.start_reconcile_loop()
        self.bring_up.program_s = time.monotonic() - t1
        self.progress(f"fabric programmed in {self.bring_up.program_s:.1f} s")
        if self.failover is not None:
            self.failure_handler = start_failure_handling(self.controller, self.failover,
                                                          reroute=self.failover_reroute)
            beats = self.failover
            link = (f"link heartbeats every {beats.link_interval_ms:g} ms (a switch skips a port after "
                    f"{beats.link_multiplier} missed), " if beats.link_interval_ms is not None else "")
            self.progress(f"failure handling on: {link}controller heartbeats every {beats.interval_ms:g} ms, "
                          f"dead after {beats.multiplier} missed"
                          + ("" if self.failover_reroute else "; data-plane failover alone (no reroute)"))

    def _start_hostagents(self) -> None:
        assert self.hostagent is not None
        t2 = time.monotonic()
        self.progress(f"starting host agents ({self.hostagent.mode}) on {len(self.fabric.hosts)} hosts")
        self.agents = start_agents({h.name: self.net.get(h.name) for h in self.fabric.hosts}, self.hostagent,
                                   self.agent_dir)
        self.bring_up.stages["host agents"] = time.monotonic() - t2
        self.progress(f"host agents ready in {self.bring_up.stages['host agents']:.1f} s")

    def stop(self) -> list[int]:
        """Tear everything down (see the module docstring); idempotent. Returns the signals that
        arrived meanwhile (held, not raised); ``self.teardown`` tells how it went."""
        with shielded() as held:
            t0 = time.monotonic()
            if self.net is not None or self.controller is not None:
                self._say("tearing down")
            report = Teardown()
            closing: list[threading.Thread] = []
            for what, step in (("host agents", lambda: self._stop_agents(report)),
                               ("lossless", lambda: self._stop_part("lossless")),
                               ("heartbeat generator", lambda: self._stop_part("heartbeats")),
                               ("INT collector", lambda: self._stop_part("collector")),
                               ("controller", lambda: closing.extend(self._close_controller())),
                               ("packet errors", lambda: self._read_packet_errors(report)),
                               ("switches and hosts", self._stop_net),
                               ("controller", lambda: self._join(closing)),
                               ("sweep", lambda: self._sweep(report)),
                               ("check", lambda: self._check(report))):
                try:
                    step()
                except BaseException as err:     # teardown goes on whatever a step does
                    log.warning("teardown: %s failed: %r", what, err, exc_info=True)
                    report.failed.append(f"{what}: {err!r}")
            report.seconds = time.monotonic() - t0
            self.teardown = report
            if report.left is None or report.left:
                what = report.left.describe() if report.left is not None else "an unknown state (the check failed)"
                self._say(f"teardown left {what}; `aifabric clean` removes it")
        return held

    def packet_errors(self) -> packet_errors.Counts:
        """softswitch -> what was raised -> packets its program failed on (dropped), since the
        lab started; after teardown, as teardown read them."""
        if self.net is not None:
            return packet_errors.read(self.net)
        return self.teardown.packet_errors if self.teardown is not None else {}

    def _read_packet_errors(self, report: Teardown) -> None:
        report.packet_errors = self.packet_errors()
        if not report.packet_errors:
            forget_lab(self)
        else:
            self._say(f"packets the switches failed to process: {packet_errors.describe(report.packet_errors)}")

    def _say(self, message: str) -> None:
        """Progress during teardown: a terminal that is gone (SIGHUP) must not stop it."""
        try:
            self.progress(message)
        except Exception:
            log.warning("%s", message)

    @property
    def agent_dir(self) -> Path:
        """Where the host agents write their stats (one JSON file per host)."""
        return Path(self.log_dir) / "hostagent"

    def _stop_part(self, attr: str) -> None:
        """Stop the part held in ``attr`` (the host agents, the lossless poller, the heartbeat
        generator, the INT collector), forgetting it first so a second teardown skips it."""
        part = getattr(self, attr)
        setattr(self, attr, None)
        if part is not None:
            part.stop()

    def _stop_agents(self, report: Teardown) -> None:
        agents = self.agents
        self._stop_part("agents")
        for host, why in agents.failures.items() if agents is not None else ():
            self._say(f"host agent on {host} did not stop cleanly: {why}")
            report.failed.append(f"host agent on {host}: {why}")

    def _close_controller(self) -> list[threading.Thread]:
        """Close the controller in a thread, given a head start so that its sessions end before
        their switches do: a session stuck on a switch must not hold the rest of teardown up."""
        controller, self.controller = self.controller, None
        self.failure_handler = None
        if controller is None:
            return []
        closing = threading.Thread(target=controller.close, name="lab-controller-close", daemon=True)
        closing.start()
        closing.join(CONTROLLER_HEAD_START_S)
        return [closing]

    @staticmethod
    def _join(closing: list[threading.Thread]) -> None:
        for thread in closing:
            thread.join(CONTROLLER_CLOSE_S)
            if thread.is_alive():
                raise TimeoutError(f"the controller did not close within {CONTROLLER_CLOSE_S:g} s")

    def _stop_net(self) -> None:
        net, self.net = self.net, None
        if net is not None:
            stop_net(net)

    def _nodes(self) -> list[str]:
        return fabric_nodes(self.fabric) + ([HEARTBEATS_NODE] if self.link_heartbeat_ms is not None else [])

    def _ports(self) -> list[int]:
        """The TCP ports this lab's targets listen on (P4Runtime, run-time control)."""
        return [p for s in self.fabric.switches for p in (s.grpc_port, THRIFT_PORT_BASE + s.device_id)]

    def _sweep(self, report: Teardown) -> None:
        """Whatever of this lab's nodes is left; older leftovers are `aifabric clean`'s, and
        another lab's (in a namespace of its own, `aifabric.lab.named_labs`) are never touched."""
        result = cleanup(nodes=self._nodes(), ports=self._ports())
        for err in result.errors:
            log.warning("teardown: %s", err)
        report.left = result.remaining

    def _check(self, report: Teardown) -> None:
        """What is left, when the sweep could not say."""
        if report.left is None:
            report.left = leftovers(nodes=self._nodes(), ports=self._ports())

    def description(self) -> "FabricDescription":
        """The fabric description (`aifabric.lab.description.FabricDescription`) of this running lab."""
        from aifabric.lab.description import from_lab
        return from_lab(self)

    def host(self, name: str):
        return self.net.get(name)

    def switch(self, name: str):
        """The P4Switch node ``name`` (queue rate/depth, logs, process)."""
        return self.net.get(name)

    def switch_pids(self) -> dict[str, int]:
        """Switch -> the pid of its target process (switches of a group share one)."""
        return {sw.name: sw.process.pid for sw in self.net.switches if getattr(sw, "process", None) is not None}

    def target_pids(self) -> dict[str, int]:
        """Target process -> pid, one entry a process (a group of switches is one, by its name)."""
        return {sw.process_name: sw.process.pid for sw in self.net.switches
                if getattr(sw, "process", None) is not None}


def fabric_nodes(fabric: Fabric) -> list[str]:
    """The node names a lab of ``fabric`` makes (the telemetry bridge's too: it may exist
    whatever the config): what its teardown sweeps and checks."""
    return [*(s.name for s in fabric.switches), *(h.name for h in fabric.hosts), TELEMETRY_BRIDGE]


def rss_mib(pid: int) -> float:
    """Resident memory of a process, in MiB (0 when it is gone)."""
    return _proc_kib(pid, "status", "VmRSS:") / 1024


def pss_mib(pid: int) -> float:
    """Proportional set size of a process (shared pages split among their users), in MiB."""
    return _proc_kib(pid, "smaps_rollup", "Pss:") / 1024


def _proc_kib(pid: int, file: str, field: str) -> int:
    """A ``field: N kB`` line of /proc/<pid>/<file>; 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
