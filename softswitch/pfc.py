"""Priority flow control (IEEE 802.1Qbb) on softswitch: lossless classes, PAUSE frames, the watchdog.

A class is lossless on a port when it is given XOFF, XON and headroom thresholds there
(``set_lossless``; "lossless" is the word in every layer: controller.lossless configures it). Then:

Buffer accounting, per ingress port and class. A packet that arrived on port P in class c (its
``standard_metadata.priority`` when it is queued) and waits in any egress queue counts its bytes
(the length the queue paces it by) in P's buffer of c until it leaves the queue (or is dropped
there). A packet that leaves at once, queued nowhere, is never counted. A lossless class admits a
packet while ``used + length <= xoff + headroom``; beyond, the packet is dropped and counted
apart (``lossless_drops``: a headroom too small, or a bug), as is one that finds its egress
queue full (a queue too shallow for the class). Packets from the CPU port are not counted.

PAUSE frames out. When P's buffer of c reaches XOFF (``used >= xoff``), a PFC frame goes out of P
to the neighbour that sent the bytes: MAC control (EtherType 0x8808), opcode 0x0101, to
01:80:c2:00:00:01 from the port's own address, the class-enable vector with c's bit, c's quanta
the configured ``quanta`` (the others 0), padded to 60 bytes. It is sent again before the
neighbour's pause runs out, every half of the pause it asks for (``quanta`` x 512 bit times at
P's bit rate), while the buffer stays above XON; when the buffer drains to XON or below, an XON
(the same frame, quanta 0) goes out. MAC control frames skip the egress queues and their pacing,
as a MAC sends them between frames.

PAUSE frames in. A frame of EtherType 0x8808 arriving on a port is the MAC's, never the pipeline's:
the data plane takes it before parsing (packet_path.arrivals; native: receive_burst). A PFC frame
for a class that is lossless on that port stops that port's egress queue of the class for its
quanta x 512 bit times at the port's bit rate (NOMINAL_BITRATE when the port has none), from its
arrival; quanta 0 (XON) lets it go at once; other classes are not touched. A port's PFC is
enabled class by class, as a switch's: a frame's bits for classes not lossless on that port are
ignored. A frame shorter than a PFC frame, not to
01:80:c2:00:00:01, of another opcode (802.3x PAUSE, 0x0001, among them), or with reserved bits of
the class-enable vector set is counted as malformed by that reason, and dropped.

The watchdog (``set_pfc_watchdog``; off until given a detection time), as switch vendors ship it
(SONiC's pfcwd): every ``poll_us`` it looks at every lossless egress queue; one paused without a
break for ``detect_us`` or longer while it holds packets is in a storm: its pause is lifted and
PAUSE frames for it are no longer honoured, and with action ``drop`` its packets are dropped,
those queued and those that come (counted: ``watchdog_drops``; their ingress buffers drain, so
the upstream pause is lifted too), with ``forward`` they flow. A storm ends (``restores``) once
no PAUSE for that queue has arrived for ``restore_us``. A storm is therefore caught within
``detect_us`` plus one ``poll_us`` of its pause's start (``detected_after_us`` says when).

The native data plane (native/pfc.c) does the same, by the same rules and constants.
"""
from __future__ import annotations

import struct
from dataclasses import asdict, dataclass
from typing import Callable, Literal

from .queues import EgressQueue

ETHERTYPE_MAC_CONTROL = 0x8808
MAC_CONTROL = b"\x88\x08"           # bytes 12..13 of a MAC control frame
OPCODE_PFC = 0x0101
PFC_DESTINATION = bytes.fromhex("0180c2000001")
PFC_LENGTH = 14 + 2 + 2 + 16        # header, opcode, class-enable vector, 8 quanta
FRAME_LENGTH = 60                   # padded, as a MAC sends it (without its FCS)
QUANTUM_BITS = 512
MAX_QUANTA = 0xFFFF
CLASSES = 8
NOMINAL_BITRATE = 1_000_000_000     # quanta of a port with no bit rate are counted at 1 Gbit/s
MAX_BUFFER = 1 << 30                # bytes: XOFF plus headroom of one class of one port at most
MALFORMED = ("short", "destination", "opcode", "reserved")
ACTIONS = ("drop", "forward")
WATCHDOG_OFF_US = 0

Action = Literal["drop", "forward"]


def pfc_frame(source: bytes, enable: int, quanta: list[int]) -> bytes:
    """A PFC frame from MAC ``source``: class-enable vector ``enable`` (bit c: class c), quanta
    of the eight classes, padded to 60 bytes."""
    body = PFC_DESTINATION + source + MAC_CONTROL + struct.pack("!HH8H", OPCODE_PFC, enable, *quanta)
    return body + bytes(FRAME_LENGTH - len(body))


def class_frame(source: bytes, priority: int, quanta: int) -> bytes:
    """The PFC frame that pauses (``quanta`` > 0) or lets go (0) class ``priority`` alone."""
    times = [0] * CLASSES
    times[priority] = quanta
    return pfc_frame(source, 1 << priority, times)


def parse_pfc(frame: bytes) -> tuple[int, tuple[int, ...]] | str:
    """(class-enable vector, the eight quanta) of a MAC control frame, or why it is malformed
    (one of MALFORMED)."""
    if len(frame) < PFC_LENGTH:
        return "short"
    if frame[:6] != PFC_DESTINATION:
        return "destination"
    opcode, enable, *quanta = struct.unpack_from("!HH8H", frame, 14)
    if opcode != OPCODE_PFC:
        return "opcode"
    if enable >> CLASSES:
        return "reserved"
    return enable, tuple(quanta)


def pause_us(quanta: int, bits_per_s: int) -> float:
    """Microseconds ``quanta`` pause a link of ``bits_per_s`` (NOMINAL_BITRATE when 0)."""
    return quanta * QUANTUM_BITS * 1e6 / (bits_per_s or NOMINAL_BITRATE)


@dataclass(frozen=True)
class Lossless:
    """One class's lossless thresholds on one port, in bytes of its ingress buffer."""
    xoff: int
    xon: int
    headroom: int
    quanta: int = MAX_QUANTA       # what its PAUSE frames ask for

    def __post_init__(self) -> None:
        if not 0 <= self.xon < self.xoff:
            raise ValueError(f"lossless XON {self.xon} and XOFF {self.xoff} bytes: need 0 <= XON < XOFF")
        if self.headroom < 0 or self.xoff + self.headroom > MAX_BUFFER:
            raise ValueError(f"lossless XOFF {self.xoff} + headroom {self.headroom} bytes: need headroom >= 0 and "
                             f"the sum at most {MAX_BUFFER}")
        if not 1 <= self.quanta <= MAX_QUANTA:
            raise ValueError(f"lossless quanta {self.quanta}: need 1..{MAX_QUANTA} (512 bit times each)")


@dataclass(frozen=True)
class Watchdog:
    """The PFC watchdog: off while ``detect_us`` is 0 (WATCHDOG_OFF_US)."""
    detect_us: int = WATCHDOG_OFF_US
    restore_us: int = 0
    poll_us: int = 10_000
    action: Action = "drop"

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"PFC watchdog action {self.action!r}: one of {', '.join(ACTIONS)}")
        if self.detect_us < 0 or self.restore_us < 0 or self.poll_us < 1:
            raise ValueError(f"PFC watchdog detection {self.detect_us} us, restoration {self.restore_us} us, polling "
                             f"{self.poll_us} us: need detection and restoration >= 0 (detection 0: off), polling >= 1")

    @property
    def on(self) -> bool:
        return self.detect_us > 0


class LosslessSettings:
    """A data plane's lossless classes and watchdog, kept in one shape (as queues.QueueSettings
    keeps the queues') so that a data plane replacing another takes them over; the data plane
    applies them (``_apply_lossless(port, priority)`` and ``_apply_watchdog()``, under its lock)."""
    ports: dict
    lock: object
    priority_queues: int
    _lossless: dict[tuple[int, int], Lossless]
    _watchdog: Watchdog

    def _init_lossless(self) -> None:
        self._lossless, self._watchdog = {}, Watchdog()

    def lossless(self, port: int, priority: int) -> Lossless | None:
        return self._lossless.get((port, priority))

    @property
    def pfc_watchdog(self) -> Watchdog:
        return self._watchdog

    def set_lossless(self, priority: int, config: Lossless | None, port: int | None = None) -> None:
        """Class ``priority`` lossless with ``config`` (None: lossy again) on ``port``, or on
        every data port of the switch."""
        self.check_priority(priority)        # queues.QueueSettings
        if port is not None and port not in self.ports:
            raise ValueError(f"port {port} is not a data port of this switch (ports: "
                             f"{', '.join(map(str, sorted(self.ports))) or 'none'}): PFC runs on data ports")
        with self.lock:
            for p in ([port] if port is not None else sorted(self.ports)):
                if config is None:
                    self._lossless.pop((p, priority), None)
                else:
                    self._lossless[(p, priority)] = config
                self._apply_lossless(p, priority)

    def set_pfc_watchdog(self, watchdog: Watchdog) -> None:
        with self.lock:
            self._watchdog = watchdog
            self._apply_watchdog()

    def take_lossless_settings(self, old: LosslessSettings) -> None:
        with self.lock:
            self._lossless = dict(old._lossless)
            self._watchdog = old._watchdog
            for port, priority in self._lossless:
                self._apply_lossless(port, priority)
            self._apply_watchdog()

    def _apply_lossless(self, port: int, priority: int) -> None:
        raise NotImplementedError

    def _apply_watchdog(self) -> None:
        raise NotImplementedError


class PfcClass:
    """PFC's state of one (port, class): the port's ingress buffer of the class (its bytes in the
    egress queues, the pause it holds its neighbour in) and what came for the port's egress queue
    of the class (pauses, the watchdog). Kept once made: packets queued while the class was
    lossless still count in it when it is not any more (``config`` None)."""
    __slots__ = ("port", "priority", "config", "used", "frames", "peak", "pausing", "refresh_at", "pausing_since",
                 "pausing_us", "pause_sent", "xon_sent", "lossless_drops", "at_xoff", "pause_received",
                 "xon_received", "storm", "last_pause_rx", "storms", "restores", "detected_after_us")

    def __init__(self, port: int, priority: int, config: Lossless):
        self.port, self.priority, self.config = port, priority, config
        self.used = self.frames = self.peak = 0
        self.pausing = False
        self.refresh_at = self.pausing_since = self.pausing_us = 0.0
        self.pause_sent = self.xon_sent = self.lossless_drops = 0
        self.at_xoff = (0, 0)          # (bytes, frames) in the buffer when the last XOFF went out
        self.pause_received = self.xon_received = 0
        self.storm = False
        self.last_pause_rx = 0.0       # us: the last PAUSE (quanta > 0) that came for its egress queue
        self.storms = self.restores = 0
        self.detected_after_us: float | None = None   # the last storm: caught this long after its pause began

    def room(self, length: int) -> bool:
        """The packet fits below XOFF plus headroom."""
        return self.used + length <= self.config.xoff + self.config.headroom


class Pfc:
    """The Python data plane's PFC (softswitch.dataplane.Dataplane owns one): the buffers of its
    lossless classes, the PAUSE frames it sends and takes, the watchdog. Everything is called by
    the data plane's loop, or under its lock."""

    def __init__(self, owner, transmit: Callable[[int, bytes], None], macs: dict[int, bytes]):
        self.owner = owner              # queue(port, priority), queues, queued, link_bitrate(port), priority_queues
        self.transmit = transmit
        self.macs = macs
        self.classes: dict[tuple[int, int], PfcClass] = {}
        self.lossless = 0               # classes configured lossless (0: the packet path skips PFC)
        self.watchdog = Watchdog()
        self.next_poll = 0.0
        self.malformed: dict[int, dict[str, int]] = {}
        self.refreshing = 0             # classes holding a pause (their refreshes are the loop's timers)

    # -- configuration --------------------------------------------------------------------
    def configure(self, port: int, priority: int, config: Lossless | None, now: float) -> None:
        c = self.classes.get((port, priority))
        if c is None:
            if config is None:
                return
            c = self.classes[(port, priority)] = PfcClass(port, priority, config)
            self.lossless += 1
            return
        if config is None:
            if c.config is not None:
                self._let_go(c, now)           # the neighbour is not left paused
                self._restore(c)
                self.lossless -= 1
                q = self.owner.queues.get((port, priority))
                if q is not None:
                    q.pause(now, now)
        elif c.config is None:
            self.lossless += 1
        c.config = config

    def set_watchdog(self, watchdog: Watchdog, now: float) -> None:
        self.watchdog = watchdog
        self.next_poll = now + watchdog.poll_us
        if not watchdog.on:
            for c in self.classes.values():
                self._restore(c)

    # -- the packet path --------------------------------------------------------------------
    def admit(self, port: int, priority: int, length: int) -> PfcClass | bool:
        """The buffer a packet from ``port`` of class ``priority`` counts in (True: a lossy class,
        counted nowhere; False: no room, a lossless drop counted)."""
        c = self.classes.get((port, priority))
        if c is None or c.config is None:
            return True
        if c.room(length):
            return c
        c.lossless_drops += 1
        return False

    def add(self, c: PfcClass, length: int, now: float) -> None:
        """A packet counted in ``c`` was queued: XOFF when the buffer reached the threshold."""
        c.used += length
        c.frames += 1
        if c.used > c.peak:
            c.peak = c.used
        if not c.pausing and c.used >= c.config.xoff:
            c.pausing, c.pausing_since, c.at_xoff = True, now, (c.used, c.frames)
            self.refreshing += 1
            self._send(c, c.config.quanta, now)

    def release(self, c: PfcClass, length: int, now: float) -> None:
        """A packet counted in ``c`` left its queue (sent or dropped): XON when the buffer drained."""
        c.used -= length
        c.frames -= 1
        if c.pausing and c.used <= c.config.xon:
            self._let_go(c, now)

    def _let_go(self, c: PfcClass, now: float) -> None:
        if c.pausing:
            c.pausing = False
            c.pausing_us += now - c.pausing_since
            self.refreshing -= 1
            self._send(c, 0, now)

    def _send(self, c: PfcClass, quanta: int, now: float) -> None:
        if quanta:
            c.pause_sent += 1
            c.refresh_at = now + pause_us(quanta, self.owner.link_bitrate(c.port)) / 2
        else:
            c.xon_sent += 1
        self.transmit(c.port, class_frame(self.macs.get(c.port, bytes(6)), c.priority, quanta))

    def receive(self, port: int, frame: bytes, now: float) -> None:
        """A MAC control frame that came in on ``port``: honoured, counted, or counted malformed."""
        parsed = parse_pfc(frame)
        if isinstance(parsed, str):
            counts = self.malformed.setdefault(port, {})
            counts[parsed] = counts.get(parsed, 0) + 1
            return
        enable, quanta = parsed
        for priority in range(min(CLASSES, self.owner.priority_queues)):
            c = self.classes.get((port, priority))
            if not enable >> priority & 1 or c is None or c.config is None:    # not lossless here: not honoured
                continue
            q = quanta[priority]
            if q:
                c.pause_received += 1
                c.last_pause_rx = now
            else:
                c.xon_received += 1
            if c.storm:                     # the watchdog holds it: PFC is off for it
                continue
            queue = self.owner.queue(port, priority)
            queue.pause(now, now + pause_us(q, self.owner.link_bitrate(port)) if q else now)

    # -- the loop's timers ------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """PAUSE refreshes due by ``now``, and the watchdog's poll when its time has come."""
        if self.refreshing:
            for c in self.classes.values():
                if c.pausing and c.refresh_at <= now:
                    self._send(c, c.config.quanta, now)
        if self.watchdog.on and now >= self.next_poll:
            self.next_poll = now + self.watchdog.poll_us
            self._poll(now)

    def next_timer(self) -> float | None:
        """When ``tick`` has something to do next (None: nothing)."""
        times = [c.refresh_at for c in self.classes.values() if c.pausing] if self.refreshing else []
        if self.watchdog.on and self.lossless:
            times.append(self.next_poll)
        return min(times) if times else None

    def _poll(self, now: float) -> None:
        wd = self.watchdog
        for key, c in self.classes.items():
            if c.config is None:
                continue
            q = self.owner.queues.get(key)
            if c.storm:
                if now - c.last_pause_rx >= wd.restore_us:
                    self._restore(c)
            elif q is not None and q.items and q.paused(now) and now - q.pause_start >= wd.detect_us:
                c.storm, c.storms, c.detected_after_us = True, c.storms + 1, now - q.pause_start
                q.pause(now, now)
                if wd.action == "drop":
                    q.dropping = True
                    self.drop_queued(q, now)

    def _restore(self, c: PfcClass) -> None:
        if c.storm:
            c.storm = False
            c.restores += 1
            q = self.owner.queues.get((c.port, c.priority))
            if q is not None:
                q.dropping = False

    def drop_queued(self, q: EgressQueue, now: float) -> None:
        """Every packet of ``q`` dropped by the watchdog, their buffers released."""
        items = q.clear()
        q.watchdog_drops += len(items)
        self.owner.queued -= len(items)
        self.owner.counters.watchdog_drops += len(items)
        for _, _, length, c in items:
            if c is not None:
                self.release(c, length, now)

    # -- what run-time control shows ----------------------------------------------------------
    def class_stats(self, port: int, priority: int, now: float) -> dict:
        """PFC's figures of one (port, class): its ingress buffer's and its egress queue's."""
        c = self.classes.get((port, priority))
        if c is None:
            return {"lossless": None}
        return {"lossless": asdict(c.config) if c.config is not None else None,
                "buffer_bytes": c.used, "buffer_frames": c.frames, "buffer_peak": c.peak, "pausing": c.pausing,
                "pause_sent": c.pause_sent, "xon_sent": c.xon_sent, "lossless_drops": c.lossless_drops,
                "pausing_us": round(c.pausing_us + (now - c.pausing_since if c.pausing else 0.0), 3),
                "at_xoff_bytes": c.at_xoff[0], "at_xoff_frames": c.at_xoff[1],
                "pause_received": c.pause_received, "xon_received": c.xon_received, "storm": c.storm,
                "storms": c.storms, "restores": c.restores,
                "detected_after_us": None if c.detected_after_us is None else round(c.detected_after_us, 3)}
