"""The packet loop: simple_switch's ingress, replication, queueing and egress in one thread.

One thread waits on the port sockets (epoll), runs each received packet through the parser
and the ingress pipeline, hands copies to the replication engine and puts them in per-port,
per-class egress queues (queues.py); the same loop takes packets off the queues when their port
serves them (classes.py: each port's link, strict priority or weighted round robin), runs
egress, deparses and sends them. A MAC control frame that comes in never reaches the pipeline:
802.1Qbb PFC takes it (pfc.py), which also counts the lossless classes' buffers and sends their
PAUSE frames. The steps a packet takes are the program's
packet path (packet_path.py, specialised when the program is set); copies, resubmission and
recirculation are here. Frames are read from a port and sent to one a batch at a time
(port_io.py: one system call per batch where the compiled path runs). The order of steps, the
instance types and the metadata a copy keeps follow BMv2's targets/simple_switch/simple_switch.cpp.

Control-plane writes and program swaps take ``lock``; the loop holds it while it processes a
burst, so a packet sees a write batch either whole or not at all.
"""
from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from . import packet_path, port_io
from .copies import Copies
from .packet_path import PacketPath
from .pipeline.helpers import Abort
from .pipeline.compiled import loaded_support
from .pipeline.program import Program
from .classes import PortLink
from .pfc import Lossless, LosslessSettings, Pfc, Watchdog
from .ports import Port
from .queues import DEFAULT_BITRATE, DEFAULT_DEPTH, DEFAULT_RATE, EgressQueue, QueueSettings, check_priority_queues
from .runtime.pre import ReplicationEngine

log = logging.getLogger("softswitch.dataplane")

DEFAULT_DROP_PORT = 511
RX_BURST = 128                 # packets read from one port before looking at the others (whole batches)
INTERNAL_QUEUE_CAPACITY = 1024  # resubmit/recirculate queue, as simple_switch's
MAX_FRAME = 16384               # the largest frame a packet path takes (native/abi.h SS_MAX_FRAME)
MAX_TIMEOUT_S = 0.5
DRAIN_ROUNDS = 64              # rounds of egress + resubmit/recirculate per loop iteration
# Frames held before they are sent back to back (transmit): at most this many packets'
# processing (~0.5 ms at saturation) between a frame's egress and its send; a frame of a
# loop turn with fewer packets goes out at the end of the turn.
TX_BATCH = 32
DRAIN_LIMIT = 10000            # turns `run_through` gives a frame before it calls the program a loop


@dataclass
class Counters:
    rx: int = 0
    tx: int = 0
    dropped: int = 0            # by the program (mark_to_drop, unrouted)
    queue_drops: int = 0        # egress queue full
    errors: int = 0             # packets that made the program fail (logged)
    # the same packets by the name of what was raised (ZeroDivisionError, Abort, ...): a test
    # or an operator sees what failed without the log. Replaced, never changed in place: the
    # run-time control thread reads it while the packet loop counts.
    error_kinds: dict[str, int] = field(default_factory=dict)
    packet_in: int = 0
    packet_out: int = 0
    packet_in_lost: int = 0     # packet-ins the native data plane's ring had no room for
    lossless_drops: int = 0     # packets of a lossless class dropped (pfc.py: headroom or queue too small)
    watchdog_drops: int = 0     # packets the PFC watchdog dropped (pfc.py)
    mac_control: int = 0        # MAC control frames that came in (PFC's and malformed ones): never the pipeline's


def check_packet_out(frame: bytes) -> None:
    """ValueError when a packet-out is larger than any frame the packet paths take."""
    if len(frame) > MAX_FRAME:
        raise ValueError(f"packet-out of {len(frame)} bytes is over the {MAX_FRAME} bytes a frame may have")


class Dataplane(QueueSettings, LosslessSettings, Copies):
    def __init__(self, ports: dict[int, Port], cpu_port: int | None = None,
                 drop_port: int = DEFAULT_DROP_PORT, queue_depth: int = DEFAULT_DEPTH,
                 queue_rate: int = DEFAULT_RATE, priority_queues: int = 1, queue_bitrate: int = DEFAULT_BITRATE):
        check_priority_queues(priority_queues)
        self._init_queue_settings(queue_depth, queue_rate, queue_bitrate)
        self._init_lossless()
        self.ports = ports
        self.cpu_port = cpu_port
        self.drop_port = drop_port
        self.program: Program | None = None
        self._path: PacketPath | None = None     # the program's packet path
        self.pre = ReplicationEngine()
        self.lock = threading.RLock()
        self.counters = Counters()
        self.priority_queues = priority_queues
        # (port, priority) -> queue, highest priority first; each port's link serves its own (classes.py)
        self.queues: dict[tuple[int, int], EgressQueue] = {}
        self.links: dict[int, PortLink] = {}
        self.queued = 0            # packets in all the queues (0: the loop has none to look for)
        self.on_packet_in: Callable[[bytes], None] | None = None
        self._internal: deque = deque()        # resubmitted and recirculated packets
        self._packet_outs: deque = deque()     # frames from the controller
        self._tx_waiting: list[tuple[int, bytes]] = []   # (port, frame) sent at the end of the loop's turn
        self._io = port_io.PortIO()            # port_io.py; its compiled twin with a compiled path
        self.pfc = Pfc(self, self.transmit, {n: p.mac for n, p in ports.items() if hasattr(p, "mac")})
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._stopping = False
        self.start_ns = time.monotonic_ns()
        self._thread: threading.Thread | None = None
        self._error_log_budget = 100

    # -- control -------------------------------------------------------------------------
    def set_program(self, program: Program | None) -> None:
        with self.lock:
            self.program = program
            self._use_path(program)
            now = self.now_us()
            for q in self.queues.values():
                for _, _, length, buf in q.clear():
                    if buf is not None:
                        self.pfc.release(buf, length, now)
            self.queued = 0
            self._internal.clear()

    def adopt_compiled(self, program: Program, functions: dict) -> bool:
        """Run ``program``'s compiled functions (fastpath.py) from the next packet on; False
        when another program has replaced it meanwhile."""
        with self.lock:
            if self.program is not program:
                return False
            program.use_compiled(functions)
            self._use_path(program)
            return True

    @property
    def batched_io(self) -> bool:
        """Frames read and sent a batch a system call (the compiled port I/O)."""
        return self._io.batched

    def _use_path(self, program: Program | None) -> None:
        """``program``'s packet path and the port I/O, both compiled with a compiled program
        (pipeline/compiled.py: packet_path.py itself, and port_io.pyx: frames in and out a batch
        a system call), else the Python ones (port_io.py: a frame a call)."""
        compiled = program is not None and program.compiled
        paths = (compiled and loaded_support("packet_path")) or packet_path
        self._path = paths.build_packet_path(self, program) if program is not None else None
        kind = ((compiled and loaded_support("port_io")) or port_io).PortIO
        if type(self._io) is not kind:
            self._io = kind()

    def queue(self, port: int, priority: int = 0) -> EgressQueue:
        q = self.queues.get((port, priority))
        if q is None:
            # made when first needed (a port whose packets all have one priority costs the loop
            # one queue), with its settings, in a new dict (another thread may be iterating the
            # old one), highest priority first
            with self.lock:
                link = self.links.get(port)
                if link is None:
                    link = PortLink(port, self.link_bitrate(port))
                    self.links = {**self.links, port: link}
                s = self.class_settings(port, priority)
                made = EgressQueue(port, s["depth"], s["rate"], priority, s["bitrate"], s["weight"], link=link)
                grown = {(port, priority): made, **self.queues}     # one made meanwhile stays
                if grown[(port, priority)] is made:
                    link.add(made)
                self.queues = dict(sorted(grown.items(), key=lambda kv: -kv[0][1]))
                q = self.queues[(port, priority)]
        return q

    def port_queues(self, port: int) -> list[EgressQueue]:
        """The queues ``port`` has so far (priority 0's at least), highest priority first."""
        self.queue(port)
        return [q for (p, _), q in self.queues.items() if p == port]

    def _apply_queue_setting(self, port: int | None, priority: int | None) -> None:
        """The effective settings into one class's queue, one port's queues and link, or (port
        None) every queue and link (QueueSettings remembers them for the queues made later)."""
        for (p, prio), q in list(self.queues.items()):
            if (port is None or p == port) and (priority is None or prio == priority):
                q.configure(self.class_settings(p, prio))
        if priority is None:
            for p, link in self.links.items():
                if port is None or p == port:
                    link.set_bitrate(self.link_bitrate(p))
        self._wake()           # the loop's wait may now be shorter

    def _apply_lossless(self, port: int, priority: int) -> None:
        self.pfc.configure(port, priority, self.lossless(port, priority), self.now_us())
        self._wake()

    def _apply_watchdog(self) -> None:
        self.pfc.set_watchdog(self.pfc_watchdog, self.now_us())
        self._wake()

    def class_stats(self, port: int) -> list[dict]:
        """Every class of ``port``: its queue's settings and counters and PFC's figures (the
        classes that have no queue yet: their settings), highest priority first."""
        now = self.now_us()
        out = []
        for prio in reversed(range(self.priority_queues)):
            q = self.queues.get((port, prio))
            s = self.class_settings(port, prio)
            row = {"priority": prio, "depth": s["depth"], "rate_pps": s["rate"], "bitrate": s["bitrate"],
                   "weight": s["weight"], "occupancy": 0, "tx_packets": 0, "tx_bytes": 0, "drops": 0,
                   "watchdog_drops": 0, "paused": False, "paused_us": 0.0}
            if q is not None:
                row.update(occupancy=len(q), tx_packets=q.tx_packets, tx_bytes=q.tx_bytes, drops=q.drops,
                           watchdog_drops=q.watchdog_drops, paused=q.paused(now),
                           paused_us=round(q.paused_total_us(now), 3))
            row.update(self.pfc.class_stats(port, prio, now))
            out.append(row)
        return out

    def mac_control_malformed(self, port: int) -> dict[str, int]:
        """MAC control frames that came in on ``port`` malformed, by reason (pfc.MALFORMED)."""
        return dict(self.pfc.malformed.get(port, {}))

    def port_counters(self, port: int) -> tuple[int, int, int]:
        """(rx, tx, tx_errors) of one of the switch's ports."""
        p = self.ports[port]
        return p.rx_packets, p.tx_packets, p.tx_errors

    def inject_packet_out(self, frame: bytes) -> None:
        """A packet from the controller: it enters ingress on the CPU port (ValueError naming why
        when it is refused: `check_packet_out`)."""
        check_packet_out(frame)
        self._packet_outs.append(frame)
        self._wake()

    def run_through(self, port: int, frames: list[bytes], limit: int = DRAIN_LIMIT) -> bool:
        """``frames`` in as if they arrived on ``port``, processed until nothing is left inside
        (copies, recirculations, queues); what leaves goes to ``transmit``. For a data plane
        driven from its owner's thread instead of its loop (the STF runner, offline switches).
        False when packets were still inside after ``limit`` turns (a program that loops)."""
        with self.lock:
            self._path.arrivals(port, frames)
            for _ in range(limit):
                if not (self.queued or self._internal):
                    return True
                self._run_internal()
                self._drain_queues()
            return not (self.queued or self._internal)

    def now_us(self) -> int:
        """Microseconds since the switch started, as BMv2's timestamps."""
        return (time.monotonic_ns() - self.start_ns) // 1000

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="dataplane", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> None:
        ep = select.epoll()
        by_fd = {}
        for port in self.ports.values():
            ep.register(port.fileno(), select.EPOLLIN)
            by_fd[port.fileno()] = port
        ep.register(self._wake_r, select.EPOLLIN)
        try:
            while not self._stopping:
                events = ep.poll(self._timeout())
                with self.lock:
                    for fd, _ in events:
                        if fd == self._wake_r:
                            self._drain_wakeups()
                        else:
                            self._receive_burst(by_fd[fd])
                    self._run_internal()
                    self._drain_queues()
                    self._send_waiting()
        finally:
            ep.close()

    def _timeout(self) -> float:
        if self._internal:
            return 0.0
        nxt = self.pfc.next_timer()
        for link in self.links.values():
            d = link.next_event()
            if d is not None and (nxt is None or d < nxt):
                nxt = d
        if nxt is None:
            return MAX_TIMEOUT_S
        return min(MAX_TIMEOUT_S, max(0.0, (nxt - self.now_us()) / 1e6))

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        while self._packet_outs:
            frame = self._packet_outs.popleft()
            self.counters.packet_out += 1
            if self.cpu_port is not None and self._path is not None:
                try:
                    self._path.arrival(self.cpu_port, frame)
                except Exception as e:
                    self._packet_failed(e)

    def _receive_burst(self, port: Port) -> None:
        path = self._path
        recv, fd, batch = self._io.recv, port.fileno(), self._io.batch
        received = 0
        while received < RX_BURST:
            frames = recv(fd)
            received += len(frames)
            if path is not None:
                path.arrivals(port.number, frames)
            if len(frames) < batch:       # the socket has no more
                break
        port.rx_packets += received
        self.counters.rx += received

    def _run_internal(self) -> None:
        path = self._path
        budget = INTERNAL_QUEUE_CAPACITY
        while self._internal and budget:
            budget -= 1
            F, frame = self._internal.popleft()
            try:
                path.ingress_state(F, frame)
            except Exception as e:
                self._packet_failed(e)

    def _drain_queues(self) -> None:
        path = self._path
        pfc = self.pfc
        now = self.now_us()
        if pfc.refreshing or pfc.watchdog.on:
            pfc.tick(now)
        if path is None or not (self.queued or self._internal):
            return
        egress, release = path.egress, pfc.release
        for _ in range(DRAIN_ROUNDS):   # bounded: a program that recirculates forever must not wedge the loop
            progress = False
            for link in self.links.values():   # queue() replaces the dict, never changes it: no copy
                # most ports are idle most of the time; the link says which class sends next
                if link.queued:
                    picked = link.pick(now)
                    if picked is not None:
                        progress = True
                        self.queued -= 1
                        q, departure = picked
                        _, F, length, buf = q.take(departure)
                        if buf is not None:
                            release(buf, length, now)
                        try:
                            egress(q, F)
                        except Exception as e:
                            self._packet_failed(e)
            if self._internal:
                self._run_internal()
                progress = True
            if not progress:
                return

    def mac_control(self, port: int, frame: bytes) -> None:
        """A MAC control frame that came in on ``port`` (never the pipeline's): PFC's (pfc.py)."""
        self.counters.mac_control += 1
        self.pfc.receive(port, frame, self.now_us())

    def _packet_failed(self, e: Exception) -> None:
        """One packet's processing failed: that packet is dropped, the switch goes on."""
        c = self.counters
        c.errors += 1
        kind = type(e).__name__
        c.error_kinds = {**c.error_kinds, kind: c.error_kinds.get(kind, 0) + 1}
        if isinstance(e, Abort):
            log.error("packet dropped: %s", e)
        elif self._error_log_budget > 0:   # a malformed packet must never stop the switch
            self._error_log_budget -= 1
            log.error("packet dropped: error while processing it", exc_info=e)

    def push_internal(self, F: list, frame: bytes) -> None:
        if len(self._internal) < INTERNAL_QUEUE_CAPACITY:
            self._internal.append((F, frame))
        else:
            self.counters.queue_drops += 1

    def bad_priority(self, priority: int) -> None:
        """A packet whose priority names a queue the ports do not have: dropped, as simple_switch."""
        self.counters.dropped += 1
        log.error("priority %d out of range (%d queues per port), dropping packet", priority, self.priority_queues)

    # -- out of the switch ---------------------------------------------------------------
    def transmit(self, port: int, frame: bytes) -> None:
        """``frame`` leaves by ``port`` with the loop turn's other frames, in order (at once
        when TX_BATCH are waiting)."""
        waiting = self._tx_waiting
        waiting.append((port, frame))
        if len(waiting) >= TX_BATCH:
            self._send_waiting()

    def _send_waiting(self) -> None:
        """Send the frames transmit() holds, back to back. A receiver that sleeps between
        frames (a host, the next switch) is woken once for a run of them rather than once per
        frame. On a virtual machine that wake-up (an inter-processor interrupt, charged to the
        sender) was the dearest part of a send: 16% of the switch's CPU time at saturation on the
        fabric program (perf, benchmarks/target_pps.py), 3.5% with frames sent back to back."""
        waiting, self._tx_waiting = self._tx_waiting, []
        ports, cpu_port, send_run = self.ports, self.cpu_port, self._io.send_run
        i, n, sent = 0, len(waiting), 0
        while i < n:          # a run of frames for one port at a time, in order
            port = waiting[i][0]
            p = ports.get(port)
            if p is None or port == cpu_port:
                self._send_elsewhere(port, waiting[i][1])
                i += 1
                continue
            i, ok, lost = send_run(p.fileno(), waiting, i)
            p.tx_packets += ok
            p.tx_errors += lost
            sent += ok + lost
        self.counters.tx += sent

    def _send_elsewhere(self, port: int, frame: bytes) -> None:
        """A frame for the CPU port (a packet-in), or for a port number with no interface behind
        it (lost, as on BMv2)."""
        if port == self.cpu_port:
            self.counters.packet_in += 1
            cb = self.on_packet_in
            if cb is not None:
                try:
                    cb(frame)
                except Exception as e:     # whatever the controller side does, the loop goes on
                    self._packet_failed(e)
            return
        self.counters.dropped += 1
