"""The collectives' datagrams carried RoCEv2-like (`TransportConfig(rocev2=True)`), so the host
agents (hostagent.agent) act on them as on RoCE traffic: PLB repaths them, DCQCN sets their rate.

On the wire each datagram goes to UDP port 4791 behind a 12-byte BTH-like header: opcode
SEND_ONLY, P_Key 0xFFFF, destination queue pair ``qp_for(group, destination rank)`` (one flow
per process group and peer, so the agent names and moves each alone), PSN 0; the transport's own
packet follows unchanged. The IP header carries ECT(0) (IP_TOS), so switches mark instead of
drop. Datagrams leave from the group's own port (as without this option: the ECMP hash keeps its
entropy and the seeds that move it); they arrive on the host's port 4791, which every group of a
process shares: one socket per address (`_SharedPort`) whose reader hands each datagram to its
group by the group id in the transport's header.

Pacing: with ``rate_control_port`` the sender listens for hostagent.traffic.ratecontrol messages
(on 127.0.0.1, one listener per process) and sends each queue pair's datagrams no faster than
the last rate given for it (Ethernet frame bits, as a NIC's limiter counts); a queue pair with
no rate given is not paced.
"""
from __future__ import annotations

import queue
import socket
import struct
import threading
import time

from hostagent.collectives.transport import MAX_DATAGRAM, TransferStats, _grow_buffers
from hostagent.traffic.flows import ROCEV2_PORT
from hostagent.traffic.ratecontrol import RateListener, frame_bytes

BTH = struct.Struct("!BBHI4x")   # opcode, flags, P_Key, reserved byte + 24-bit destination QP, PSN word
BTH_BYTES = BTH.size             # 12
OPCODE_SEND_ONLY = 0x04          # RC SEND_ONLY: not the agents' CNP (0x81) nor report (0xC0)
P_KEY = 0xFFFF
GROUP_OFFSET = 3                 # the group id (u32) in reliable.HEADER: magic 2s, kind B, group I
GROUP_BITS, RANK_BITS = 14, 10   # a queue pair: group above, destination rank below (24 bits)
ECT0 = 0x02
RATE_POLL_S = 0.001              # rate messages read at most this often


class MalformedBth(ValueError):
    """A datagram on port 4791 that is not ours (too short, another opcode)."""


def qp_for(group: int, rank: int) -> int:
    """The queue pair naming a group's flow to its rank ``rank``."""
    if not 0 <= group < 1 << GROUP_BITS or not 0 <= rank < 1 << RANK_BITS:
        raise ValueError(f"RoCEv2 queue pair: group {group} (< {1 << GROUP_BITS}) and rank {rank} "
                         f"(< {1 << RANK_BITS}) do not fit its 24 bits")
    return group << RANK_BITS | rank


def frame(qp: int, payload: bytes) -> bytes:
    return BTH.pack(OPCODE_SEND_ONLY, 0, P_KEY, qp & 0xFFFFFF) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    """(queue pair, the transport's packet); MalformedBth for anything else."""
    if len(data) < BTH_BYTES:
        raise MalformedBth(f"{len(data)} bytes, shorter than a {BTH_BYTES}-byte BTH")
    opcode, _, _, qp = BTH.unpack_from(data)
    if opcode != OPCODE_SEND_ONLY:
        raise MalformedBth(f"BTH opcode {opcode:#04x} is not SEND_ONLY ({OPCODE_SEND_ONLY:#04x})")
    return qp & 0xFFFFFF, data[BTH_BYTES:]


def _ecn_capable(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECT0)


class _SharedPort:
    """A process's socket on (ip, 4791) and the thread handing its datagrams to their groups."""

    _lock = threading.Lock()
    _ports: dict[str, "_SharedPort"] = {}

    def __init__(self, ip: str) -> None:
        self.ip = ip
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        _grow_buffers(self.sock)
        try:
            self.sock.bind((ip, ROCEV2_PORT))
        except OSError as exc:
            self.sock.close()
            raise OSError(exc.errno, f"cannot bind UDP {ip}:{ROCEV2_PORT} (RoCEv2): {exc.strerror}") from exc
        self.sock.settimeout(0.05)
        self.inboxes: dict[int, queue.SimpleQueue] = {}
        self.malformed = 0           # not a BTH of ours
        self.unknown_group = 0       # a group no transport of this process has (yet, or any more)
        self._closed = False
        self._thread = threading.Thread(target=self._read, name=f"rocev2-{ip}", daemon=True)
        self._thread.start()

    @classmethod
    def join(cls, ip: str, group: int) -> tuple["_SharedPort", queue.SimpleQueue]:
        with cls._lock:
            port = cls._ports.get(ip) or cls._ports.setdefault(ip, cls(ip))
            if group in port.inboxes:
                raise ValueError(f"RoCEv2 transport: group {group} already has a transport on {ip}")
            inbox = port.inboxes[group] = queue.SimpleQueue()
            return port, inbox

    def leave(self, group: int) -> None:
        with self._lock:
            self.inboxes.pop(group, None)
            if self.inboxes:
                return
            del self._ports[self.ip]
            self._closed = True
            self._thread.join(timeout=1.0)
            self.sock.close()       # before the lock is let go: the next join binds the port anew

    def _read(self) -> None:
        while not self._closed:
            try:
                data, addr = self.sock.recvfrom(MAX_DATAGRAM)
            except (socket.timeout, OSError):
                continue
            try:
                _, packet = unframe(data)
            except MalformedBth:
                self.malformed += 1
                continue
            group = int.from_bytes(packet[GROUP_OFFSET:GROUP_OFFSET + 4], "big") if len(packet) >= GROUP_OFFSET + 4 else -1
            inbox = self.inboxes.get(group)
            if inbox is None:
                self.unknown_group += 1
            else:
                inbox.put((packet, addr))


class _Rates:
    """The process's rate-control listener and the rate last given per queue pair."""

    _lock = threading.Lock()
    _by_port: dict[int, "_Rates"] = {}

    def __init__(self, port: int) -> None:
        self.listener = RateListener(port)
        self.rates: dict[int, float] = {}
        self.messages = 0
        self._polled = 0.0

    @classmethod
    def on(cls, port: int) -> "_Rates":
        with cls._lock:
            return cls._by_port.get(port) or cls._by_port.setdefault(port, cls(port))

    def rate(self, qp: int, now: float) -> float | None:
        if now - self._polled >= RATE_POLL_S:
            with self._lock:
                self._polled = now
                for flow, bps in self.listener.poll():
                    self.rates[flow] = bps
                    self.messages += 1
        return self.rates.get(qp)


class RoceEndpoint:
    """UdpEndpoint's interface (send, recv, stats, close) for one group's transport, RoCEv2-like.
    ``peers``: the group's (ip, port) per rank; ``bind`` is this rank's, whose port datagrams
    leave from."""

    def __init__(self, bind: tuple[str, int], peers: list[tuple[str, int]], group: int, rate_control_port: int = 0) -> None:
        self.stats = TransferStats()
        self.group = group
        self._qp = {tuple(p): qp_for(group, r) for r, p in enumerate(peers)}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        _grow_buffers(self.sock)
        _ecn_capable(self.sock)
        try:
            self.sock.bind(bind)
        except OSError as exc:
            self.sock.close()
            raise OSError(exc.errno, f"cannot bind UDP {bind[0]}:{bind[1]}: {exc.strerror}") from exc
        self.address: tuple[str, int] = self.sock.getsockname()
        try:
            self._port, self._inbox = _SharedPort.join(bind[0], group)
        except Exception:
            self.sock.close()
            raise
        self._rates = _Rates.on(rate_control_port) if rate_control_port else None
        self._next_free: dict[int, float] = {}
        self.paced_s = 0.0           # time spent waiting for a queue pair's rate

    def send(self, data: bytes, addr: tuple[str, int]) -> None:
        qp = self._qp[tuple(addr)]
        packet = frame(qp, data)
        if self._rates is not None:
            self._pace(qp, len(packet))
        self.stats.packets_sent += 1
        self.stats.bytes_sent += len(data)
        self.sock.sendto(packet, (addr[0], ROCEV2_PORT))

    def _pace(self, qp: int, payload: int) -> None:
        now = time.monotonic()
        rate = self._rates.rate(qp, now)
        if rate is None:
            return
        start = max(now, self._next_free.get(qp, now))
        if start > now:
            time.sleep(start - now)
            self.paced_s += start - now
        self._next_free[qp] = start + frame_bytes(payload, ipv6=False) * 8 / rate

    @property
    def rate_messages(self) -> int:
        return self._rates.messages if self._rates is not None else 0

    def counters(self) -> dict[str, float]:
        """What the RoCEv2 path did beyond TransferStats: pacing, rate messages heard (by the
        process), and datagrams the host's port 4791 could not hand to a group (all groups')."""
        return {"rocev2_paced_s": round(self.paced_s, 6), "rocev2_rate_messages": self.rate_messages,
                "rocev2_malformed": self._port.malformed, "rocev2_unknown_group": self._port.unknown_group}

    def recv(self, timeout: float) -> tuple[bytes, tuple[str, int]] | None:
        try:
            data, addr = self._inbox.get(timeout=timeout) if timeout > 0 else self._inbox.get_nowait()
        except queue.Empty:
            return None
        self.stats.packets_received += 1
        self.stats.bytes_received += len(data)
        return data, addr

    def close(self) -> None:
        self._port.leave(self.group)
        self.sock.close()
