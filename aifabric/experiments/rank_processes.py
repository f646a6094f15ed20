"""Processes a lab starts on hosts (workers, ranks, the fallback aggregator) and what they say.

`communicate` waits for one (killing it at its deadline), `last_json` finds the JSON report a
host program prints last, `collect_ranks` gathers every rank's report or names, by rank and
host, why there is none; `cpu_times` samples the machine's CPU so a run can state its CPU share,
and `CpuMeter` states that and the switch processes' own share of it.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping


def cpu_times() -> tuple[float, float]:
    """(total, idle) CPU time of the machine so far, in clock ticks (/proc/stat)."""
    fields = [float(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def busy_between(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The machine's CPU busy fraction between two `cpu_times` samples."""
    total = after[0] - before[0]
    return 1 - (after[1] - before[1]) / total if total > 0 else 0.0


def process_ticks(pids: Iterable[int]) -> dict[int, float]:
    """CPU time (user + system, every thread) of each process so far by pid, in clock ticks
    (/proc/PID/stat, the same ticks as `cpu_times`); a process that is gone is left out."""
    out = {}
    for pid in pids:
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()     # after "pid (comm) ": state is field 3
        out[pid] = float(fields[11]) + float(fields[12])  # utime, stime (fields 14 and 15)
    return out


@dataclass(frozen=True)
class CpuShare:
    """Fractions of the whole machine (every core) during a run: busy, and the switches' part."""

    busy: float
    switches: float

    def describe(self) -> str:
        return f"CPU {100 * self.busy:.0f}% of the machine busy, the switches {100 * self.switches:.0f}%"


class CpuMeter:
    """The machine's busy share and the switch processes' share of it between `__init__` and
    `read`: ``pids`` gives the switches' processes by name (asked at both ends, so a switch
    restarted meanwhile counts from its restart)."""

    def __init__(self, pids: Callable[[], Mapping[str, int]]) -> None:
        self._pids = pids
        self._procs0 = process_ticks(pids().values())
        self._cpu0 = cpu_times()

    def read(self) -> CpuShare:
        cpu1, procs1 = cpu_times(), process_ticks(self._pids().values())
        total = cpu1[0] - self._cpu0[0]
        used = sum(t - self._procs0.get(pid, 0.0) for pid, t in procs1.items())
        return CpuShare(busy_between(self._cpu0, cpu1), used / total if total > 0 else 0.0)


def communicate(proc, timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of ``proc`` once it ends; killed after ``timeout`` s, keeping what it said."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except Exception:     # noqa: BLE001 - TimeoutExpired: kill it and keep what it said
        proc.kill()
        out, err = proc.communicate()
    decode = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")   # noqa: E731
    return decode(out), decode(err)


def last_json(text: str) -> dict | None:
    """The last line of ``text`` that is JSON, or None."""
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def last_words(err: str, proc) -> str:
    """A process's last stderr line, or its exit status when it said nothing."""
    said = err.strip().splitlines()
    return said[-1] if said else f"no output (exit status {proc.returncode})"


def collect_ranks(hosts: list[str], procs: list, deadline_s: float,
                  kill_rank_after: tuple[int, float] | None = None) -> tuple[list[dict], list[str]]:
    """Every rank process's JSON report (those that finished), and an error per rank that did not,
    by rank and host: what it reported, its last words on stderr, or that it was killed
    (``kill_rank_after``: that rank's process is killed that many seconds from now)."""
    killed = None
    if kill_rank_after is not None:
        killed, after = kill_rank_after
        time.sleep(after)
        procs[killed].send_signal(signal.SIGKILL)
    reports, errors = [], []
    for r, proc in enumerate(procs):
        out, err = communicate(proc, deadline_s)
        report = last_json(out)
        if report is None:
            errors.append(f"rank {r} ({hosts[r]}): {'killed' if r == killed else last_words(err, proc)}")
        elif not report["ok"]:
            errors.append(f"rank {r} ({hosts[r]}): {report['error']}")
        else:
            reports.append(report)
    return reports, errors
