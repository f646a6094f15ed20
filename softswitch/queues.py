"""Egress queues with a depth and a rate, as simple_switch's QueueingLogicPriRL.

Every packet gets a departure time when it is queued: ``max(now, previous departure +
1/rate)``; it leaves once that time has come. A full queue drops the arriving packet.
Depth is counted in packets, rate in packets per second (0: unlimited), like BMv2's
``set_queue_depth`` / ``set_queue_rate``. With priority queues (``--priority-queues N``, as
simple_switch's) a port has up to N of them (each made when a packet first needs it, with the
port's settings), each with its own depth, rate and departure times; a packet goes to the one
its ``standard_metadata.priority`` names, and of the packets whose time has come the highest
priority leaves first (QueueingLogicPriRL).
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Literal

DEFAULT_DEPTH = 64        # simple_switch's default queue capacity, in packets
DEFAULT_RATE = 0          # packets per second; 0 means no limit
MAX_PRIORITY_QUEUES = 8   # v1model's standard_metadata.priority has 3 bits
# Far above what one emulated link carries (softswitch forwards ~90 kpps per core) yet a
# finite departure spacing (0.1 us); a larger figure is a typo, not a configuration.
MAX_RATE_PPS = 10_000_000
# Packets one queue may hold: bounds the memory a full queue takes (~150 MB of 1500-byte
# frames); BMv2 itself caps nothing, but a larger queue only hides a missing rate limit.
MAX_DEPTH = 100_000


def check_rate(rate_pps: int) -> None:
    """ValueError unless ``rate_pps`` is 0 (unlimited) or a rate in 1..MAX_RATE_PPS packets/s."""
    if not 0 <= rate_pps <= MAX_RATE_PPS:
        raise ValueError(f"queue rate {rate_pps} packets/s is outside 0..{MAX_RATE_PPS} (0: unlimited)")


def check_port(port: int, ports: Iterable[int]) -> None:
    """ValueError listing ``ports`` unless ``port`` is one of them: run-time settings are for
    the switch's own ports (the packet path still queues for any egress_spec, as BMv2)."""
    known = sorted(set(ports))
    if port not in known:
        raise ValueError(f"port {port} is not a port of this switch (ports: {', '.join(map(str, known)) or 'none'})")


def check_priority_queues(n: int) -> None:
    """ValueError unless ``n`` is 1..MAX_PRIORITY_QUEUES queues per port."""
    if not 1 <= n <= MAX_PRIORITY_QUEUES:
        raise ValueError(f"{n} priority queues per port is outside 1..{MAX_PRIORITY_QUEUES} "
                         f"(standard_metadata.priority has 3 bits)")


def check_depth(depth: int) -> None:
    """ValueError unless ``depth`` is 1..MAX_DEPTH packets."""
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"queue depth {depth} packets is outside 1..{MAX_DEPTH}")


class QueueSettings:
    """A data plane's queue depth and rate settings, as BMv2's set_queue_depth and set_queue_rate
    take them: for one port (its queues present and future) or, port None, for every port and
    the default. Kept here, in one shape, so that a data plane replacing another (Python <->
    native, Switch.use_program) takes them over; the data plane applies them to its queues
    (``_apply_queue_setting``, called under its ``lock``)."""
    ports: dict
    cpu_port: int | None
    lock: object
    default_queue_depth: int
    default_queue_rate: int
    _port_settings: dict[int, dict[str, int]]     # port -> {"depth", "rate"} set for it alone

    def check_port(self, port: int) -> None:
        """ValueError naming the switch's ports (and CPU port) unless ``port`` is one of them."""
        check_port(port, [*self.ports, *([self.cpu_port] if self.cpu_port is not None else [])])

    def set_queue_rate(self, rate_pps: int, port: int | None = None) -> None:
        """BMv2's set_queue_rate: one port, or every port (and the default) when None."""
        check_rate(rate_pps)
        self._set_port(port, "rate", rate_pps)

    def set_queue_depth(self, depth: int, port: int | None = None) -> None:
        check_depth(depth)
        self._set_port(port, "depth", depth)

    def _set_port(self, port: int | None, setting: Literal["depth", "rate"], value: int) -> None:
        if port is not None:
            self.check_port(port)
        with self.lock:
            if port is None:
                setattr(self, f"default_queue_{setting}", value)
                for settings in self._port_settings.values():
                    settings[setting] = value
            else:
                self._port_settings.setdefault(
                    port, {"depth": self.default_queue_depth, "rate": self.default_queue_rate})[setting] = value
            self._apply_queue_setting(port, setting, value)

    def _apply_queue_setting(self, port: int | None, setting: str, value: int) -> None:
        raise NotImplementedError


class EgressQueue:
    __slots__ = ("port", "priority", "depth", "rate_pps", "_delay_us", "_last_departure", "items", "drops")

    def __init__(self, port: int, depth: int = DEFAULT_DEPTH, rate_pps: int = DEFAULT_RATE, priority: int = 0):
        self.port = port
        self.priority = priority
        self.depth = depth
        self.items: deque = deque()       # (departure time, packet), oldest first; the loop peeks at it
        self._last_departure = 0.0
        self.drops = 0
        self.set_rate(rate_pps)

    def set_rate(self, rate_pps: int) -> None:
        check_rate(rate_pps)
        self.rate_pps = rate_pps
        self._delay_us = 1e6 / rate_pps if rate_pps else 0.0

    def set_depth(self, depth: int) -> None:
        check_depth(depth)
        self.depth = depth

    def __len__(self) -> int:
        return len(self.items)

    def push(self, item, now_us: float) -> bool:
        """Queue ``item``; False (and a drop counted) when the queue is full."""
        if len(self.items) >= self.depth:
            self.drops += 1
            return False
        departure = max(now_us, self._last_departure + self._delay_us)
        self._last_departure = departure
        self.items.append((departure, item))
        return True

    def leaves_now(self, now_us: float) -> bool:
        """True, its departure recorded, when a packet arriving now would be the queue's only
        one and due at once (what push() then the loop's next look at the queue would do);
        False: push() it."""
        if self.items or self._last_departure + self._delay_us > now_us:
            return False
        self._last_departure = now_us
        return True

    def next_departure(self) -> float | None:
        return self.items[0][0] if self.items else None

    def clear(self) -> None:
        self.items.clear()
