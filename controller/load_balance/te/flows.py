"""The flows traffic engineering works on, and what was measured of them.

A `Flow` is a transport 5-tuple (the INT collector's `FlowKey`, so reports, samples and TE
overrides name a flow the same way) together with the fabric hosts at its two ends, which is what
placement needs. `HostDirectory` turns a 5-tuple seen on the wire into a `Flow` by the hosts'
IPv4/IPv6 addresses. `FlowRate` is one flow's measured rate over one period.
"""
from __future__ import annotations

from dataclasses import dataclass

from controller.telemetry.int_report import IP_PROTO_UDP, FlowKey
from topologies.fabric import Fabric, Host


@dataclass(frozen=True, slots=True)
class Flow:
    """One transport flow between two fabric hosts."""

    key: FlowKey
    src_host: str
    dst_host: str

    @classmethod
    def between(cls, src: Host, dst: Host, sport: int, dport: int, proto: int = IP_PROTO_UDP,
                ipv6: bool = False) -> "Flow":
        """The flow from ``src`` to ``dst`` with the given ports, over IPv4 unless ``ipv6``."""
        src_ip, dst_ip = (src.ip6.ip, dst.ip6.ip) if ipv6 else (src.ip4.ip, dst.ip4.ip)
        return cls(FlowKey(str(src_ip), str(dst_ip), proto, sport, dport), src.name, dst.name)

    def sort_key(self) -> tuple[str, str, int, int, int]:
        """A total order over flows (by 5-tuple), for deterministic results."""
        return key_order(self.key)

    def __str__(self) -> str:
        return f"{self.key} ({self.src_host} -> {self.dst_host})"


def key_order(key: FlowKey) -> tuple[str, str, int, int, int]:
    return (key.src_ip, key.dst_ip, key.protocol, key.src_port, key.dst_port)


@dataclass(frozen=True, slots=True)
class FlowRate:
    """What one period's measurement says of a flow: bytes over ``period_s`` seconds, and that
    rate as a fraction of the host link's rate."""

    flow: Flow
    bytes: int
    period_s: float
    link_fraction: float

    @property
    def bps(self) -> float:
        return self.bytes * 8 / self.period_s


class HostDirectory:
    """The fabric's hosts by address, to name the ends of a measured 5-tuple."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._by_ip: dict[str, str] = {}
        for h in fabric.hosts:
            self._by_ip[str(h.ip4.ip)] = h.name
            self._by_ip[str(h.ip6.ip)] = h.name

    def host_of(self, ip: str) -> str:
        try:
            return self._by_ip[ip]
        except KeyError:
            raise KeyError(f"no host of {self.fabric.describe()} has address {ip}") from None

    def flow(self, key: FlowKey) -> Flow:
        """The `Flow` of a 5-tuple whose addresses are both fabric hosts'."""
        return Flow(key, self.host_of(key.src_ip), self.host_of(key.dst_ip))
