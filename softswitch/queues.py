"""Egress queues with a depth and a pace, as simple_switch's QueueingLogicPriRL, and a link's bits.

A queue is paced in packets per second, as BMv2's ``set_queue_rate``, or in bits per second, as
a real link (``set_queue_bitrate``; setting one clears the other). Either way it is a token
bucket one frame deep, cut-through: the link is busy with the last packet until ``next_free``; a
packet queued at ``now`` departs at ``max(now, next_free)``, and ``next_free`` becomes that
departure plus the packet's own time on the link:

- a packet rate R: ``1/R`` seconds, whatever the packet (BMv2's rule: the last departure +
  1/rate);
- a bit rate B: ``wire_bytes(L) * 8 / B`` seconds for a frame of L bytes (as the data plane sees
  it: Ethernet header onward, no FCS), where ``wire_bytes(L) = max(L, 60) + 4 + 8 + 12`` is what
  an Ethernet link spends on it: a short frame padded to 60 bytes (64 with its FCS), the 4-byte
  FCS, the 8 bytes of preamble and start-of-frame delimiter and the 12-byte inter-frame gap.

At 1 Gbit/s a minimum frame is 84 bytes on the wire, 672 bits: 0.672 us; a 1500-byte frame is
1524 bytes, 12.192 us; at 400 Gbit/s a minimum frame takes 1.68 ns. A burst of a 1500-byte
frame and three 60-byte ones arriving at t=0 on an idle 1 Gbit/s port departs at 0, 12.192,
12.864 and 13.536 us, and the link is free again at 14.208 us: the bucket never holds more than
the one frame's cost, so nothing leaves faster than the link, and a link left idle saves no
credit. L is the packet's length when it is queued (``standard_metadata.packet_length``: the
frame as it came in, or as it was recirculated), at most its truncation (a clone session's
length, ``truncate()``); headers the pipeline adds or removes are not counted (the frame is
deparsed only as it leaves).

A setting changed while packets flow takes effect from the last departure (``next_free`` becomes
that departure plus the last packet's time at the new setting), as BMv2 adds its new delay to
the last departure; a new queue starts as if a packet (a minimum frame, paced in bits) had left
at time 0, the switch's start. Departure times are floats in microseconds since that start: a
double resolves 0.5 ps there after an hour of uptime and 15 ps after a day, so the 1.68 ns of a
minimum frame at 400 Gbit/s is kept to 0.02% and 0.5% of itself.

Depth is counted in packets, like BMv2's ``set_queue_depth``; a full queue drops the arriving
packet. With priority queues (``--priority-queues N``, as simple_switch's) a port has up to N of
them (each made when a packet first needs it, with the port's settings), each with its own
depth, pace and departure times; a packet goes to the one its ``standard_metadata.priority``
names, and of the packets whose time has come the highest priority leaves first
(QueueingLogicPriRL).

The native data plane (native/dataplane.c) mirrors these rules and constants in C.
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
DEFAULT_BITRATE = 0       # bits per second; 0 means no limit
MIN_BITRATE = 1_000                 # 1 kbit/s: a 1500-byte frame takes 12.2 s
MAX_BITRATE = 400_000_000_000       # 400 Gbit/s: a minimum frame takes 1.68 ns
# What an Ethernet link spends on a frame beyond the bytes the data plane sees (native/dataplane.c
# has their twins): a frame is padded to MIN_FRAME bytes before its FCS; then the FCS, the
# preamble and start-of-frame delimiter, and the gap before the next frame.
MIN_FRAME = 60
FCS, PREAMBLE_SFD, INTER_FRAME_GAP = 4, 8, 12
WIRE_OVERHEAD = FCS + PREAMBLE_SFD + INTER_FRAME_GAP      # 24 bytes


def wire_bytes(length: int) -> int:
    """Bytes an Ethernet link spends on a frame of ``length`` bytes (Ethernet header onward, no
    FCS): 84 for 60 bytes or fewer, ``length + 24`` above."""
    return max(length, MIN_FRAME) + WIRE_OVERHEAD


def check_rate(rate_pps: int) -> None:
    """ValueError unless ``rate_pps`` is 0 (unlimited) or a rate in 1..MAX_RATE_PPS packets/s."""
    if not 0 <= rate_pps <= MAX_RATE_PPS:
        raise ValueError(f"queue rate {rate_pps} packets/s is outside 0..{MAX_RATE_PPS} (0: unlimited)")


def check_bitrate(bits_per_s: int) -> None:
    """ValueError unless ``bits_per_s`` is 0 (unlimited) or MIN_BITRATE..MAX_BITRATE bits/s."""
    if bits_per_s != 0 and not MIN_BITRATE <= bits_per_s <= MAX_BITRATE:
        raise ValueError(f"queue bit rate {bits_per_s} bits/s is outside {MIN_BITRATE}..{MAX_BITRATE} "
                         f"(0: unlimited)")


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


PACES = ("rate", "bitrate")     # a queue is paced by one of them, the other 0


class QueueSettings:
    """A data plane's queue settings: a depth, and a pace in packets/s (BMv2's set_queue_rate) or
    in bits/s (set_queue_bitrate; setting one clears the other), for one port (its queues present
    and future) or, port None, for every port and the default. Kept here, in one shape, so that a
    data plane replacing another (Python <-> native, Switch.use_program) takes them over
    (``take_queue_settings``); the data plane applies them to its queues (``_apply_queue_setting``,
    called under its ``lock``)."""
    ports: dict
    cpu_port: int | None
    lock: object
    default_queue_depth: int
    default_queue_rate: int
    default_queue_bitrate: int
    _port_settings: dict[int, dict[str, int]]     # port -> {"depth", "rate", "bitrate"} set for it alone

    def _init_queue_settings(self, depth: int, rate_pps: int, bitrate: int) -> None:
        """The defaults a data plane starts with; ValueError naming a bad one."""
        check_depth(depth)
        check_rate(rate_pps)
        check_bitrate(bitrate)
        if rate_pps and bitrate:
            raise ValueError(f"queue rate {rate_pps} packets/s and bit rate {bitrate} bits/s: a queue is paced "
                             f"by one or the other")
        self.default_queue_depth, self.default_queue_rate, self.default_queue_bitrate = depth, rate_pps, bitrate
        self._port_settings = {}

    def check_port(self, port: int) -> None:
        """ValueError naming the switch's ports (and CPU port) unless ``port`` is one of them."""
        check_port(port, [*self.ports, *([self.cpu_port] if self.cpu_port is not None else [])])

    def queue_settings(self, port: int | None = None) -> dict[str, int]:
        """{"depth", "rate", "bitrate"} of ``port``'s queues: its own, else (and for None) the defaults."""
        own = self._port_settings.get(port) if port is not None else None
        return dict(own) if own else {"depth": self.default_queue_depth, "rate": self.default_queue_rate,
                                      "bitrate": self.default_queue_bitrate}

    def set_queue_rate(self, rate_pps: int, port: int | None = None) -> None:
        """BMv2's set_queue_rate: one port, or every port (and the default) when None."""
        check_rate(rate_pps)
        self._set_port(port, "rate", rate_pps)

    def set_queue_bitrate(self, bits_per_s: int, port: int | None = None) -> None:
        """A link's pace in bits per second (queues.py's docstring): one port, or every port (and
        the default) when None."""
        check_bitrate(bits_per_s)
        self._set_port(port, "bitrate", bits_per_s)

    def set_queue_depth(self, depth: int, port: int | None = None) -> None:
        check_depth(depth)
        self._set_port(port, "depth", depth)

    def take_queue_settings(self, old: QueueSettings) -> None:
        """``old``'s settings, the defaults then each port's own: this data plane replaces it."""
        for port in (None, *old._port_settings):
            settings = old.queue_settings(port)
            self.set_queue_depth(settings["depth"], port)
            if settings["bitrate"]:
                self.set_queue_bitrate(settings["bitrate"], port)
            else:
                self.set_queue_rate(settings["rate"], port)

    def _set_port(self, port: int | None, setting: Literal["depth", "rate", "bitrate"], value: int) -> None:
        if port is not None:
            self.check_port(port)
        values = {setting: value}
        if setting in PACES:                 # the other pace is cleared
            values.update((other, 0) for other in PACES if other != setting)
        with self.lock:
            if port is None:
                for name, v in values.items():
                    setattr(self, f"default_queue_{name}", v)
                for settings in self._port_settings.values():
                    settings.update(values)
            else:
                self._port_settings.setdefault(port, self.queue_settings()).update(values)
            self._apply_queue_setting(port, setting, value)

    def _apply_queue_setting(self, port: int | None, setting: str, value: int) -> None:
        """``setting`` ("depth", "rate" or "bitrate": either pace clears the other) into one
        port's queues, or (port None) every queue."""
        raise NotImplementedError


class EgressQueue:
    __slots__ = ("port", "priority", "depth", "rate_pps", "bitrate", "_delay_us", "last_departure", "_last_length",
                 "next_free", "items", "drops")

    def __init__(self, port: int, depth: int = DEFAULT_DEPTH, rate_pps: int = DEFAULT_RATE, priority: int = 0,
                 bitrate: int = DEFAULT_BITRATE):
        """Paced by ``bitrate`` when it is given, else by ``rate_pps``."""
        self.port = port
        self.priority = priority
        self.depth = depth
        self.items: deque = deque()       # (departure time, packet), oldest first; the loop peeks at it
        self.last_departure = 0.0         # us since the switch started
        self._last_length = 0             # bytes of the packet that departed then
        self.drops = 0
        if bitrate:
            self.set_bitrate(bitrate)
        else:
            self.set_rate(rate_pps)

    def set_rate(self, rate_pps: int) -> None:
        """Paced in packets per second (0: unlimited); the bit rate cleared."""
        check_rate(rate_pps)
        self.rate_pps, self.bitrate = rate_pps, 0
        self._delay_us = 1e6 / rate_pps if rate_pps else 0.0
        self.next_free = self.last_departure + self._link_us(self._last_length)

    def set_bitrate(self, bits_per_s: int) -> None:
        """Paced in bits per second (0: unlimited); the packet rate cleared."""
        check_bitrate(bits_per_s)
        self.rate_pps, self.bitrate = 0, bits_per_s
        self._delay_us = 0.0
        self.next_free = self.last_departure + self._link_us(self._last_length)

    def set_depth(self, depth: int) -> None:
        check_depth(depth)
        self.depth = depth

    def _link_us(self, length: int) -> float:
        """Microseconds the link is busy with a packet of ``length`` bytes."""
        return wire_bytes(length) * 8e6 / self.bitrate if self.bitrate else self._delay_us

    def _departs(self, departure: float, length: int) -> None:
        self.last_departure, self._last_length = departure, length
        self.next_free = departure + self._link_us(length)

    def __len__(self) -> int:
        return len(self.items)

    def push(self, item, now_us: float, length: int) -> bool:
        """Queue ``item``, a packet of ``length`` bytes; False (and a drop counted) when the queue
        is full."""
        if len(self.items) >= self.depth:
            self.drops += 1
            return False
        departure = max(now_us, self.next_free)
        self._departs(departure, length)
        self.items.append((departure, item))
        return True

    def leaves_now(self, now_us: float, length: int) -> bool:
        """True, its departure recorded, when a packet of ``length`` bytes arriving now would be
        the queue's only one and due at once (what push() then the loop's next look at the
        queue would do); False: push() it."""
        if self.items or self.next_free > now_us:
            return False
        self._departs(now_us, length)
        return True

    def next_departure(self) -> float | None:
        return self.items[0][0] if self.items else None

    def clear(self) -> None:
        self.items.clear()
