"""The UDP socket the worker, the ring and the parameter server share, with their counters and
an optional seeded send-loss knob (`drop_outgoing`) for tests and demos, and the retransmission
timeout their senders derive from measured round trips (RtoEstimator); `bound_socket` (the
socket alone, also the native host path's) and `byte_view` (a payload's bytes without a copy)."""

from __future__ import annotations

import random
import socket
import struct
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

SOCKET_BUFFER_BYTES = 4 << 20
MAX_DATAGRAM = 2048  # every packet of ours is smaller
SO_TIMESTAMPNS = 35  # Linux (asm-generic/socket.h); Python's socket module does not name it
TIMESPEC = struct.Struct("qq")


@dataclass
class TransferStats:
    packets_sent: int = 0  # handed to the socket or dropped by the knob
    bytes_sent: int = 0
    packets_received: int = 0
    bytes_received: int = 0
    retransmissions: int = 0
    duplicates: int = 0  # copies of packets already taken (results or data)
    stale: int = 0  # packets of other jobs, earlier calls or malformed
    dropped_on_purpose: int = 0  # by drop_outgoing
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _grow_buffers(sock: socket.socket) -> None:
    """Room for a window of every worker at once; past net.core.rmem_max where we are root."""
    for forced, plain in ((33, socket.SO_RCVBUF), (32, socket.SO_SNDBUF)):  # SO_{RCV,SND}BUFFORCE
        try:
            sock.setsockopt(socket.SOL_SOCKET, forced, SOCKET_BUFFER_BYTES)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER_BYTES)


def bound_socket(bind: tuple[str, int]) -> socket.socket:
    """A UDP socket bound to `bind` with room for a window of every peer at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _grow_buffers(sock)
    try:
        sock.bind(bind)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot bind UDP {bind[0]}:{bind[1]}: {exc.strerror}") from exc
    return sock


def byte_view(payload: bytes | bytearray | memoryview | np.ndarray) -> memoryview:
    """The payload's bytes as a flat byte memoryview, without a copy (a numpy array of any dtype
    is viewed as its bytes, made contiguous first if it is not)."""
    if isinstance(payload, np.ndarray):
        return memoryview(np.ascontiguousarray(payload).reshape(-1).view(np.uint8))
    return memoryview(payload).cast("B")


@dataclass(kw_only=True)
class Pending:
    """A sent packet kept for retransmission."""

    data: bytes
    sent_at: float
    retries: int = 0
    path: int | None = None   # the UdpEndpoint path (source port) it leaves from: its queue pair with qps; None: the peer's current one


class RtoEstimator:
    """RFC 6298's retransmission timeout: smoothed RTT + 4 deviations from packets sent once
    (Karn's rule is the caller's: a resent packet's answer times nothing), never below `floor_s`
    nor above `cap_s`. Before the first sample it is `floor_s`. A fixed timeout shorter than a
    rate-limited link's queue resends packets that are only waiting, and deepens the queue."""

    def __init__(self, floor_s: float, cap_s: float = 2.0) -> None:
        self.floor_s, self.cap_s = floor_s, cap_s
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto = floor_s

    def sample(self, rtt: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.rto = min(max(self.floor_s, self.srtt + 4 * self.rttvar), self.cap_s)

    def backoff(self) -> None:
        """A timeout passed: double the timeout until a fresh sample sets it again (with Karn's
        rule, a round trip longer than the timeout would otherwise never be measured)."""
        self.rto = min(2 * self.rto, self.cap_s)

    def timeout(self, retries: int) -> float:
        """The wait before resending a packet already resent `retries` times (doubling, capped)."""
        return min(self.rto * (1 << retries), self.cap_s)


def _arrival(ancillary: list) -> float:
    """The kernel's arrival stamp (CLOCK_REALTIME) among a datagram's ancillary data, as a
    time.monotonic() time; now where there is none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(data)
            return time.monotonic() - max(0.0, time.time() - (sec + nsec / 1e9))
    return time.monotonic()


class UdpEndpoint:
    """A bound UDP socket. `drop_outgoing` (0 <= p < 1, off by default) silently discards that
    fraction of outgoing datagrams, chosen by a Random seeded with `drop_seed`; `dscp` marks every
    datagram (the switches' traffic class). A send on `path` n > 0 leaves from the n-th of more
    sockets on the same address, each on a port the kernel gives (made when first used): another
    source port, so the switches' ECMP hashes it onto another path (hostagent.collectives.repath).
    `arrival_times`: the kernel stamps each datagram's arrival (SO_TIMESTAMPNS) and `arrived_at`
    tells it, so a round trip measured with it leaves out how long the datagram waited for us
    to read it (what a NIC's timestamps leave out for a delay-based congestion control)."""

    def __init__(self, bind: tuple[str, int], drop_outgoing: float = 0.0, drop_seed: int = 0, dscp: int = 0,
                 arrival_times: bool = False) -> None:
        if not 0.0 <= drop_outgoing < 1.0:
            raise ValueError(f"drop_outgoing {drop_outgoing} is outside [0, 1)")
        self.drop_outgoing = drop_outgoing
        self._rng = random.Random(drop_seed)
        self.stats = TransferStats()
        self.dscp = dscp
        self.sock = self._socket(bind)
        self.address: tuple[str, int] = self.sock.getsockname()
        self._path_socks: dict[int, socket.socket] = {}
        self.arrival_times = arrival_times
        if arrival_times:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.arrived_at = 0.0        # time.monotonic() the last datagram received reached the kernel

    def _socket(self, bind: tuple[str, int]) -> socket.socket:
        sock = bound_socket(bind)
        if self.dscp:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.dscp << 2)   # its traffic class
        return sock

    def open_paths(self, count: int, ports: Sequence[int] = ()) -> None:
        """Make the sockets of paths 1..count-1 now (in the calling thread's network namespace;
        one made at its first send would be made in the sending thread's), on ``ports`` where
        given (one a path), else on ports the kernel gives."""
        for path in range(1, count):
            if ports:
                self._path_socks[path] = self._socket((self.address[0], ports[path - 1]))
            else:
                self._path_socket(path)

    def _path_socket(self, path: int) -> socket.socket:
        if path == 0:
            return self.sock
        sock = self._path_socks.get(path)
        if sock is None:
            sock = self._path_socks[path] = self._socket((self.address[0], 0))
        return sock

    def send(self, data: bytes, addr: tuple[str, int], path: int = 0) -> None:
        self.stats.packets_sent += 1
        self.stats.bytes_sent += len(data)
        if self.drop_outgoing and self._rng.random() < self.drop_outgoing:
            self.stats.dropped_on_purpose += 1
            return
        self._path_socket(path).sendto(data, addr)

    def resend(
        self, pending: Pending, addr: tuple[str, int], now: float, max_retries: int, give_up: Callable[[int], Exception]
    ) -> None:
        """Send `pending` again, or raise give_up(retries) once it was resent max_retries times."""
        if pending.retries >= max_retries:
            raise give_up(pending.retries)
        pending.retries += 1
        pending.sent_at = now
        self.stats.retransmissions += 1
        self.send(pending.data, addr)

    def recv(self, timeout: float) -> tuple[bytes, tuple[str, int]] | None:
        """One datagram, waiting at most `timeout` seconds (0: only what is queued), or None."""
        self.sock.settimeout(timeout if timeout > 0 else 0.0)
        try:
            if self.arrival_times:
                data, ancillary, _, addr = self.sock.recvmsg(MAX_DATAGRAM, socket.CMSG_SPACE(TIMESPEC.size))
                self.arrived_at = _arrival(ancillary)
            else:
                data, addr = self.sock.recvfrom(MAX_DATAGRAM)
        except (BlockingIOError, socket.timeout):
            return None
        self.stats.packets_received += 1
        self.stats.bytes_received += len(data)
        return data, addr

    def close(self) -> None:
        for sock in (self.sock, *self._path_socks.values()):
            sock.close()
