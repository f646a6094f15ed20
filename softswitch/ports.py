"""Switch ports on Linux interfaces, through raw AF_PACKET sockets."""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23      # Linux >= 4.20: do not hand us what we send


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
    """One switch port: a non-blocking raw socket bound to its interface. The data plane loop
    reads and sends on ``sock`` itself and keeps the port's packet counts."""

    def __init__(self, spec: PortSpec):
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
            sock.bind((spec.iface, 0))
        except OSError as e:
            sock.close()
            raise PortError(f"port {spec.number}: cannot bind to '{spec.iface}': {e.strerror}") from None
        sock.setblocking(False)
        self.sock = sock
        self.mac = interface_mac(spec.iface)     # the source of the MAC control frames it sends (pfc.py)
        self.rx_packets = 0
        self.tx_packets = 0
        self.tx_errors = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()


def interface_mac(iface: str) -> bytes:
    """The 6-byte address of interface ``iface`` (zeros when it has none to read)."""
    try:
        with open(f"/sys/class/net/{iface}/address") as f:
            return bytes.fromhex(f.read().strip().replace(":", ""))[:6].ljust(6, b"\0")
    except (OSError, ValueError):
        return bytes(6)


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
