"""What the machine's CPU did during a run: its busy share, and the switch processes' part of it.

An emulated figure counts only when the links, not the CPU, set it: every demo and benchmark that
limits links says how busy the machine was meanwhile and how much of that the switches took.
`cpu_times` samples the machine (/proc/stat), `CpuMeter` measures a run between two samples.
"""
from __future__ import annotations

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
