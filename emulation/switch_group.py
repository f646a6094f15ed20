"""Several softswitch switches of a Mininet fabric served by one process (``softswitch group``).

A switch in a process of its own costs about 49 MiB (the interpreter, gRPC and the libraries
over again); in a group it costs its own state, about 12 MiB on the fabric program, which is
what lets a k=16 fat-tree (320 switches) come up in 6 GiB (benchmarks/scale.py). The group's process starts when
its last member has started (`P4Switch.start` prepares the member's interfaces, the group writes
one softswitch command line per member into ``<run_dir>/groups/<name>.switches``) and serves
every member's own ports, P4Runtime address and run-time control address. Its log is
``<log_dir>/<name>.log``; its pid file and lab marker carry its first member's name, so
`emulation.cleanup` finds it among the fabric's nodes.

What a group cannot do: stop or restart one member alone (a failure injected into one switch
would take the whole group), and run BMv2.
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

from mininet.log import info

from emulation.procs import marked_env, stop_processes

# its members are emulation.p4switch.P4Switch nodes (not imported: p4switch imports this module)
Member = Any


class SwitchGroup:
    def __init__(self, size: int, executable: str, log_dir: Path, run_dir: Path):
        if size < 1:
            raise ValueError(f"switches per process must be 1 or more, not {size}")
        self.size = size
        self.executable = executable
        self.log_dir = log_dir
        self.run_dir = run_dir
        self.members: list[Member] = []
        self.process: subprocess.Popen | None = None
        self._started: set[str] = set()
        self._console = None

    @property
    def full(self) -> bool:
        return len(self.members) >= self.size

    @property
    def name(self) -> str:
        return f"group-{self.members[0].name}"

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    @property
    def console_file(self) -> Path:
        return self.log_dir / f"{self.name}.console"

    @property
    def command_file(self) -> Path:
        return self.run_dir / "groups" / f"{self.name}.switches"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "pids" / f"{self.members[0].name}.pid"

    def join(self, switch: Member) -> None:
        if self.full:
            raise ValueError(f"{self.name} has its {self.size} switches already")
        self.members.append(switch)

    def member_started(self, switch: Member) -> None:
        """``switch`` is ready to be served; the last member's start launches the process."""
        self._started.add(switch.name)
        if self.process is None and self._started == {m.name for m in self.members}:
            self.launch()

    def command(self) -> list[str]:
        return [self.executable, "group", str(self.command_file), "--log-file", str(self.log_file)]

    def launch(self) -> None:
        self.command_file.parent.mkdir(parents=True, exist_ok=True)
        self.command_file.write_text("".join(shlex.join(m.command()[1:]) + "\n" for m in self.members))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        info(f"{self.name} ({len(self.members)} switches): {' '.join(cmd)}\n")
        self._console = open(self.console_file, "wb")
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._console, stderr=subprocess.STDOUT,
            start_new_session=True, env=marked_env(self.run_dir, self.members[0].name))
        self.pid_file.write_text(f"{self.process.pid}\n{' '.join(cmd)}\n")

    def terminate(self, timeout: float) -> None:
        """SIGTERM the process, SIGKILL it after ``timeout`` s; forget it."""
        if self.process is not None:
            stop_processes(terminate=[self.process.pid], timeout=timeout)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.forget()

    def forget(self) -> None:
        """Reap the stopped process, close its console file, delete its pid file."""
        proc, self.process = self.process, None
        if proc is not None:
            proc.poll()
        if self._console is not None:
            self._console.close()
            self._console = None
        if self.members:
            self.pid_file.unlink(missing_ok=True)
        self._started.clear()
