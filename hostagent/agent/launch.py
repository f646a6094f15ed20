"""Starting host agents in many hosts at once, and stopping them: what a lab (and a benchmark)
uses. ``hosts`` maps host names to objects with ``.popen(argv, **kwargs)`` running the command
in the host's network namespace (Mininet hosts: `Lab.host(name)`)::

    agents = start_agents({n: lab.host(n) for n in names}, AgentConfig("plb"), run_dir)
    ...
    agents.stats()["h1"].totals.repaths      # AgentStats per host, read from their JSON files
    agents.stop()                            # SIGTERM, each detaches and exits; stragglers killed

All agents start together (each compiles its programs: about a second of CPU) and
`start_agents` returns once every one has printed ``ready``; if one fails, the others are
stopped and the error names the host.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from hostagent.agent.cli import READY
from hostagent.agent.config import AgentConfig
from hostagent.agent.stats import AgentStats

# an agent detaches its programs and writes its last stats on SIGTERM: well under a second
# alone, but sixteen at once beside a busy suite on two cores took longer than 10 s
STOP_TIMEOUT_S = 30.0


@dataclass
class AgentProcess:
    host: str
    proc: subprocess.Popen
    stats_path: Path
    iface: str = ""
    bpf: dict[str, list[int]] = field(default_factory=dict)    # kernel ids of its programs and maps


@dataclass
class AgentSet:
    config: AgentConfig
    processes: dict[str, AgentProcess]
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)     # by host: why it did not exit 0

    def stats(self) -> dict[str, AgentStats]:
        """Each agent's latest stats (hosts whose file is not there yet are left out)."""
        out = {}
        for host, p in self.processes.items():
            try:
                out[host] = AgentStats.read(p.stats_path)
            except ValueError:
                pass
        return out

    def totals(self) -> dict[str, int]:
        """Every counter of the agents' latest stats, summed over hosts."""
        out: dict[str, int] = {}
        for stats in self.stats().values():
            for key, value in vars(stats.totals).items():
                out[key] = out.get(key, 0) + value
        return out

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> dict[str, int | None]:
        """SIGTERM to all, one deadline for all, SIGKILL to whoever is left; exit codes by host,
        and in ``failures`` each agent that did not exit 0 with why and its stderr's tail (an
        agent killed this way left its filters: the namespace's end removes them)."""
        for p in self.processes.values():
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for host, p in self.processes.items():
            if host in self.exit_codes:
                continue
            why = ""
            try:
                p.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(timeout=5)
                why = f"killed: still running {timeout:.0f} s after SIGTERM"
            self.exit_codes[host] = code = p.proc.returncode
            err = p.proc.stderr.read().decode(errors="replace").strip() if p.proc.stderr else ""
            if code != 0:
                self.failures[host] = f"{why or f'exit {code}'}; stderr: {err[-800:] or '(empty)'}"
            for stream in (p.proc.stdout, p.proc.stderr):
                if stream is not None:
                    stream.close()
        return dict(self.exit_codes)

    def __enter__(self) -> "AgentSet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def agent_command(config: AgentConfig, host: str, python: str = sys.executable) -> list[str]:
    return [python, "-u", "-m", "hostagent", *config.argv(), "--host", host]


def start_agents(hosts: Mapping[str, object], config: AgentConfig, run_dir: Path | str, *,
                 python: str = sys.executable, ready_timeout: float = 60.0) -> AgentSet:
    """One agent per host, stats in ``run_dir``/<host>.json; returns once all are ready."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    agents = AgentSet(config, {})
    try:
        for name, host in hosts.items():
            path = run_dir / f"{name}.json"
            path.unlink(missing_ok=True)
            cmd = agent_command(config.with_stats(path), name, python)
            proc = host.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # type: ignore[attr-defined]
            agents.processes[name] = AgentProcess(name, proc, path)
        deadline = time.monotonic() + ready_timeout
        for p in agents.processes.values():
            _wait_ready(p, deadline)
    except BaseException:
        agents.stop()
        raise
    return agents


def _wait_ready(p: AgentProcess, deadline: float) -> None:
    fd = p.proc.stdout.fileno()
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            raise RuntimeError(f"host agent on {p.host} not ready in time")
        chunk = os.read(fd, 1)
        if not chunk:
            p.proc.wait(timeout=5)
            err = p.proc.stderr.read().decode(errors="replace").strip()
            raise RuntimeError(f"host agent on {p.host} did not start (exit {p.proc.returncode}): {err[-800:]}")
        line += chunk
    text = line.decode().strip()
    if not text.startswith(READY + " "):
        raise RuntimeError(f"host agent on {p.host}: unexpected first line {text[:200]!r}")
    info = json.loads(text[len(READY) + 1:])
    p.iface, p.bpf = info["iface"], info["bpf"]
