"""Processes, network namespaces and listening ports of this machine (read from /proc), and
stopping processes (`stop_process`, or many at once).

Everything a lab starts (switch targets, Mininet node shells and whatever runs in them) carries
two environment variables, `LAB_MARKER` (the lab's run directory) and `NODE_MARKER` (the node's
name), set by `marked_env()`. /proc/<pid>/environ keeps them for the life of the process, also
across ``mnexec`` and ``bash``, so a sweep finds every process of a lab, wherever it logs and
whichever namespace it is in, without guessing from names.

`stop_processes()` signals all its processes first and then waits for them with one deadline:
stopping twenty switches or forty shells costs the slowest one, not their sum.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Mapping

LAB_MARKER = "AIFABRIC_LAB"
NODE_MARKER = "AIFABRIC_NODE"
_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class Proc:
    """One process as /proc shows it."""

    pid: int
    ppid: int
    argv: tuple[str, ...]
    netns: int            # inode of its network namespace (0: unreadable)
    lab: str | None       # LAB_MARKER of its environment: the run directory of the lab that started it
    node: str | None      # NODE_MARKER: the Mininet node it belongs to

    def describe(self) -> str:
        return f"{self.pid} {' '.join(self.argv[:4])[:120]}"


def marked_env(run_dir: Path, node: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus the lab and node markers."""
    env = dict(os.environ if base is None else base)
    env[LAB_MARKER] = str(run_dir.resolve())
    env[NODE_MARKER] = node
    return env


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def netns_of(pid: int | str) -> int:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return 0


def _environ_markers(pid: int) -> tuple[str | None, str | None]:
    lab = node = None
    for item in _read(f"/proc/{pid}/environ").split(b"\0"):
        if item.startswith(LAB_MARKER.encode() + b"="):
            lab = item.split(b"=", 1)[1].decode(errors="replace")
        elif item.startswith(NODE_MARKER.encode() + b"="):
            node = item.split(b"=", 1)[1].decode(errors="replace")
    return lab, node


def _ppid(pid: int) -> int:
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(b")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def snapshot() -> list[Proc]:
    """Every live process but this one (zombies left out: they hold no namespace or port)."""
    me = os.getpid()
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        raw = _read(f"/proc/{pid}/cmdline")
        if not raw or not alive(pid):       # kernel threads have no command line
            continue
        argv = tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a)
        lab, node = _environ_markers(pid)
        procs.append(Proc(pid, _ppid(pid), argv, netns_of(pid), lab, node))
    return procs


def own_netns() -> int:
    return netns_of("self")


def interfaces_in_netns_of(pid: int) -> list[str]:
    """Names of the interfaces in the network namespace of ``pid`` (from /proc/<pid>/net/dev)."""
    lines = _read(f"/proc/{pid}/net/dev").decode(errors="replace").splitlines()[2:]
    return [line.split(":", 1)[0].strip() for line in lines if ":" in line]


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return False
    try:
        return stat.rsplit(b")", 1)[1].split()[0] != b"Z"
    except IndexError:
        return False


def _signal(pid: int, sig: int) -> None:
    """``sig`` to ``pid``'s whole process group when it leads one (a shell and its foreground
    job, a target started in its own session), else to ``pid`` alone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_processes(terminate: Iterable[int] = (), kill: Iterable[int] = (), timeout: float = 5.0,
                   kill_wait: float = 2.0) -> list[int]:
    """SIGTERM every pid of ``terminate`` and SIGKILL every pid of ``kill``, all at once; wait for
    all of them until one deadline (``timeout`` s), SIGKILL the ones still there and wait
    ``kill_wait`` s more. Returns the pids that are still alive (none, normally)."""
    term, killed = set(terminate), set(kill)
    term -= killed
    for pid in killed:
        _signal(pid, signal.SIGKILL)
    for pid in term:
        _signal(pid, signal.SIGTERM)
    pending = _wait_gone(term | killed, timeout)
    for pid in pending:
        _signal(pid, signal.SIGKILL)
    return sorted(_wait_gone(pending, kill_wait))


def stop_process(pid: int, timeout: float = 5.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM ``pid`` (its process group when it leads one), SIGKILL after ``timeout`` s; reap
    ``proc`` when given (our child)."""
    if stop_processes(terminate=[pid], timeout=timeout):
        # Mininet's log, where a lab's other messages go; imported here so that this module
        # stays importable without Mininet.
        from mininet.log import warn

        warn(f"process {pid} did not exit after SIGKILL\n")
    if proc is not None:
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass


def _wait_gone(pids: Collection[int], timeout: float) -> set[int]:
    pending = {p for p in pids if alive(p)}
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        time.sleep(0.02)
        pending = {p for p in pending if alive(p)}
    return pending


def listening_tcp_ports(ports: Collection[int]) -> list[int]:
    """Which of ``ports`` have a listening TCP socket (IPv4 or IPv6) in this network namespace."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in _read(table).decode(errors="replace").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _TCP_LISTEN:
                port = int(fields[1].rsplit(":", 1)[1], 16)
                if port in ports:
                    found.add(port)
    return sorted(found)
