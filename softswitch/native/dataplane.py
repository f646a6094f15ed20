"""The native data plane (dataplane.c) seen from Python: the control side of a switch whose
packets never enter the interpreter.

``NativeDataplane`` loads a program's shared library (build.py), hands it the ports' sockets
(ports.py opens them), opens an AF_XDP socket on each port's interface where its ``port_io``
mode asks for one (native/xsk.py says which and why not; xsk.c), starts its loop thread and
offers what softswitch.dataplane.Dataplane offers the control plane: ``lock`` (the loop's batch mutex: a write batch under it is seen
whole), queue depth and pace (packets or bits per second), the replication engine
(runtime/pre.py stays the reference that answers reads; every change is mirrored into the
library), counters with errors by name, packet-out, and packet-in frames handed to
``on_packet_in`` from a thread of its own; the traffic classes' settings and the lossless classes
(queues.QueueSettings and pfc.LosslessSettings keep them and say what they mean: the library is
given each class's effective settings) with their counters (``class_stats``, in the Python data
plane's shape).
"""
from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import select
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..dataplane import DEFAULT_DROP_PORT, MAX_FRAME, Counters, check_packet_out
from ..ports import Port
from ..pfc import MALFORMED, LosslessSettings
from ..queues import DEFAULT_BITRATE, DEFAULT_DEPTH, DEFAULT_RATE, RECENT, QueueSettings, check_priority_queues
from ..runtime.pre import ReplicationEngine
from . import xsk

log = logging.getLogger("softswitch.native")

SS_NO_PORT = -1
STATUS_COUNT = 6            # abi.h SS_STATUS_COUNT


class NativeError(Exception):
    """The native data plane cannot be had; the message says why."""


class _Counters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("rx", "tx", "dropped", "queue_drops", "errors", "packet_in", "packet_out", "packet_in_lost")] + \
               [(name, ctypes.c_uint64) for name in ("lossless_drops", "watchdog_drops", "mac_control")] + \
               [("by_status", ctypes.c_uint64 * STATUS_COUNT)]


class _PortCounters(ctypes.Structure):
    _fields_ = [("rx", ctypes.c_uint64), ("tx", ctypes.c_uint64), ("tx_errors", ctypes.c_uint64)]


class _ClassInfo(ctypes.Structure):
    """abi.h ss_class_info."""
    _fields_ = [(n, ctypes.c_uint64) for n in ("bitrate", "link_bitrate", "drops", "tx_packets", "tx_bytes",
                                               "watchdog_drops")] + \
               [(n, ctypes.c_double) for n in ("last_departure", "next_free", "paused_us")] + \
               [(n, ctypes.c_uint32) for n in ("depth", "rate_pps", "weight", "length")] + \
               [(n, ctypes.c_int32) for n in ("made", "paused", "dropping", "pfc", "lossless", "pausing", "storm",
                                              "recent_n")] + \
               [(n, ctypes.c_uint32) for n in ("xoff", "xon", "headroom", "quanta")] + \
               [(n, ctypes.c_uint64) for n in ("buffer_bytes", "buffer_frames", "buffer_peak", "pause_sent", "xon_sent",
                                               "lossless_drops", "at_xoff_bytes", "at_xoff_frames", "pause_received",
                                               "xon_received", "storms", "restores")] + \
               [("pausing_us", ctypes.c_double), ("detected_after_us", ctypes.c_double),
                ("recent_at", ctypes.c_double * RECENT), ("recent_len", ctypes.c_uint32 * RECENT)]


@dataclass(frozen=True)
class QueueInfo:
    """One native queue as softswitch-ctl's get_queue shows an EgressQueue (its departure times
    too: the last packet's, and when it may send next, its pace and its port's link free, in us
    since the start; ``recent``: its last departures, (time, bytes), oldest first)."""
    port: int
    priority: int
    depth: int
    rate_pps: int
    bitrate: int
    length: int
    drops: int
    last_departure: float
    next_free: float
    weight: int = 0
    recent: tuple = ()

    def __len__(self) -> int:
        return self.length


def load_library(path: Path | str) -> ctypes.CDLL:
    """The library at ``path`` with the data plane's control functions typed."""
    return declare(ctypes.CDLL(str(path)))


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """``lib`` with the data plane's control functions typed (ctypes' default, an int result,
    would cut a pointer in two)."""
    P, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
    u32p = ctypes.POINTER(ctypes.c_uint32)
    sigs = {
        "ss_dp_new": (P, [i32, i32, i32, u32, u32, u64]),
        "ss_dp_add_port": (i32, [P, i32, i32]),
        "ss_dp_objects": (P, [P]),
        "ss_dp_start": (i32, [P]),
        "ss_dp_stop": (None, [P]),
        "ss_dp_free": (None, [P]),
        "ss_dp_lock": (None, [P]),
        "ss_dp_unlock": (None, [P]),
        "ss_dp_set_class": (None, [P, i32, i32, u32, u32, u64, u32]),
        "ss_dp_set_link": (None, [P, i32, u64]),
        "ss_dp_queue_length": (u32, [P, i32, i32]),
        "ss_dp_class_info": (i32, [P, i32, i32, ctypes.POINTER(_ClassInfo)]),
        "ss_dp_set_port_mac": (None, [P, i32, ctypes.c_char_p]),
        "ss_dp_set_lossless": (None, [P, i32, i32, u32, u32, u32, u32]),
        "ss_dp_set_pfc_watchdog": (None, [P, u64, u64, u64, i32]),
        "ss_dp_pfc_malformed": (i32, [P, i32, ctypes.POINTER(ctypes.c_uint64)]),
        "ss_dp_set_group": (i32, [P, u32, u32, u32p, u32p]),
        "ss_dp_delete_group": (None, [P, u32]),
        "ss_dp_set_session": (i32, [P, u32, u32, u32p, u32p, u32]),
        "ss_dp_delete_session": (None, [P, u32]),
        "ss_dp_clear_replication": (None, [P]),
        "ss_dp_counters": (None, [P, ctypes.POINTER(_Counters)]),
        "ss_dp_port_counters": (i32, [P, i32, ctypes.POINTER(_PortCounters)]),
        "ss_dp_packet_out": (i32, [P, ctypes.c_char_p, u32]),
        "ss_dp_packet_in_fd": (i32, [P]),
        "ss_dp_packet_in": (i32, [P, ctypes.c_char_p, u32]),
        "ss_now_us": (ctypes.c_uint64, [P]),
        "ss_status_name": (ctypes.c_char_p, [i32]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    xsk.declare(lib)
    return lib


class BatchLock:
    """The loop's mutex as a re-entrant lock (what Dataplane.lock is): the first acquire of a
    thread takes the C mutex (ctypes lets go of the GIL while it waits), the last release
    gives it back."""

    def __init__(self, lib: ctypes.CDLL, handle: int):
        self._lib, self._handle = lib, handle
        self._rlock = threading.RLock()
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._rlock.acquire(blocking, timeout):
            return False
        if self._depth == 0:
            self._lib.ss_dp_lock(self._handle)
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._lib.ss_dp_unlock(self._handle)
        self._rlock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


class NativeDataplane(QueueSettings, LosslessSettings):
    def __init__(self, library: Path | str | ctypes.CDLL, ports: dict[int, Port], cpu_port: int | None = None,
                 drop_port: int = DEFAULT_DROP_PORT, queue_depth: int = DEFAULT_DEPTH,
                 queue_rate: int = DEFAULT_RATE, priority_queues: int = 1, queue_bitrate: int = DEFAULT_BITRATE,
                 port_io: str = xsk.DEFAULT_MODE):
        check_priority_queues(priority_queues)
        self._init_queue_settings(queue_depth, queue_rate, queue_bitrate)    # carried to a successor
        self._init_lossless()
        self.lib = declare(library) if isinstance(library, ctypes.CDLL) else load_library(library)
        self.ports = ports
        self.port_io_mode = xsk.check_mode(port_io)
        self.port_io: dict[int, xsk.PortIO] = {}      # how each port's frames go, once started
        self.cpu_port = cpu_port
        self.drop_port = drop_port
        self.priority_queues = priority_queues
        self.program = None                     # the Python Program this library was made from
        self.handle = self.lib.ss_dp_new(SS_NO_PORT if cpu_port is None else cpu_port, drop_port,
                                         priority_queues, queue_depth, queue_rate, queue_bitrate)
        if not self.handle:
            raise NativeError("the native data plane could not be made (out of memory or descriptors)")
        for number, port in ports.items():
            if self.lib.ss_dp_add_port(self.handle, number, port.fileno()) != 0:
                self.lib.ss_dp_free(self.handle)
                raise NativeError(f"port {number}: its socket cannot be watched")
            self.lib.ss_dp_set_port_mac(self.handle, number, getattr(port, "mac", bytes(6)))
        self.lock = BatchLock(self.lib, self.handle)
        self.objects = self.lib.ss_dp_objects(self.handle)     # the program's run-time objects
        self.mirror = None      # objects.NativeObjects writing the Python objects' changes into them
        self.on_packet_in: Callable[[bytes], None] | None = None
        self._pre = ReplicationEngine()
        self._pre.on_change = self._mirror
        self._status_names = [self.lib.ss_status_name(i).decode() for i in range(STATUS_COUNT)]
        self._stopping = threading.Event()
        self._packet_in_thread: threading.Thread | None = None
        self._started = False

    # -- replication: the Python engine answers reads, the library has a copy ------------
    @property
    def pre(self) -> ReplicationEngine:
        return self._pre

    @pre.setter
    def pre(self, engine: ReplicationEngine) -> None:
        """A new engine (a pipeline committed): the library's copy becomes it, whole."""
        with self.lock:
            self._pre.on_change = None
            self._pre = engine
            engine.on_change = self._mirror
            self.lib.ss_dp_clear_replication(self.handle)
            for gid in engine.groups:
                self._mirror("group", gid)
            for sid in engine.sessions:
                self._mirror("session", sid)

    def _mirror(self, kind: str, ident: int | None) -> None:
        """One group's or session's copies into the library as the Python engine has them
        now (``ident`` None: everything went)."""
        with self.lock:
            if ident is None:
                self.lib.ss_dp_clear_replication(self.handle)
                return
            pre = self._pre
            if kind == "group":
                g = pre.groups.get(ident)
                if g is None:
                    self.lib.ss_dp_delete_group(self.handle, ident)
                    return
                ports, rids, truncate = *_arrays(g.replicas()), 0
            else:
                s = pre.sessions.get(ident)
                if s is None:
                    self.lib.ss_dp_delete_session(self.handle, ident)
                    return
                ports, rids, truncate = *_arrays(s.group.replicas()), s.packet_length_bytes
            n = len(ports)
            rc = (self.lib.ss_dp_set_group(self.handle, ident, n, ports, rids) if kind == "group" else
                  self.lib.ss_dp_set_session(self.handle, ident, n, ports, rids, truncate))
            if rc != 0:
                raise NativeError(f"{kind} {ident}: the native data plane refused its {n} copies")

    # -- queues and classes -------------------------------------------------------------
    def _apply_queue_setting(self, port: int | None, priority: int | None) -> None:
        """The effective settings of the classes concerned, and of their links, into the library
        (port None: the defaults for every port number first, then the ports with settings of
        their own)."""
        lib, h = self.lib, self.handle
        if port is None:
            d = self._defaults
            lib.ss_dp_set_class(h, SS_NO_PORT, -1, d["depth"], d["rate"], 0, d["weight"])
            lib.ss_dp_set_link(h, SS_NO_PORT, d["bitrate"])
        ports = [port] if port is not None else sorted({*self._port_settings, *(p for p, _ in self._class_settings)})
        for p in ports:
            for prio in ([priority] if priority is not None else range(self.priority_queues)):
                s = self.class_settings(p, prio)
                lib.ss_dp_set_class(h, p, prio, s["depth"], s["rate"], s["bitrate"], s["weight"])
            if priority is None:
                lib.ss_dp_set_link(h, p, self.link_bitrate(p))

    def _class_info(self, port: int, priority: int) -> _ClassInfo:
        info = _ClassInfo()
        if self.lib.ss_dp_class_info(self.handle, port, priority, ctypes.byref(info)) != 0:
            raise ValueError(f"port {port} priority {priority}: no such queue")
        return info

    def port_queues(self, port: int) -> list[QueueInfo]:
        """The port's queues so far (priority 0's at least), highest priority first."""
        out = []
        with self.lock:
            for prio in reversed(range(self.priority_queues)):
                i = self._class_info(port, prio)
                if i.made or prio == 0:
                    recent = tuple((i.recent_at[k], i.recent_len[k]) for k in range(i.recent_n))
                    out.append(QueueInfo(port, prio, i.depth, i.rate_pps, i.bitrate or i.link_bitrate, i.length,
                                         i.drops, i.last_departure, i.next_free, i.weight, recent))
        return out

    def queue_length(self, port: int, priority: int = 0) -> int:
        with self.lock:
            return self.lib.ss_dp_queue_length(self.handle, port, priority)

    def class_stats(self, port: int) -> list[dict]:
        """Every class of ``port``: its queue's settings and counters and PFC's figures, highest
        priority first (softswitch.dataplane.Dataplane.class_stats' shape)."""
        with self.lock:
            infos = [(prio, self._class_info(port, prio)) for prio in reversed(range(self.priority_queues))]
        out = []
        for prio, i in infos:
            row = {"priority": prio, "depth": i.depth, "rate_pps": i.rate_pps, "bitrate": i.bitrate,
                   "weight": i.weight, "occupancy": i.length, "tx_packets": i.tx_packets, "tx_bytes": i.tx_bytes,
                   "drops": i.drops, "watchdog_drops": i.watchdog_drops, "paused": bool(i.paused),
                   "paused_us": round(i.paused_us, 3)}
            lossless = self.lossless(port, prio)
            row["lossless"] = dataclasses.asdict(lossless) if i.lossless and lossless is not None else None
            if i.pfc:
                row.update(buffer_bytes=i.buffer_bytes, buffer_frames=i.buffer_frames, buffer_peak=i.buffer_peak,
                           pausing=bool(i.pausing), pause_sent=i.pause_sent, xon_sent=i.xon_sent,
                           lossless_drops=i.lossless_drops, pausing_us=round(i.pausing_us, 3),
                           at_xoff_bytes=i.at_xoff_bytes, at_xoff_frames=i.at_xoff_frames,
                           pause_received=i.pause_received, xon_received=i.xon_received, storm=bool(i.storm),
                           storms=i.storms, restores=i.restores,
                           detected_after_us=None if i.detected_after_us < 0 else round(i.detected_after_us, 3))
            out.append(row)
        return out

    def mac_control_malformed(self, port: int) -> dict[str, int]:
        """MAC control frames that came in on ``port`` malformed, by reason (pfc.MALFORMED)."""
        counts = (ctypes.c_uint64 * len(MALFORMED))()
        with self.lock:
            self.lib.ss_dp_pfc_malformed(self.handle, port, counts)
        return {reason: n for reason, n in zip(MALFORMED, counts) if n}

    # -- lossless classes -----------------------------------------------------------------
    def _apply_lossless(self, port: int, priority: int) -> None:
        c = self.lossless(port, priority)
        self.lib.ss_dp_set_lossless(self.handle, port, priority, *((c.xoff, c.xon, c.headroom, c.quanta) if c
                                                                   else (0, 0, 0, 0)))

    def _apply_watchdog(self) -> None:
        w = self.pfc_watchdog
        self.lib.ss_dp_set_pfc_watchdog(self.handle, w.detect_us, w.restore_us, w.poll_us, int(w.action == "drop"))

    # -- counters ------------------------------------------------------------------------
    @property
    def counters(self) -> Counters:
        """A snapshot, in the Python data plane's shape; errors by their status's name."""
        c = _Counters()
        self.lib.ss_dp_counters(self.handle, ctypes.byref(c))
        kinds = {self._status_names[i]: n for i, n in enumerate(c.by_status) if n}
        return Counters(rx=c.rx, tx=c.tx, dropped=c.dropped, queue_drops=c.queue_drops, errors=c.errors,
                        error_kinds=kinds, packet_in=c.packet_in, packet_out=c.packet_out,
                        packet_in_lost=c.packet_in_lost, lossless_drops=c.lossless_drops,
                        watchdog_drops=c.watchdog_drops, mac_control=c.mac_control)

    def port_counters(self, port: int) -> tuple[int, int, int]:
        """(rx, tx, tx_errors) of one port."""
        c = _PortCounters()
        if self.lib.ss_dp_port_counters(self.handle, port, ctypes.byref(c)) != 0:
            raise ValueError(f"port {port} is outside 0..511")
        return c.rx, c.tx, c.tx_errors

    @property
    def batched_io(self) -> bool:
        return True          # recvmmsg/sendmmsg, or AF_XDP's rings

    def port_io_status(self) -> dict[int, xsk.PortIO]:
        """How each port's frames go now (an AF_XDP port whose interface was removed says so).
        Under the batch lock: the loop closes such a port's socket while it holds it."""
        with self.lock:
            return xsk.port_states(self.lib, self.handle, self.port_io) if self.handle else dict(self.port_io)

    def kernel_drops(self, port: int) -> int:
        """Frames the kernel dropped before the port's AF_XDP socket took them (0 on AF_PACKET)."""
        with self.lock:
            return xsk.kernel_drops(self.lib, self.handle, port) if self.handle else 0

    def set_program(self, program) -> None:
        """The Python Program the library was made from (its objects answer P4Runtime reads)."""
        self.program = program

    def now_us(self) -> int:
        return self.lib.ss_now_us(self.handle)

    # -- the CPU port --------------------------------------------------------------------
    def inject_packet_out(self, frame: bytes) -> None:
        """A packet from the controller: it enters ingress on the CPU port; ValueError naming why
        when the data plane refuses it (the stream it came on answers that and goes on)."""
        check_packet_out(frame)
        if self.lib.ss_dp_packet_out(self.handle, frame, len(frame)) != 0:
            raise ValueError(f"packet-out of {len(frame)} bytes refused: the switch has no CPU port")

    def _deliver_packet_ins(self) -> None:
        fd = self.lib.ss_dp_packet_in_fd(self.handle)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        buf = ctypes.create_string_buffer(MAX_FRAME)
        while not self._stopping.is_set():
            # no timeout: an idle switch costs no wake-ups (a group serves dozens); `stop` wakes it
            if not poller.poll():
                continue
            while (n := self.lib.ss_dp_packet_in(self.handle, buf, MAX_FRAME)) > 0:
                cb = self.on_packet_in
                if cb is not None:
                    try:
                        cb(buf.raw[:n])
                    except Exception:      # whatever the controller side does, delivery goes on
                        log.exception("packet-in handler failed")

    # -- life ----------------------------------------------------------------------------
    def start(self) -> None:
        """The ports' AF_XDP sockets opened (as port_io asks: PortIOUnavailable in af_xdp mode
        naming a port that cannot have one), then the loop's thread."""
        self.port_io = xsk.open_ports(self.lib, self.handle, self.ports, self.port_io_mode)
        err = self.lib.ss_dp_start(self.handle)
        if err:
            raise NativeError(f"the native loop's thread did not start: {os.strerror(err)}")
        self._started = True
        self._packet_in_thread = threading.Thread(target=self._deliver_packet_ins, name="native-packet-in",
                                                  daemon=True)
        self._packet_in_thread.start()

    def stop(self) -> None:
        """Stops the loop and frees the library's state: the AF_XDP sockets closed and their XDP
        programs detached (the ports' AF_PACKET sockets stay the caller's)."""
        if self.handle is None:
            return
        self._stopping.set()
        if self._packet_in_thread is not None:     # its poll wakes on the packet-in eventfd
            os.write(self.lib.ss_dp_packet_in_fd(self.handle), (1).to_bytes(8, sys.byteorder))
        self.lib.ss_dp_stop(self.handle)
        if self._packet_in_thread is not None:
            self._packet_in_thread.join(timeout=2)
        if self.mirror is not None:        # the Python objects take the native state back
            self.mirror.detach()
            self.mirror = None
        self.lib.ss_dp_free(self.handle)
        self.handle = None


def _arrays(replicas: list[tuple[int, int]]):
    n = len(replicas)
    return (ctypes.c_uint32 * n)(*(p for p, _ in replicas)), (ctypes.c_uint32 * n)(*(r for _, r in replicas))
