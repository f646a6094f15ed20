"""Switch ports on Linux interfaces, through raw AF_PACKET sockets and their packet rings
(rings.py); where the kernel gives no rings, through recv() and send()."""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from . import rings

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23      # Linux >= 4.20: do not hand us what we send
MAX_FRAME = rings.MAX_FRAME


class PortError(Exception):
    """A port cannot be opened; the message names the port and the interface."""


@dataclass(frozen=True)
class PortSpec:
    number: int
    iface: str

    @staticmethod
    def parse(text: str) -> "PortSpec":
        """``PORT@IFACE`` as simple_switch takes it (``-i 1@veth1``)."""
        num, sep, iface = text.partition("@")
        if not sep or not iface:
            raise PortError(f"bad interface spec '{text}': expected PORT@IFACE, e.g. 1@veth1")
        try:
            number = int(num)
        except ValueError:
            raise PortError(f"bad interface spec '{text}': port '{num}' is not a number") from None
        if not 0 <= number < 511:
            raise PortError(f"bad interface spec '{text}': port {number} is outside 0..510")
        return PortSpec(number, iface)


class Port:
    def __init__(self, spec: PortSpec, rx_ring_bytes: int = rings.RX_RING_BYTES,
                 tx_ring_bytes: int = rings.TX_RING_BYTES):
        """``*_ring_bytes``: the sizes of the packet rings (0: none, system calls instead)."""
        self.number = spec.number
        self.iface = spec.iface
        if not os.path.exists(f"/sys/class/net/{spec.iface}"):
            raise PortError(f"port {spec.number}: interface '{spec.iface}' does not exist")
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except PermissionError:
            raise PortError(f"port {spec.number}: raw sockets need root (CAP_NET_RAW)") from None
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self.rx_ring, self.tx_ring = rings.attach(sock, rings.interface_mtu(spec.iface),
                                                      rx_ring_bytes, tx_ring_bytes)
            sock.bind((spec.iface, 0))
        except OSError as e:
            sock.close()
            raise PortError(f"port {spec.number}: cannot bind to '{spec.iface}': {e.strerror}") from None
        sock.setblocking(False)
        self.sock = sock
        # what the transmit ring cannot take leaves by a socket of its own, bound to the
        # interface for no protocol (it receives nothing)
        self._send_sock = sock if self.tx_ring is None else _sending_socket(spec, sock)
        self.rx_packets = 0
        self.tx_packets = 0
        self.tx_errors = 0
        # the next frame that came in, or None when there is none
        self.receive = self.rx_ring.take if self.rx_ring is not None else self._receive_socket
        # a frame out: in the transmit ring until flush(), or sent at once
        self.send = self._send_ring if self.tx_ring is not None else self._send_socket

    @property
    def rx_truncated(self) -> int:
        """Frames the kernel could hand over only cut short: dropped, not forwarded."""
        return self.rx_ring.truncated if self.rx_ring is not None else 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def _receive_socket(self) -> bytes | None:
        try:
            return self.sock.recv(MAX_FRAME)
        except OSError:        # BlockingIOError: nothing more to read
            return None

    def _send_socket(self, frame: bytes) -> None:
        try:
            self._send_sock.send(frame)
            self.tx_packets += 1
        except OSError:           # interface down or gone, frame too big: the frame is lost
            self.tx_errors += 1

    def _send_ring(self, frame: bytes) -> None:
        if not self.tx_ring.put(frame):
            self.flush()               # what the ring holds leaves first: the order stays
            self._send_socket(frame)

    def flush(self) -> None:
        """Frames put in the transmit ring leave now."""
        ring = self.tx_ring
        if ring is not None and ring.pending:
            sent, lost = ring.flush()
            self.tx_packets += sent
            self.tx_errors += lost

    def close(self) -> None:
        self.flush()
        ring = self.rx_ring or self.tx_ring
        if ring is not None:
            ring.mm.close()            # one mapping holds both
        if self._send_sock is not self.sock:
            self._send_sock.close()
        self.sock.close()


def _sending_socket(spec: PortSpec, ring_sock: socket.socket) -> socket.socket:
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        sock.bind((spec.iface, 0))
    except OSError as e:
        ring_sock.close()
        raise PortError(f"port {spec.number}: cannot bind to '{spec.iface}': {e.strerror}") from None
    sock.setblocking(False)
    return sock


def open_ports(specs: list[PortSpec]) -> dict[int, Port]:
    """Open every port, or none: on the first failure the ones already open are closed."""
    seen_numbers: set[int] = set()
    seen_ifaces: set[str] = set()
    for s in specs:
        if s.number in seen_numbers:
            raise PortError(f"port {s.number} is given twice")
        if s.iface in seen_ifaces:
            raise PortError(f"interface '{s.iface}' is given twice")
        seen_numbers.add(s.number)
        seen_ifaces.add(s.iface)
    ports: dict[int, Port] = {}
    try:
        for s in specs:
            ports[s.number] = Port(s)
    except PortError:
        for p in ports.values():
            p.close()
        raise
    return ports
