"""How the agent names a flow: `FlowKey`, as its sender sends it (``src`` is the sending host).

RoCEv2-like flows (UDP to port 4791) are named by their BTH destination queue pair (``qp``)
with ``sport`` 0: their source port is entropy the agent changes when it moves them, the queue
pair is what stays. Every other flow is named by its 5-tuple (``qp`` 0). The same layout is
the key of every BPF map (`struct flow_key` in bpf/flows.h; IPv4 addresses as ::ffff:a.b.c.d).
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from hostagent.traffic.flows import ROCEV2_PORT
PROTOCOLS = {socket.IPPROTO_TCP: "tcp", socket.IPPROTO_UDP: "udp"}
_NUMBERS = {name: number for number, name in PROTOCOLS.items()}


@dataclass(frozen=True, order=True)
class FlowKey:
    src: str
    dst: str
    protocol: str        # tcp | udp
    sport: int
    dport: int
    qp: int = 0

    def __post_init__(self) -> None:
        if self.protocol not in _NUMBERS:
            raise ValueError(f"flow {self.src} -> {self.dst}: protocol {self.protocol!r} is not tcp or udp")
        families = {ipaddress.ip_address(self.src).version, ipaddress.ip_address(self.dst).version}
        if len(families) != 1:
            raise ValueError(f"flow {self.src} -> {self.dst}: addresses of two IP versions")

    @classmethod
    def roce(cls, src: str, dst: str, qp: int) -> "FlowKey":
        """A RoCEv2-like flow: UDP to port 4791, named by its destination queue pair."""
        return cls(src, dst, "udp", 0, ROCEV2_PORT, qp)

    @property
    def family(self) -> int:
        return ipaddress.ip_address(self.src).version

    @property
    def is_roce(self) -> bool:
        return self.protocol == "udp" and self.dport == ROCEV2_PORT

    def describe(self) -> str:
        """``udp 10.0.0.1 -> 10.0.1.2:4791 qp 7`` / ``tcp [fd00::1]:40000 -> [fd00::2]:5001``."""
        def at(addr: str, port: int | None) -> str:
            host = f"[{addr}]" if ":" in addr else addr
            return host if port is None else f"{host}:{port}"
        if self.is_roce:
            return f"{self.protocol} {at(self.src, None)} -> {at(self.dst, self.dport)} qp {self.qp}"
        return f"{self.protocol} {at(self.src, self.sport)} -> {at(self.dst, self.dport)}"

    def to_c(self, ctype: type) -> object:
        """This key as the BPF maps' ``struct flow_key`` (``ctype``: the table's Key class)."""
        k = ctype()
        for name in ("src", "dst"):
            packed = _v6_bytes(getattr(self, name))
            getattr(k, name)[:] = list(packed)
        k.sport, k.dport, k.qp = self.sport, self.dport, self.qp
        k.proto, k.family = _NUMBERS[self.protocol], self.family
        return k

    @classmethod
    def from_c(cls, k: object) -> "FlowKey":
        family = k.family  # type: ignore[attr-defined]
        src, dst = (_address(bytes(getattr(k, n)), family) for n in ("src", "dst"))
        protocol = PROTOCOLS.get(k.proto)  # type: ignore[attr-defined]
        if protocol is None:
            raise ValueError(f"flow key with IP protocol {k.proto}")  # type: ignore[attr-defined]
        return cls(src, dst, protocol, k.sport, k.dport, k.qp)  # type: ignore[attr-defined]


def _v6_bytes(addr: str) -> bytes:
    ip = ipaddress.ip_address(addr)
    return ip.packed if ip.version == 6 else ipaddress.IPv6Address(f"::ffff:{ip}").packed


def _address(packed: bytes, family: int) -> str:
    return str(ipaddress.IPv4Address(packed[12:]) if family == 4 else ipaddress.IPv6Address(packed))
