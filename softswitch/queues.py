"""Egress queues with a depth and a rate, as simple_switch's QueueingLogicPriRL.

Every packet gets a departure time when it is queued: ``max(now, previous departure +
1/rate)``; it leaves once that time has come. A full queue drops the arriving packet.
Depth is counted in packets, rate in packets per second (0: unlimited), like BMv2's
``set_queue_depth`` / ``set_queue_rate``.
"""
from __future__ import annotations

from collections import deque

DEFAULT_DEPTH = 64        # simple_switch's default queue capacity, in packets
DEFAULT_RATE = 0          # packets per second; 0 means no limit


class EgressQueue:
    __slots__ = ("port", "depth", "rate_pps", "_delay_us", "_last_departure", "_items", "drops")

    def __init__(self, port: int, depth: int = DEFAULT_DEPTH, rate_pps: int = DEFAULT_RATE):
        self.port = port
        self.depth = depth
        self._items: deque = deque()
        self._last_departure = 0.0
        self.drops = 0
        self.set_rate(rate_pps)

    def set_rate(self, rate_pps: int) -> None:
        if rate_pps < 0:
            raise ValueError(f"queue rate must be >= 0 packets/s, got {rate_pps}")
        self.rate_pps = rate_pps
        self._delay_us = 1e6 / rate_pps if rate_pps else 0.0

    def set_depth(self, depth: int) -> None:
        if depth < 1:
            raise ValueError(f"queue depth must be >= 1 packet, got {depth}")
        self.depth = depth

    def __len__(self) -> int:
        return len(self._items)

    def push(self, item, now_us: float) -> bool:
        """Queue ``item``; False (and a drop counted) when the queue is full."""
        if len(self._items) >= self.depth:
            self.drops += 1
            return False
        departure = max(now_us, self._last_departure + self._delay_us)
        self._last_departure = departure
        self._items.append((departure, item))
        return True

    def next_departure(self) -> float | None:
        return self._items[0][0] if self._items else None

    def pop_ready(self, now_us: float):
        """The next item whose time has come, or None."""
        items = self._items
        if items and items[0][0] <= now_us:
            return items.popleft()[1]
        return None

    def clear(self) -> None:
        self._items.clear()
