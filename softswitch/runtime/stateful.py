"""Counters, meters and registers: the state a P4 program keeps across packets.

Semantics follow BMv2 (src/bm_sim/counters.cpp, meters.cpp, stateful.cpp): counters count
bytes as the packet's ingress length; out-of-range indexes are ignored (BMv2 logs them and
leaves everything unchanged); meters are BMv2's token buckets with rates per microsecond.

``mirror``: None on the Python path; on the native path (native/objects.py) the native objects
count, meter and hold the registers: writes are told to it, and reads (``read``, and ``sync``
before the lists are read whole) come from it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

GREEN, YELLOW, RED = 0, 1, 2


class CounterArray:
    """An indirect counter array (packets and bytes per index). ``packets`` and ``bytes`` are
    never replaced, only changed in place: the generated code counts into them itself
    (primitives.p_count; an index out of range counts nothing, as in BMv2)."""

    def __init__(self, name: str, size: int, is_direct: bool = False, binding: str | None = None):
        self.name = name
        self.size = size
        self.is_direct = is_direct
        self.binding = binding
        self.packets = [0] * size
        self.bytes = [0] * size
        self.mirror: Any = None

    def read(self, index: int) -> tuple[int, int]:
        if self.mirror is not None:
            self.packets[index], self.bytes[index] = self.mirror.counter_read(self, index)
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        self.packets[index] = packets
        self.bytes[index] = nbytes
        if self.mirror is not None:
            self.mirror.counter_written(self, index)

    def reset(self) -> None:
        # in place: generated code holds the two lists (primitives.p_count)
        self.packets[:] = [0] * self.size
        self.bytes[:] = [0] * self.size
        if self.mirror is not None:
            self.mirror.counters_reset(self)

    def sync(self) -> None:
        """Bring ``packets`` and ``bytes`` up to date (the native path counts)."""
        if self.mirror is not None:
            self.mirror.counters_read(self)


@dataclass
class _Rate:
    info_rate: float      # units per microsecond
    burst_size: int
    color: int
    tokens: int = 0
    tokens_last: int = 0


@dataclass
class Meter:
    """One two-rate three-colour meter (RFC 2698 as BMv2 implements it)."""

    by_bytes: bool
    rates: list[_Rate] = field(default_factory=list)   # peak first, committed second
    time_init_us: int = field(default_factory=lambda: time.monotonic_ns() // 1000)
    mirror: Callable[["Meter"], None] | None = field(default=None, repr=False, compare=False)  # told each (re)configuration

    @property
    def configured(self) -> bool:
        return bool(self.rates)

    def configure(self, cir: float, cburst: int, pir: float, pburst: int) -> None:
        """Rates in units per second, bursts in units (packets or bytes)."""
        committed = _Rate(cir / 1e6, cburst, YELLOW, tokens=cburst)
        peak = _Rate(pir / 1e6, pburst, RED, tokens=pburst)
        self.rates = [peak, committed]
        if self.mirror is not None:
            self.mirror(self)
        # time_init stays the meter's creation time: BMv2's set_rate resets the buckets, not
        # the time origin the token counts are taken from

    def config(self) -> tuple[float, int, float, int] | None:
        """(cir, cburst, pir, pburst) in units per second, or None when unconfigured."""
        if not self.rates:
            return None
        peak, committed = self.rates
        return (round(committed.info_rate * 1e6), committed.burst_size,
                round(peak.info_rate * 1e6), peak.burst_size)

    def reset(self) -> None:
        self.rates = []
        if self.mirror is not None:
            self.mirror(self)

    def execute(self, nbytes: int, now_us: int | None = None) -> int:
        if not self.rates:
            return GREEN
        if now_us is None:
            now_us = time.monotonic_ns() // 1000
        micros = now_us - self.time_init_us
        amount = nbytes if self.by_bytes else 1
        for rate in self.rates:
            since_init = int(micros * rate.info_rate)
            new_tokens = since_init - rate.tokens_last
            rate.tokens_last = since_init
            rate.tokens = min(rate.tokens + new_tokens, rate.burst_size)
            if rate.tokens < amount:
                return rate.color
            rate.tokens -= amount
        return GREEN


class MeterArray:
    def __init__(self, name: str, size: int, by_bytes: bool, is_direct: bool = False,
                 binding: str | None = None, result_target: list | None = None):
        self.name = name
        self.size = size
        self.by_bytes = by_bytes
        self.is_direct = is_direct
        self.binding = binding
        self.result_target = result_target
        self.meters = [Meter(by_bytes) for _ in range(size)]
        self.mirror: Any = None

    def execute(self, index: int, nbytes: int) -> int | None:
        """Colour of the packet, or None for an out-of-range index (nothing is written)."""
        if 0 <= index < self.size:
            return self.meters[index].execute(nbytes)
        return None

    def reset(self) -> None:
        for m in self.meters:
            m.reset()


class RegisterArray:
    def __init__(self, name: str, size: int, bitwidth: int):
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        self.mask = (1 << bitwidth) - 1
        self.values = [0] * size
        self.mirror: Any = None

    def read(self, index: int) -> int | None:
        if 0 <= index < self.size:
            if self.mirror is not None:
                self.values[index] = self.mirror.register_read(self, index)
            return self.values[index]
        return None

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.values[index] = value & self.mask
            if self.mirror is not None:
                self.mirror.register_written(self, index)

    def reset(self) -> None:
        self.values = [0] * self.size
        if self.mirror is not None:
            self.mirror.registers_reset(self)

    def sync(self) -> None:
        """Bring ``values`` up to date (the native path holds the registers)."""
        if self.mirror is not None:
            self.mirror.registers_read(self)
