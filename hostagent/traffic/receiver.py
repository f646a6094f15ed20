"""The receiver: UDP datagrams and TCP streams of the traffic tools, counted per flow.

One process listens on its UDP ports (IPv4 and, where the host has it, IPv6) and TCP ports, keys
UDP flows as RoCE does, by source and destination address, destination port and the flow id
the datagrams carry as their queue pair, not by source port: that is entropy a host agent may
change mid-flow to move it to another path (PLB); the record keeps the first source port seen
(`hostagent.traffic.flowstats` says what it counts), takes arrival times
from the kernel's receive timestamps (SO_TIMESTAMPNS, CLOCK_REALTIME) and answers every TCP
stream with the bytes it got once they are all in. A datagram whose AckReq bit is set (its
sender runs a congestion control) is acknowledged at once, from the port it arrived on to its
source (`hostagent.traffic.wire`: the send time echoed, arrival and acknowledgement times). It
ends when ``expect`` flows are complete, or ``quiet`` seconds after the last packet once every
expected flow has begun (any flow, without ``expect``), or at ``deadline`` seconds, or on
SIGTERM/SIGINT, and reports as `Received`.
"""
from __future__ import annotations

import selectors
import socket
import struct
import time
from dataclasses import asdict, dataclass, field

from hostagent.traffic.flowstats import TcpFlowStats, TcpReceived, UdpFlowStats, UdpReceived
from hostagent.traffic.tcpinfo import tcp_info
from hostagent.traffic.wire import (
    TCP_PREAMBLE_BYTES,
    MalformedDatagram,
    pack_ack,
    pack_tcp_ack,
    unpack_datagram_header,
    unpack_tcp_preamble,
)

SO_TIMESTAMPNS = 35            # SO_TIMESTAMPNS_OLD: struct timespec of two 64-bit fields (64-bit Linux)
SO_RCVBUFFORCE = 33
IP_PKTINFO = 8
RCVBUF_BYTES = 8 << 20
UDP_BATCH = 256                # datagrams read from one socket before looking at the others
TCP_CHUNK = 256 * 1024
_TIMESPEC = struct.Struct("qq")
_CMSG_SPACE = 256


@dataclass
class ReceiverConfig:
    udp_ports: list[int] = field(default_factory=list)
    tcp_ports: list[int] = field(default_factory=list)
    quiet: float = 2.0
    deadline: float = 60.0
    expect: int | None = None
    reorder_buffer: bool = False

    def __post_init__(self) -> None:
        if not self.udp_ports and not self.tcp_ports:
            raise ValueError("the receiver needs at least one UDP or TCP port")
        for port in (*self.udp_ports, *self.tcp_ports):
            if not 1 <= port <= 65535:
                raise ValueError(f"receiver port {port} is not in 1..65535")
        if self.quiet <= 0 or self.deadline <= 0:
            raise ValueError(f"quiet ({self.quiet}) and deadline ({self.deadline}) must be positive")
        if self.expect is not None and self.expect < 1:
            raise ValueError(f"expect {self.expect}: at least one flow")


@dataclass
class Received:
    """What one receiver process reports (its stdout's last line, as JSON)."""

    clock: str
    ended: str                  # complete | quiet | deadline | signal
    udp_ports: list[int]
    tcp_ports: list[int]
    malformed: int              # datagrams that were not the traffic tools' (or contradicted their flow)
    flows: list[UdpReceived | TcpReceived]
    acks_sent: int = 0          # acknowledgements of datagrams that asked for one
    ack_errors: int = 0         # acknowledgements the kernel would not send

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Received":
        flows = [UdpReceived(**f) if f["protocol"] == "udp" else TcpReceived(**f) for f in data["flows"]]
        return cls(data["clock"], data["ended"], data["udp_ports"], data["tcp_ports"], data["malformed"], flows,
                   data.get("acks_sent", 0), data.get("ack_errors", 0))


def _plain(addr: str) -> str:
    return addr[7:] if addr.startswith("::ffff:") else addr


class Receiver:
    """Binds on construction (errors name the port); `run` counts until one of the ends."""

    def __init__(self, config: ReceiverConfig):
        self.config = config
        self.selector = selectors.DefaultSelector()
        self.udp: dict[tuple[str, int, str, int], UdpFlowStats] = {}   # (src, flow id, dst, port)
        self.tcp: list[TcpFlowStats] = []
        self.malformed = 0
        self.acks_sent = self.ack_errors = 0
        self.stopped = False
        self.last_activity: float | None = None
        try:
            for port in config.udp_ports:
                for family in self._families():
                    self._bind_udp(family, port)
            for port in config.tcp_ports:
                for family in self._families():
                    self._listen_tcp(family, port)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _families() -> list[socket.AddressFamily]:
        try:
            socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
            return [socket.AF_INET, socket.AF_INET6]
        except OSError:
            return [socket.AF_INET]

    @staticmethod
    def _socket(family: socket.AddressFamily, kind: socket.SocketKind, port: int, what: str) -> socket.socket:
        s = socket.socket(family, kind)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
        except OSError as err:
            s.close()
            if family == socket.AF_INET6 and err.errno == 99:     # EADDRNOTAVAIL: IPv6 off here
                raise _NoIpv6() from None
            raise OSError(err.errno, f"{what} port {port} ({family.name}): {err.strerror}") from None
        return s

    def _bind_udp(self, family: socket.AddressFamily, port: int) -> None:
        try:
            s = self._socket(family, socket.SOCK_DGRAM, port, "UDP")
        except _NoIpv6:
            return
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
        except PermissionError:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if family == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
        s.setblocking(False)
        self.selector.register(s, selectors.EVENT_READ, ("udp", port))

    def _listen_tcp(self, family: socket.AddressFamily, port: int) -> None:
        try:
            s = self._socket(family, socket.SOCK_STREAM, port, "TCP")
        except _NoIpv6:
            return
        s.listen(128)
        s.setblocking(False)
        self.selector.register(s, selectors.EVENT_READ, ("listen", port))

    def stop(self) -> None:
        """Make `run` end at its next look (safe from a signal handler)."""
        self.stopped = True

    def run(self) -> Received:
        cfg = self.config
        start = time.monotonic()
        ended = "deadline"
        while True:
            now = time.monotonic()
            if self.stopped:
                ended = "signal"
                break
            if now - start >= cfg.deadline:
                break
            flows = [*self.udp.values(), *self.tcp]
            if cfg.expect is not None and sum(f.complete for f in flows) >= cfg.expect:
                ended = "complete"
                break
            if (self.last_activity is not None and now - self.last_activity >= cfg.quiet
                    and len(flows) >= (cfg.expect or 1)):
                ended = "quiet"
                break
            for key, _ in self.selector.select(0.05):
                kind, sock = key.data[0], key.fileobj
                if kind == "udp":
                    self._read_udp(sock, key.data[1])
                elif kind == "listen":
                    self._accept(sock)
                else:
                    self._read_tcp(sock, key.data[1])
        records = [f.record() for f in self.udp.values()] + [t.record() for t in self.tcp]
        return Received("CLOCK_REALTIME", ended, self.config.udp_ports, self.config.tcp_ports, self.malformed, records,
                        self.acks_sent, self.ack_errors)

    def _read_udp(self, sock: socket.socket, port: int) -> None:
        for _ in range(UDP_BATCH):
            try:
                data, anc, _, addr = sock.recvmsg(65535, _CMSG_SPACE)
            except BlockingIOError:
                return
            arrival_ns, dst = time.time_ns(), ""
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = _TIMESPEC.unpack_from(payload)
                    arrival_ns = sec * 1_000_000_000 + nsec
                elif level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                    dst = socket.inet_ntop(socket.AF_INET, payload[8:12])
                elif level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
                    dst = socket.inet_ntop(socket.AF_INET6, payload[:16])
            self.last_activity = time.monotonic()
            try:
                head = unpack_datagram_header(data)
            except MalformedDatagram:
                self.malformed += 1
                continue
            key = (_plain(addr[0]), head.flow_id, dst, port)
            flow = self.udp.get(key)
            if flow is None:
                flow = self.udp[key] = UdpFlowStats(key[0], addr[1], dst, port, head.flow_id, head.total,
                                                    self.config.reorder_buffer)
            elif head.flow_id != flow.flow_id or head.total != flow.total:
                self.malformed += 1
                continue
            flow.add(head.seq, head.send_ns, arrival_ns, len(data))
            if head.ack_req:
                self._acknowledge(sock, addr, head.flow_id, head.seq, head.send_ns, arrival_ns)

    def _acknowledge(self, sock: socket.socket, addr, flow_id: int, seq: int, send_ns: int, arrival_ns: int) -> None:
        try:
            sock.sendto(pack_ack(flow_id, seq, send_ns, arrival_ns, time.time_ns()), addr)
            self.acks_sent += 1
        except OSError:
            self.ack_errors += 1        # the sender counts the acknowledgement as missing

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, peer = listener.accept()
        except BlockingIOError:
            return
        local = conn.getsockname()
        conn.setblocking(False)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        stats = TcpFlowStats(_plain(peer[0]), peer[1], _plain(local[0]), local[1])
        self.tcp.append(stats)
        self.selector.register(conn, selectors.EVENT_READ, ("tcp", stats))
        self.last_activity = time.monotonic()

    def _read_tcp(self, conn: socket.socket, stats: TcpFlowStats) -> None:
        try:
            data = conn.recv(TCP_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        now_ns = time.time_ns()
        self.last_activity = time.monotonic()
        if not data:                    # the sender closed (or reset) before its stream was complete
            self._close(conn)
            return
        if stats.expected < 0:
            stats.head += data
            if len(stats.head) < TCP_PREAMBLE_BYTES:
                return
            stats.flow_id, stats.expected, stats.connect_ns = unpack_tcp_preamble(stats.head)
            data = stats.head[TCP_PREAMBLE_BYTES:]
            stats.head = b""
        if data:
            if not stats.first_arrival_ns:
                stats.first_arrival_ns = now_ns
            stats.last_arrival_ns = now_ns
            stats.bytes += len(data)
        if stats.complete:
            try:
                conn.setblocking(True)
                conn.settimeout(1.0)
                conn.sendall(pack_tcp_ack(stats.bytes))
            except OSError:
                pass                    # the sender reports that it missed the answer
            self._close(conn)

    def _close(self, conn: socket.socket) -> None:
        stats = self.selector.get_key(conn).data[1]
        try:
            stats.out_of_order = tcp_info(conn).rcv_ooopack
        except OSError:
            pass
        self.selector.unregister(conn)
        conn.close()

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()


class _NoIpv6(Exception):
    pass
