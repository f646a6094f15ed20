"""A running fabric: Mininet hosts and P4 switches, programmed by the fabric controller.

``Lab`` is a context manager: entering brings everything up (switch targets started and
ready, pipeline pushed, routes installed), leaving tears everything down (controller
sessions, target processes, namespaces, veths), also after Ctrl-C or an error halfway.

With ``telemetry=TelemetryConfig(...)`` the lab also builds the telemetry network (every
switch's telemetry port on one bridge in the root namespace), installs ECN and INT through
the controller, and runs an INT collector bound to the bridge's address (``lab.collector``).

With ``hostagent=AgentConfig(...)`` (`hostagent.agent.config`) every host runs a host agent
(PLB and/or DCQCN, eBPF on its interface) once the fabric is programmed (``lab.agents``, an
`hostagent.agent.launch.AgentSet`; their stats files are in ``lab.agent_dir``); teardown stops
them first, and each detaches its programs before it exits.
"""
from __future__ import annotations

import logging
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from mininet.log import setLogLevel

from controller.fabric_controller import FabricController, Pipeline
from controller.int_collector import IntCollector
from controller.telemetry_entries import TelemetryConfig
from hostagent.agent.config import AgentConfig
from hostagent.agent.launch import AgentSet, start_agents
from topologies.fabric import Fabric
from topologies.mininet_topo import make_net
from topologies.p4switch import RUN_DIR, cleanup

log = logging.getLogger("aifabric.lab")
Progress = Callable[[str], None]


@dataclass
class BringUp:
    """How long each stage of bring-up took, in seconds."""

    targets_s: float = 0.0
    program_s: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.targets_s + self.program_s


class Lab:
    def __init__(self, fabric: Fabric, *, target: str = "auto", pipeline: Pipeline | None = None,
                 log_dir: Path | None = None, progress: Progress | None = None,
                 telemetry: TelemetryConfig | None = None, ecmp_seeds: bool = True,
                 hostagent: AgentConfig | None = None):
        self.fabric = fabric
        self.target = target
        self.pipeline = pipeline or Pipeline.from_build_dir()
        self.log_dir = log_dir or RUN_DIR / "logs"
        self.progress = progress or (lambda msg: None)
        self.telemetry = telemetry
        self.ecmp_seeds = ecmp_seeds
        self.hostagent = hostagent
        self.agents: AgentSet | None = None
        self.net = None
        self.controller: FabricController | None = None
        self.collector: IntCollector | None = None
        self.bring_up = BringUp()

    def __enter__(self) -> "Lab":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        setLogLevel("warning")
        nsw = len(self.fabric.switches)
        self.progress(f"starting {nsw} switch targets and {len(self.fabric.hosts)} hosts "
                      f"({self.fabric.describe()}, target {self.target})")
        t0 = time.monotonic()
        int_on = self.telemetry is not None and self.telemetry.int_enabled
        self.net = make_net(self.fabric, target=self.target, log_dir=self.log_dir, telemetry=int_on)
        self.net.start()
        self.bring_up.targets_s = time.monotonic() - t0
        if int_on:
            assert self.telemetry is not None
            self.collector = IntCollector(self.telemetry.collector_ip, self.telemetry.collector_port).start()
            host, port = self.collector.address
            self.progress(f"INT collector listening on {host}:{port} (telemetry bridge)")
        self.progress(f"targets ready in {self.bring_up.targets_s:.1f} s; pushing the pipeline and routes")
        t1 = time.monotonic()
        self.controller = FabricController(self.fabric, self.pipeline, telemetry=self.telemetry,
                                           ecmp_seeds=self.ecmp_seeds)
        self.controller.start()
        self.controller.start_reconcile_loop()
        self.bring_up.program_s = time.monotonic() - t1
        self.progress(f"fabric programmed in {self.bring_up.program_s:.1f} s")
        if self.hostagent is not None:
            t2 = time.monotonic()
            self.progress(f"starting host agents ({self.hostagent.mode}) on {len(self.fabric.hosts)} hosts")
            self.agents = start_agents({h.name: self.net.get(h.name) for h in self.fabric.hosts}, self.hostagent,
                                       self.agent_dir)
            self.bring_up.stages["host agents"] = time.monotonic() - t2
            self.progress(f"host agents ready in {self.bring_up.stages['host agents']:.1f} s")

    def stop(self) -> None:
        agents, self.agents = self.agents, None
        if agents is not None:
            try:
                agents.stop()
            except Exception:     # teardown goes on whatever the agents do
                log.exception("stopping the host agents")
        if self.collector is not None:
            self.collector.stop()
            self.collector = None
        if self.controller is not None:
            try:
                self.controller.close()
            except Exception:     # teardown goes on whatever the controller does
                log.exception("closing the controller")
            self.controller = None
        if self.net is not None:
            try:
                self.net.stop()
            except Exception:
                log.exception("stopping Mininet")
            self.net = None
        cleanup()

    @property
    def agent_dir(self) -> Path:
        """Where the host agents write their stats (one JSON file per host)."""
        return Path(self.log_dir) / "hostagent"

    def host(self, name: str):
        return self.net.get(name)

    def switch(self, name: str):
        """The P4Switch node ``name`` (queue rate/depth, logs, process)."""
        return self.net.get(name)

    def switch_pids(self) -> dict[str, int]:
        return {sw.name: sw.process.pid for sw in self.net.switches if getattr(sw, "process", None) is not None}


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C so ``with Lab(...)`` tears down on both."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def rss_mib(pid: int) -> float:
    """Resident memory of a process, in MiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
