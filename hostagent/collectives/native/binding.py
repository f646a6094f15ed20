"""The native engine's binding: its library built and loaded (softswitch's LibraryBuilder: cached
per source digest and compiler, loaded once per process) and NativeTransport, ReliableTransport's
methods and errors over it. ctypes lets the GIL go for every call into the engine, so a caller
blocked in send or recv leaves the other Python threads running; the engine's thread never
touches Python at all.

Copies: send hands the engine the caller's buffer (bytes, or a numpy array's own memory), which
copies each packet once into its window (kept for resends); recv copies the reassembled message
once into the bytes it returns.
"""
from __future__ import annotations

import ctypes
import socket
import struct
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np

from hostagent.collectives.reliable import (PAYLOAD, Aborted, CallTimeout, CollectiveError, PeerSilent,
                                            ReliableTransport, TransportConfig)
from hostagent.collectives.rocev2 import ECT0
from hostagent.collectives.transport import TransferStats, bound_socket, byte_view
from hostagent.traffic.flows import ROCEV2_PORT
from softswitch import build_cache
from softswitch.native.build import BuildError, LibraryBuilder

__all__ = ["BuildError", "NativeTransport", "library"]

HERE = Path(__file__).resolve().parent
VERSION = 2                             # hostpath.h's HP_VERSION
CACHE_ENV = "AIFABRIC_HOST_PATH_CACHE"
OK, ABORTED, SILENT, LATE_SILENT, LATE_ALIVE, CLOSED = range(6)    # enum hp_status


class Config(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int32), ("world", ctypes.c_int32), ("group", ctypes.c_uint32),
                ("window", ctypes.c_int32), ("rto_s", ctypes.c_double), ("silent_after_s", ctypes.c_double),
                ("drop_outgoing", ctypes.c_double), ("drop_seed", ctypes.c_uint64), ("rocev2", ctypes.c_int32),
                ("bind_ip", ctypes.c_uint32), ("rate_port", ctypes.c_int32)]


STAT_FIELDS = ("packets_sent", "bytes_sent", "packets_received", "bytes_received", "retransmissions", "duplicates",
               "stale", "dropped_on_purpose", "send_errors", "out_of_reach", "wakeups", "loops", "rocev2_malformed",
               "rocev2_unknown_group", "rocev2_rate_messages", "rocev2_inbox_dropped")


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in STAT_FIELDS] + [("rocev2_paced_s", ctypes.c_double)]


class Failure(ctypes.Structure):
    _fields_ = [("peer", ctypes.c_int32), ("never_heard", ctypes.c_int32), ("waited_s", ctypes.c_double),
                ("reason_len", ctypes.c_uint32), ("reason", ctypes.c_char * PAYLOAD)]


class Message(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_uint64)]


_SIGNATURES = {
    "hp_version": (ctypes.c_int, []),
    "hp_open": (ctypes.c_void_p, [ctypes.POINTER(Config), ctypes.c_int, ctypes.POINTER(ctypes.c_uint32),
                                  ctypes.POINTER(ctypes.c_uint16), ctypes.c_char_p, ctypes.c_uint32]),
    "hp_send": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                               ctypes.c_double, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                               ctypes.POINTER(Failure)]),
    "hp_recv": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64, ctypes.c_double,
                               ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.POINTER(Failure),
                               ctypes.POINTER(ctypes.POINTER(Message))]),
    "hp_message_free": (None, [ctypes.POINTER(Message)]),
    "hp_flush": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_double, ctypes.POINTER(Failure)]),
    "hp_abort": (None, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint32]),
    "hp_abort_at": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64),
                                   ctypes.POINTER(ctypes.c_int32), ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32)]),
    "hp_stats": (None, [ctypes.c_void_p, ctypes.POINTER(Stats)]),
    "hp_close": (None, [ctypes.c_void_p]),
    "hp_free": (None, [ctypes.c_void_p]),
}


def builder() -> LibraryBuilder:
    sources = ("hostpath.c", "messages.c", "calls.c", "engine.c", "rocev2.c")
    return LibraryBuilder("aifabric_hostpath_", tuple(HERE / f for f in sources),
                          tuple(HERE / f for f in ("hostpath.h", "engine.h", "rocev2.h")), HERE,
                          build_cache.default_cache_dir("hostpath", CACHE_ENV))


def library() -> tuple[ctypes.CDLL, str]:
    """The engine's library (built unless cached) and a line saying where it came from;
    BuildError says why it cannot be had."""
    b = builder()
    lib = b.load()
    if not hasattr(lib, "_hostpath_ready"):
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        if lib.hp_version() != VERSION:
            raise BuildError(f"{b.path()} is engine version {lib.hp_version()}, this binding wants {VERSION}")
        lib._hostpath_ready = True
    return lib, f"{b.cc} built {b.path().name} in {b.cache_dir}"


def _ipv4(host: str) -> int:
    """An IPv4 address as the engine keeps it: its four bytes in network order."""
    return struct.unpack("=I", socket.inet_aton(socket.gethostbyname(host)))[0]


class NativeTransport(ReliableTransport):
    """ReliableTransport on the native engine ``library`` (host_path.open_transport makes it when
    the host path is native): the same methods, attributes and errors."""

    def __init__(self, rank: int, peers: list[tuple[str, int]], group: int = 0,
                 config: TransportConfig = TransportConfig(), *, library: ctypes.CDLL) -> None:
        if not 0.0 <= config.drop_outgoing < 1.0:
            raise ValueError(f"drop_outgoing {config.drop_outgoing} is outside [0, 1)")
        self._settings(rank, peers, group, config)
        self.endpoint = None            # no Python endpoint: the engine owns the socket
        lib = self._lib = library
        sock = bound_socket(self.peers[rank])
        if config.rocev2:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)     # switches mark instead of dropping
        elif config.dscp:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, config.dscp << 2)    # its traffic class
        self.address: tuple[str, int] = sock.getsockname()
        ips = (ctypes.c_uint32 * len(peers))(*(_ipv4(ip) for ip, _ in self.peers))
        ports = (ctypes.c_uint16 * len(peers))(*(socket.htons(ROCEV2_PORT if config.rocev2 else port)
                                                 for _, port in self.peers))
        c = Config(rank, len(peers), group, config.window, config.rto_s, config.silent_after_s,
                   config.drop_outgoing, config.drop_seed, config.rocev2, _ipv4(self.peers[rank][0]),
                   config.rate_control_port)
        error = ctypes.create_string_buffer(256)
        fd = sock.detach()
        self._engine = lib.hp_open(ctypes.byref(c), fd, ips, ports, error, len(error))
        if not self._engine:
            socket.close(fd)
            raise OSError(f"native host path for rank {rank}: {error.value.decode()}")
        self._free = weakref.finalize(self, lib.hp_free, self._engine)

    # --- the caller's side --------------------------------------------------------------------

    def send(self, dst: int, tag: int, payload, deadline: float, watch: Sequence[int] = ()) -> None:
        self._peer(dst)
        view = np.frombuffer(byte_view(payload), np.uint8)
        failure = Failure()
        status = self._lib.hp_send(self._engine, dst, tag, view.ctypes.data, view.nbytes, deadline, *_ranks(watch),
                                   ctypes.byref(failure))
        if status != OK:
            raise self._error(status, failure, "acknowledgement")

    def recv(self, src: int, tag: int, deadline: float, watch: Sequence[int] = ()) -> bytes:
        self._peer(src)
        failure, message = Failure(), ctypes.POINTER(Message)()
        status = self._lib.hp_recv(self._engine, src, tag, deadline, *_ranks(watch), ctypes.byref(failure),
                                   ctypes.byref(message))
        if status != OK:
            raise self._error(status, failure, f"message (tag {tag:#x})")
        try:
            return ctypes.string_at(message.contents.data, message.contents.len) if message.contents.len else b""
        finally:
            self._lib.hp_message_free(message)

    def flush(self, deadline: float) -> None:
        failure = Failure()
        status = self._lib.hp_flush(self._engine, deadline, ctypes.byref(failure))
        if status != OK:
            raise self._error(status, failure, "acknowledgement")

    def abort(self, call: int, reason: str) -> None:
        body = reason.encode()[:PAYLOAD]
        self._lib.hp_abort(self._engine, call, body, len(body))

    def close(self) -> None:
        self._lib.hp_close(self._engine)    # memory stays until the object goes: stats still read

    @property
    def aborts(self) -> dict[int, tuple[int, str]]:
        """call number -> (rank, reason), as reliable.ReliableTransport.aborts."""
        out, i = {}, 0
        call, by, length, reason = ctypes.c_uint64(), ctypes.c_int32(), ctypes.c_uint32(), ctypes.create_string_buffer(PAYLOAD)
        while self._lib.hp_abort_at(self._engine, i, ctypes.byref(call), ctypes.byref(by), reason, ctypes.byref(length)):
            out[call.value] = (by.value, reason.raw[:length.value].decode(errors="replace"))
            i += 1
        return out

    # --- counters -----------------------------------------------------------------------------

    def _counters(self) -> Stats:
        s = Stats()
        self._lib.hp_stats(self._engine, ctypes.byref(s))
        return s

    @property
    def stats(self) -> TransferStats:
        s = self._counters()
        return TransferStats(**{f: getattr(s, f) for f in TransferStats.__dataclass_fields__ if f != "elapsed_s"})

    @property
    def send_errors(self) -> int:
        return self._counters().send_errors

    def host_path_stats(self) -> dict[str, float | str]:
        """The path and why, the engine's own counters, and with rocev2 RoceEndpoint.counters()'s."""
        s = self._counters()
        out = {"host_path": self.host_path, "host_path_reason": self.host_path_reason, "native_out_of_reach": s.out_of_reach, "native_wakeups": s.wakeups,
               "native_loops": s.loops}
        if self.config.rocev2:
            out.update(rocev2_paced_s=round(s.rocev2_paced_s, 6), rocev2_rate_messages=s.rocev2_rate_messages,
                       rocev2_malformed=s.rocev2_malformed, rocev2_unknown_group=s.rocev2_unknown_group,
                       native_inbox_dropped=s.rocev2_inbox_dropped)
        return out

    # --- helpers ------------------------------------------------------------------------------

    def _peer(self, r: int) -> None:
        if not 0 <= r < len(self.peers):
            raise IndexError(f"rank {r} is not in this group of {len(self.peers)}")

    def _error(self, status: int, f: Failure, what: str) -> CollectiveError:
        if status == ABORTED:
            reason = ctypes.string_at(ctypes.addressof(f) + Failure.reason.offset, f.reason_len)
            return Aborted(f.peer, reason.decode(errors="replace"))
        if status == SILENT:
            return PeerSilent(f.peer, "packet", f.waited_s)
        if status == LATE_SILENT:
            return PeerSilent(f.peer, what, float("inf") if f.never_heard else f.waited_s)
        if status == LATE_ALIVE:
            return CallTimeout(f.peer, what)
        return CollectiveError(f"rank {self.rank}'s transport is closed")


def _ranks(ranks: Sequence[int]) -> tuple[ctypes.Array, int]:
    return (ctypes.c_int32 * len(ranks))(*ranks), len(ranks)
