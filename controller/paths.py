"""The paths the controller installed between two hosts, hop by hop, for checking INT.

`installed_paths(fabric, forwarding, src, dst)` follows the routes of `controller.routing` from
the source host's switch to the destination host: at every switch, each next hop of the group
the destination's /32 (or subnet) route points to is one branch (ECMP). A `PathHop` is what INT
reports for a hop: the switch's device id, the port the packet came in on and the port it left by.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from controller.routing import SwitchForwarding
from topologies.fabric import Fabric

MAX_PATH_SWITCHES = 16  # far more than any fat-tree or leaf-spine path; guards against loops


@dataclass(frozen=True)
class PathHop:
    switch: str
    device_id: int
    ingress_port: int
    egress_port: int


def _next_hops(state: SwitchForwarding, dst_ip: ipaddress.IPv4Address | ipaddress.IPv6Address):
    """Next hops of the longest prefix that covers ``dst_ip``."""
    best = None
    for route in state.routes:
        if route.prefix.version == dst_ip.version and dst_ip in route.prefix:
            if best is None or route.prefix.prefixlen > best.prefix.prefixlen:
                best = route
    if best is None:
        raise KeyError(f"{state.switch} has no route to {dst_ip}")
    return state.next_groups[best.next_id]


def installed_paths(
    fabric: Fabric, forwarding: dict[str, SwitchForwarding], src_host: str, dst_host: str, ipv6: bool = False
) -> list[tuple[PathHop, ...]]:
    """Every path (ECMP branches) from ``src_host`` to ``dst_host`` the routes allow."""
    src, dst = fabric.host(src_host), fabric.host(dst_host)
    dst_ip = dst.ip6.ip if ipv6 else dst.ip4.ip
    paths: list[tuple[PathHop, ...]] = []

    def walk(switch: str, in_port: int, hops: tuple[PathHop, ...]) -> None:
        if len(hops) >= MAX_PATH_SWITCHES:
            raise RuntimeError(f"path from {src_host} to {dst_host} loops: {[h.switch for h in hops]}")
        for nh in _next_hops(forwarding[switch], dst_ip):
            hop = PathHop(switch, fabric.switch(switch).device_id, in_port, nh.port)
            if nh.neighbor == dst_host:
                paths.append(hops + (hop,))
                continue
            link = next(ln for ln in fabric.links if {ln.a, ln.b} == {switch, nh.neighbor} and ln.port_of(switch) == nh.port)
            walk(nh.neighbor, link.port_of(nh.neighbor), hops + (hop,))

    walk(src.switch, src.port, ())
    return paths


def path_of_int(hops: tuple, names: dict[int, str]) -> tuple[PathHop, ...]:
    """INT hop records (`controller.telemetry.int_report.HopRecord`) as PathHops, for comparison."""
    return tuple(
        PathHop(names.get(h.switch_id, str(h.switch_id)), h.switch_id, h.ingress_port, h.egress_port) for h in hops
    )
