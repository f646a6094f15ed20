"""Egress queues with a depth and a pace, as simple_switch's QueueingLogicPriRL, and a link's bits.

A port has up to ``--priority-queues`` N queues, one per traffic class (``standard_metadata.priority``
names it), each made when a packet first needs it, with its own depth, pace, departure times and
counters (classes.py serves them: strict priority or weighted round robin). Two kinds of pace:

- a packet rate R per queue, as BMv2's ``set_queue_rate``: the queue sends a packet at most every
  ``1/R`` seconds (BMv2's rule: the last departure + 1/rate), each class on its own, as BMv2's
  priority queues are paced one by one (a port whose eight classes all have packets sends eight
  times R);
- a bit rate B, as a real link (``set_queue_bitrate``; setting one clears the other): the port's
  link, which its classes share. A frame of L bytes holds the link ``wire_bytes(L) * 8 / B``
  seconds (as the data plane sees it: Ethernet header onward, no FCS), where ``wire_bytes(L) =
  max(L, 60) + 4 + 8 + 12`` is what an Ethernet link spends on it: a short frame padded to 60
  bytes (64 with its FCS), the 4-byte FCS, the 8 bytes of preamble and start-of-frame delimiter
  and the 12-byte inter-frame gap. A class may also have a bit rate of its own, a shaper below
  the link's (``set_queue_bitrate B PORT PRIORITY``).

Either way a pace is a token bucket one frame deep, cut-through: the link (or the class) is busy
with the last packet until ``next_free``; the packet the port serves next departs at
``max(next_free, when it was queued)``, and ``next_free`` becomes that departure plus the packet's
own time. At 1 Gbit/s a minimum frame is 84 bytes on the wire, 672 bits: 0.672 us; a 1500-byte
frame is 1524 bytes, 12.192 us; at 400 Gbit/s a minimum frame takes 1.68 ns. A burst of a
1500-byte frame and three 60-byte ones arriving at t=0 on an idle 1 Gbit/s port departs at 0,
12.192, 12.864 and 13.536 us, and the link is free again at 14.208 us: the bucket never holds
more than the one frame's cost, so nothing leaves faster than the link, and a link left idle
saves no credit. L is the packet's length when it is queued (``standard_metadata.packet_length``:
the frame as it came in, or as it was recirculated), at most its truncation (a clone session's
length, ``truncate()``); headers the pipeline adds or removes are not counted (the frame is
deparsed only as it leaves).

A departure is decided when the port serves the packet (classes.py), not when it is queued: a
packet of a higher class, or a class's pause (802.1Qbb, pfc.py), may come between. The times are
the ones the arithmetic above gives, whenever the loop gets to them. A setting changed while
packets flow takes effect from the last departure (``next_free`` becomes that departure plus the
last packet's time at the new setting), as BMv2 adds its new delay to the last departure; a new
queue (and a port's link) starts as if a packet (a minimum frame, paced in bits) had left at time
0, the switch's start. Departure times are floats in microseconds since that start: a double
resolves 0.5 ps there after an hour of uptime and 15 ps after a day, so the 1.68 ns of a minimum
frame at 400 Gbit/s is kept to 0.02% and 0.5% of itself.

Depth is counted in packets, like BMv2's ``set_queue_depth``; a full queue drops the arriving
packet. Settings are made for every port, one port (each of its classes) or one class of a port
(BMv2's ``set_queue_depth|set_queue_rate <value> [<port> [<priority>]]``); the last one made
for a queue wins, as on BMv2.

The native data plane (native/dataplane.c, native/classes.c) mirrors these rules and constants in C.
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
MAX_WEIGHT = 1_000        # packets a weighted class sends a turn of the round robin
# What an Ethernet link spends on a frame beyond the bytes the data plane sees (native/dataplane.c
# has their twins): a frame is padded to MIN_FRAME bytes before its FCS; then the FCS, the
# preamble and start-of-frame delimiter, and the gap before the next frame.
MIN_FRAME = 60
FCS, PREAMBLE_SFD, INTER_FRAME_GAP = 4, 8, 12
WIRE_OVERHEAD = FCS + PREAMBLE_SFD + INTER_FRAME_GAP      # 24 bytes
RECENT = 16               # departures a queue remembers (get_queue's "recent"; the tests' arithmetic)


def wire_bytes(length: int) -> int:
    """Bytes an Ethernet link spends on a frame of ``length`` bytes (Ethernet header onward, no
    FCS): 84 for 60 bytes or fewer, ``length + 24`` above."""
    return max(length, MIN_FRAME) + WIRE_OVERHEAD


def wire_us(length: int, bits_per_s: int) -> float:
    """Microseconds a frame of ``length`` bytes holds a link of ``bits_per_s``."""
    return wire_bytes(length) * 8e6 / bits_per_s


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


def check_weight(weight: int) -> None:
    """ValueError unless ``weight`` is 0 (strict priority) or 1..MAX_WEIGHT packets a turn."""
    if not 0 <= weight <= MAX_WEIGHT:
        raise ValueError(f"queue weight {weight} is outside 0..{MAX_WEIGHT} (0: strict priority; else packets "
                         f"a turn of the weighted round robin)")


Setting = Literal["depth", "rate", "bitrate", "weight"]
PACES = ("rate", "bitrate")     # a queue is paced by one of them, the other 0
CHECKS = {"depth": check_depth, "rate": check_rate, "bitrate": check_bitrate, "weight": check_weight}


class QueueSettings:
    """A data plane's queue settings, kept here in one shape so that a data plane replacing
    another (Python <-> native, Switch.use_program) takes them over (``take_queue_settings``):

    - the defaults and each port's own: depth and packet rate of every class, the link's bit
      rate, every class's weight (a port's setting is its classes' until one is set alone);
    - each class's own (``priority`` given): depth, packet rate, bit rate (a shaper, beside
      the link) and weight.

    The data plane applies them (``_apply_queue_setting``, under its ``lock``) with the
    effective values `class_settings` and `link_bitrate` answer."""
    ports: dict
    cpu_port: int | None
    lock: object
    priority_queues: int
    default_queue_depth: int
    default_queue_rate: int
    default_queue_bitrate: int
    _defaults: dict[str, int]
    _port_settings: dict[int, dict[str, int]]              # port -> its settings (every class's, the link's)
    _class_settings: dict[tuple[int, int], dict[str, int]]  # (port, priority) -> what was set for it alone

    def _init_queue_settings(self, depth: int, rate_pps: int, bitrate: int) -> None:
        """The defaults a data plane starts with; ValueError naming a bad one."""
        check_depth(depth)
        check_rate(rate_pps)
        check_bitrate(bitrate)
        if rate_pps and bitrate:
            raise ValueError(f"queue rate {rate_pps} packets/s and bit rate {bitrate} bits/s: a queue is paced "
                             f"by one or the other")
        self._defaults = {"depth": depth, "rate": rate_pps, "bitrate": bitrate, "weight": 0}
        self._port_settings = {}
        self._class_settings = {}

    @property
    def default_queue_depth(self) -> int:
        return self._defaults["depth"]

    @property
    def default_queue_rate(self) -> int:
        return self._defaults["rate"]

    @property
    def default_queue_bitrate(self) -> int:
        return self._defaults["bitrate"]

    def check_port(self, port: int) -> None:
        """ValueError naming the switch's ports (and CPU port) unless ``port`` is one of them."""
        check_port(port, [*self.ports, *([self.cpu_port] if self.cpu_port is not None else [])])

    def check_priority(self, priority: int) -> None:
        """ValueError unless the ports have a queue of ``priority``."""
        if not 0 <= priority < self.priority_queues:
            raise ValueError(f"priority {priority} is outside 0..{self.priority_queues - 1} "
                             f"(the switch has {self.priority_queues} priority queues a port)")

    def queue_settings(self, port: int | None = None) -> dict[str, int]:
        """{"depth", "rate", "bitrate", "weight"} of ``port`` (bitrate: its link's): its own, else
        (and for None) the defaults."""
        own = self._port_settings.get(port) if port is not None else None
        return dict(own or self._defaults)

    def class_settings(self, port: int, priority: int) -> dict[str, int]:
        """The queue of (``port``, ``priority``)'s effective {"depth", "rate", "bitrate", "weight"}:
        bitrate is the class's own (its shaper; the port's link is `link_bitrate`)."""
        out = self.queue_settings(port)
        out["bitrate"] = 0
        out.update(self._class_settings.get((port, priority), {}))
        return out

    def link_bitrate(self, port: int) -> int:
        """Bits/s of ``port``'s link (0: unlimited)."""
        return self.queue_settings(port)["bitrate"]

    def set_queue_rate(self, rate_pps: int, port: int | None = None, priority: int | None = None) -> None:
        """BMv2's set_queue_rate: every port (and the default) when ``port`` is None, else one
        port's classes, or one class; the bit rate at that level cleared."""
        self._set("rate", rate_pps, port, priority)

    def set_queue_bitrate(self, bits_per_s: int, port: int | None = None, priority: int | None = None) -> None:
        """A link's pace in bits per second (this module's docstring): every port's link (and the
        default's), one port's, or (``priority``) one class's shaper; packet rates at that level
        cleared."""
        self._set("bitrate", bits_per_s, port, priority)

    def set_queue_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        self._set("depth", depth, port, priority)

    def set_queue_weight(self, weight: int, port: int | None = None, priority: int | None = None) -> None:
        """A class's share of its port under weighted round robin: 0 serves it by strict priority
        (ahead of every weighted class), else it sends up to ``weight`` packets a turn."""
        self._set("weight", weight, port, priority)

    def take_queue_settings(self, old: QueueSettings) -> None:
        """``old``'s settings, all of them: this data plane replaces it."""
        with self.lock:
            self._defaults = dict(old._defaults)
            self._port_settings = {p: dict(s) for p, s in old._port_settings.items()}
            self._class_settings = {k: dict(s) for k, s in old._class_settings.items()}
            self._apply_queue_setting(None, None)

    def _set(self, setting: Setting, value: int, port: int | None, priority: int | None) -> None:
        CHECKS[setting](value)
        if priority is not None:
            if port is None:
                raise ValueError(f"a class's {setting} is set on one port: give the port before priority {priority}")
            self.check_priority(priority)
        if port is not None:
            self.check_port(port)
        values = {setting: value}
        if setting in PACES:                 # the other pace is cleared
            values.update((other, 0) for other in PACES if other != setting)
        with self.lock:
            if priority is not None:
                self._class_settings.setdefault((port, priority), {}).update(values)
            else:
                targets = [self._port_settings.setdefault(port, self.queue_settings())] if port is not None else \
                    [self._defaults, *self._port_settings.values()]
                for settings in targets:
                    settings.update(values)
                for key, own in self._class_settings.items():    # a port's setting is its classes' again
                    if port is None or key[0] == port:
                        for name in values:
                            own.pop(name, None)
            self._apply_queue_setting(port, priority)

    def _apply_queue_setting(self, port: int | None, priority: int | None) -> None:
        """The effective settings (`class_settings`, `link_bitrate`) into one class's queue, one
        port's queues and link, or (port None) every queue and link."""
        raise NotImplementedError


class EgressQueue:
    """One traffic class's queue of an egress port: its packets, depth, own pace, weight, counters
    and pause (pfc.py); ``link`` is the port's, which its classes share (classes.py)."""
    __slots__ = ("port", "priority", "depth", "rate_pps", "shaper", "weight", "link", "_delay_us", "last_departure",
                 "_last_length", "free", "items", "drops", "tx_packets", "tx_bytes", "recent",
                 "paused_until", "pause_start", "paused_us", "dropping", "watchdog_drops")

    def __init__(self, port: int, depth: int = DEFAULT_DEPTH, rate_pps: int = DEFAULT_RATE, priority: int = 0,
                 bitrate: int = DEFAULT_BITRATE, weight: int = 0, *, link):
        """Paced by ``bitrate`` (its own shaper) when it is given, else by ``rate_pps``; ``link``
        the port's (classes.PortLink)."""
        self.port = port
        self.priority = priority
        self.depth = depth
        self.weight = weight
        self.link = link
        # (queued at, packet, length, ingress buffer or None), oldest first; the loop peeks at it
        self.items: deque = deque()
        self.last_departure = 0.0         # us since the switch started
        self._last_length = 0             # bytes of the packet that departed then
        self.drops = 0                    # packets a full queue refused
        self.tx_packets = self.tx_bytes = 0
        self.recent: deque = deque(maxlen=RECENT)    # (departure, length) of the last departures
        self.paused_until = 0.0           # 802.1Qbb: not served before this (pfc.py)
        self.pause_start = 0.0
        self.paused_us = 0.0              # time paused, pauses that ended
        self.dropping = False             # its PFC watchdog drops what comes (pfc.py)
        self.watchdog_drops = 0
        if bitrate:
            self.set_bitrate(bitrate)
        else:
            self.set_rate(rate_pps)

    @property
    def bitrate(self) -> int:
        """Bits/s the queue is paced at: its own shaper's, else its port link's."""
        return self.shaper or self.link.bitrate

    @property
    def next_free(self) -> float:
        """When the queue may send next: its own pace and its port's link both free."""
        return max(self.free, self.link.next_free)

    def set_rate(self, rate_pps: int) -> None:
        """Paced in packets per second (0: unlimited); its own bit rate cleared."""
        check_rate(rate_pps)
        self.rate_pps, self.shaper = rate_pps, 0
        self._delay_us = 1e6 / rate_pps if rate_pps else 0.0
        self.free = self.last_departure + self._pace_us(self._last_length)

    def set_bitrate(self, bits_per_s: int) -> None:
        """Its own bit rate, a shaper below the link's (0: none); the packet rate cleared."""
        check_bitrate(bits_per_s)
        self.rate_pps, self.shaper = 0, bits_per_s
        self._delay_us = 0.0
        self.free = self.last_departure + self._pace_us(self._last_length)

    def set_depth(self, depth: int) -> None:
        check_depth(depth)
        self.depth = depth

    def configure(self, settings: dict[str, int]) -> None:
        """`QueueSettings.class_settings`' values."""
        self.set_depth(settings["depth"])
        if settings["bitrate"]:
            self.set_bitrate(settings["bitrate"])
        else:
            self.set_rate(settings["rate"])
        check_weight(settings["weight"])
        self.weight = settings["weight"]

    def _pace_us(self, length: int) -> float:
        """Microseconds the queue's own pace holds it after a packet of ``length`` bytes."""
        return wire_us(length, self.shaper) if self.shaper else self._delay_us

    def __len__(self) -> int:
        return len(self.items)

    def push(self, item, now_us: float, length: int, buffer=None) -> bool:
        """Queue ``item``, a packet of ``length`` bytes (``buffer``: the ingress buffer that
        counts it, pfc.py); False (and a drop counted) when the queue is full."""
        if len(self.items) >= self.depth:
            self.drops += 1
            return False
        self.items.append((now_us, item, length, buffer))
        self.link.queued += 1
        return True

    def ready(self) -> float:
        """When the head packet may leave as far as the class goes: queued, its pace free, not
        paused (the link comes on top: classes.PortLink)."""
        r = self.items[0][0]
        if self.free > r:
            r = self.free
        return self.paused_until if self.paused_until > r else r

    def departs(self, departure: float, length: int) -> None:
        """A packet of ``length`` bytes leaves at ``departure``: the class's pace and the port's
        link are busy with it; counted."""
        self.last_departure, self._last_length = departure, length
        self.free = departure + self._pace_us(length)
        self.link.departs(departure, length)
        self.tx_packets += 1
        self.tx_bytes += length
        self.recent.append((departure, length))

    def take(self, departure: float):
        """The head item (queued at, packet, length, buffer), departing at ``departure``."""
        item = self.items.popleft()
        self.link.queued -= 1
        self.departs(departure, item[2])
        return item

    def leaves_now(self, now_us: float, length: int) -> bool:
        """True, its departure recorded, when a packet of ``length`` bytes arriving now would be
        the queue's only one and due at once (what push() then the loop's next look at the
        queue would do); False: push() it."""
        if self.items or self.free > now_us or self.link.next_free > now_us or self.paused_until > now_us:
            return False
        self.departs(now_us, length)
        return True

    def next_departure(self) -> float | None:
        """When the head packet may leave, link included (None: empty)."""
        if not self.items:
            return None
        r = self.ready()
        return r if r > self.link.next_free else self.link.next_free

    def clear(self) -> list:
        """Every packet taken out (not sent): the items, for their buffers to be released."""
        items = list(self.items)
        self.link.queued -= len(items)
        self.items.clear()
        return items

    def paused_total_us(self, now_us: float) -> float:
        """Time the queue has been paused since the start, the pause under way included."""
        return self.paused_us + max(0.0, min(now_us, self.paused_until) - self.pause_start)

    def pause(self, now_us: float, until_us: float) -> None:
        """Not served before ``until_us`` (802.1Qbb: a PAUSE's quanta from now; ``now_us``: an
        XON, served again at once)."""
        if self.paused_until > now_us:           # a pause under way: extended, or ended now
            if until_us > now_us:
                self.paused_until = until_us
                return
            self.paused_us += now_us - self.pause_start
        else:                                    # the last pause ended by itself: counted
            self.paused_us += self.paused_until - self.pause_start
        self.pause_start = now_us
        self.paused_until = until_us if until_us > now_us else now_us

    def paused(self, now_us: float) -> bool:
        return self.paused_until > now_us
