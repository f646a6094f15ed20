"""AI-cluster fabrics: rail-optimised, dual-plane and dragonfly, on the aifabric address plan.

Every builder returns a `topologies.fabric.Fabric`, so Mininet (`emulation.mininet_topo`), the
controller's model and routing (`controller.topology`, `controller.routing`: shortest paths by link
weight, ECMP over every equal-cost next hop) and the checks use them unchanged. Conventions shared
with `topologies.addressing`: device ids 1-based and dense, switch MAC and gRPC port from the device
id, host MAC ``00:00`` + the host's IPv4 bytes, host ``.{n+2}`` in a /24 whose ``.1`` is the switch.

Rail-optimised(servers, gpus, spines)
=====================================

GPU ``g`` of every server sits on rail switch ``g``; every rail switch connects to every spine, so
traffic between GPUs of the same index stays on one rail switch and only cross-rail traffic
crosses a spine. A GPU is a host of its own (its NIC is that host's only interface; the NVLink
inside a server is not modelled).

=================  ====================  =====================================================
rail switch        ``r{g}``              device id ``g + 1``; port ``s+1`` -> server ``s``'s GPU g,
                                         port ``servers+j+1`` -> spine ``j``
spine              ``s{j}``              device id ``gpus + j + 1``; port ``g+1`` -> rail ``g``
GPU host           ``s{s}g{g}``          IPv4 ``10.220.{g}.{s+2}/24``, IPv6 ``fd00:2:{g:x}::{s+2:x}/64``
=================  ====================  =====================================================

Dual-plane(leaves, spines, hosts_per_leaf), as Alibaba HPN
==========================================================

Two independent leaf-spine planes of the same shape, never interconnected. Every host has two
NICs: ``eth0`` on leaf ``i`` of plane 0, ``eth1`` on leaf ``i`` of plane 1, each with an address
of its plane; the host reaches plane 1's addresses through ``eth1`` (a route for the plane's
supernet) and everything else through plane 0 (its default routes). A host that loses one plane
still reaches every other host over the other.

=================  ====================  =====================================================
leaf of plane p    ``p{p}l{i}``          device id ``p*(leaves+spines) + i + 1``; ports as leaf-spine
spine of plane p   ``p{p}s{j}``          device id ``p*(leaves+spines) + leaves + j + 1``
host               ``t{i}h{h}``          eth0: ``10.210.{i}.{h+2}/24``, ``fd00:3:{i:x}::{h+2:x}/64``;
                                         eth1: ``10.211.{i}.{h+2}/24``, ``fd00:4:{i:x}::{h+2:x}/64``
=================  ====================  =====================================================

Dragonfly(groups, routers, hosts_per_router, global_links)
==========================================================

``groups`` groups of ``routers`` routers, all routers of a group linked to each other (local
links); every pair of groups joined by ``global_links`` global links, spread round-robin over the
routers of each group. Global links weigh `GLOBAL_LINK_WEIGHT`, more than any two local hops, so
routing is minimal: at most one global link, the fewest local hops around it, and ECMP where
several such paths exist (``global_links`` > 1).

=================  ====================  =====================================================
router             ``g{x}r{r}``          device id ``x*routers + r + 1`` (``pod`` = group); port
                                         ``h+1`` -> host ``h``, then one port per other router
                                         of the group (in router order), then its global links
                                         (in the order they were dealt)
host               ``g{x}r{r}h{h}``      IPv4 ``10.230.{n}.{h+2}/24``, IPv6 ``fd00:5:{n:x}::{h+2:x}/64``,
                                         ``n = x*routers + r``
=================  ====================  =====================================================
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from topologies import addressing as ap
from topologies.fabric import Fabric, Host, Link, Nic, Role, Switch

RAIL_IPV4_OCTET, RAIL_IPV6_GROUP = 220, 2
PLANE_IPV4_OCTETS, PLANE_IPV6_GROUPS = (210, 211), (3, 4)
DRAGONFLY_IPV4_OCTET, DRAGONFLY_IPV6_GROUP = 230, 5
GLOBAL_LINK_WEIGHT = 10
SECOND_NIC_PORT = 1


# --- shared pieces --------------------------------------------------------------------------


def _check_positive(kind: str, **values: int) -> None:
    for label, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{kind} {label}={value!r} must be an integer >= 1")


def _check_limits(kind: str, *, subnets: int, hosts_per_subnet: int, ports: int, devices: int) -> None:
    if subnets > 254:
        raise ValueError(f"{kind}: {subnets} host subnets, but a subnet index is one IPv4 octet (<= 254)")
    if hosts_per_subnet > 252:
        raise ValueError(f"{kind}: {hosts_per_subnet} hosts on one switch, but host n gets .{{n+2}} in a /24 (<= 252)")
    if ports > ap.MAX_SWITCH_PORT:
        raise ValueError(f"{kind}: a switch needs {ports} ports, more than {ap.MAX_SWITCH_PORT} (port 255 is the CPU port)")
    if devices > ap.MAX_DEVICE_ID:
        raise ValueError(f"{kind}: {devices} switches exceed {ap.MAX_DEVICE_ID} device ids")


def _switch(name: str, device_id: int, role: Role, pod: int | None = None) -> Switch:
    return Switch(name, device_id, role, ap.switch_mac(device_id), ap.grpc_port(device_id), pod)


def _subnet_host(octet: int, group6: int, subnet: int, n: int) -> tuple[
        ipaddress.IPv4Interface, ipaddress.IPv6Interface, str, ipaddress.IPv4Address, ipaddress.IPv6Address]:
    """(ip4, ip6, mac, gateway4, gateway6) of host ``n`` in subnet ``subnet`` of a plan block."""
    ip4 = ipaddress.IPv4Interface(f"10.{octet}.{subnet}.{n + 2}/24")
    ip6 = ipaddress.IPv6Interface(f"fd00:{group6:x}:{subnet:x}::{n + 2:x}/64")
    mac = ap.int_to_mac(int(ip4.ip))
    return ip4, ip6, mac, ip4.network.network_address + 1, ip6.network.network_address + 1


def _add_two_tier(fab: Fabric, leaves: list[Switch], spines: list[Switch], hosts_per_leaf: int) -> None:
    """Switches plus a link from every leaf (port ``hosts_per_leaf+j+1``) to every spine ``j``
    (port ``i+1`` for leaf ``i``)."""
    fab.switches.extend([*leaves, *spines])
    for i, leaf in enumerate(leaves):
        for j, spine in enumerate(spines):
            fab.links.append(Link(leaf.name, hosts_per_leaf + j + 1, spine.name, i + 1))


def _attach(fab: Fabric, host: Host) -> None:
    fab.hosts.append(host)
    for nic in host.nics():
        fab.links.append(Link(host.name, nic.port, nic.switch, nic.switch_port))


# --- rail-optimised -------------------------------------------------------------------------


def rail_optimised(servers: int = 2, gpus: int = 2, spines: int = 2) -> Fabric:
    """GPU ``g`` of every server on rail switch ``g``; rails joined by spines."""
    kind = "rail-optimised"
    _check_positive(kind, servers=servers, gpus=gpus, spines=spines)
    _check_limits(kind, subnets=gpus, hosts_per_subnet=servers, ports=max(servers + spines, gpus),
                  devices=gpus + spines)
    fab = Fabric(kind="rail_optimised", params={"servers": servers, "gpus": gpus, "spines": spines})
    rails = [_switch(f"r{g}", g + 1, Role.RAIL) for g in range(gpus)]
    _add_two_tier(fab, rails, [_switch(f"s{j}", gpus + j + 1, Role.SPINE) for j in range(spines)], servers)
    for s in range(servers):
        for g in range(gpus):
            _attach(fab, Host(*_subnet_host(RAIL_IPV4_OCTET, RAIL_IPV6_GROUP, g, s), rails[g].name,
                              name=f"s{s}g{g}", port=s + 1))
    return fab


# --- dual-plane -----------------------------------------------------------------------------


def plane_supernets(plane: int) -> tuple[ipaddress.IPv4Network, ipaddress.IPv6Network]:
    """Every address of plane ``plane`` (0 or 1) of a dual-plane fabric."""
    return (ipaddress.IPv4Network(f"10.{PLANE_IPV4_OCTETS[plane]}.0.0/16"),
            ipaddress.IPv6Network(f"fd00:{PLANE_IPV6_GROUPS[plane]:x}::/32"))


def dual_plane(leaves: int = 2, spines: int = 1, hosts_per_leaf: int = 2) -> Fabric:
    """Two independent leaf-spine planes; every host has a NIC on each (see the module doc)."""
    kind = "dual-plane"
    _check_positive(kind, leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf)
    _check_limits(kind, subnets=leaves, hosts_per_subnet=hosts_per_leaf,
                  ports=max(hosts_per_leaf + spines, leaves), devices=2 * (leaves + spines))
    fab = Fabric(kind="dual_plane", params={"leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf})
    per_plane = leaves + spines
    for p in (0, 1):
        _add_two_tier(
            fab,
            [_switch(f"p{p}l{i}", p * per_plane + i + 1, Role.LEAF, p) for i in range(leaves)],
            [_switch(f"p{p}s{j}", p * per_plane + leaves + j + 1, Role.SPINE, p) for j in range(spines)],
            hosts_per_leaf,
        )
    routes4, routes6 = plane_supernets(1)
    for i in range(leaves):
        for h in range(hosts_per_leaf):
            second = Nic(*_subnet_host(PLANE_IPV4_OCTETS[1], PLANE_IPV6_GROUPS[1], i, h), f"p1l{i}",
                         port=SECOND_NIC_PORT, switch_port=h + 1, routes4=(routes4,), routes6=(routes6,))
            _attach(fab, Host(*_subnet_host(PLANE_IPV4_OCTETS[0], PLANE_IPV6_GROUPS[0], i, h), f"p0l{i}",
                              name=f"t{i}h{h}", port=h + 1, extra_nics=(second,)))
    return fab


# --- dragonfly ------------------------------------------------------------------------------


def dragonfly(groups: int = 4, routers: int = 2, hosts_per_router: int = 1, global_links: int = 1) -> Fabric:
    """Groups of fully meshed routers, every pair of groups joined by ``global_links`` links."""
    kind = "dragonfly"
    _check_positive(kind, groups=groups, routers=routers, hosts_per_router=hosts_per_router,
                    global_links=global_links)
    if groups < 2:
        raise ValueError(f"dragonfly groups={groups}: a dragonfly needs at least 2 groups")
    if global_links > routers:
        raise ValueError(f"dragonfly global_links={global_links} exceeds routers={routers}: two global links "
                         "between the same pair of routers would be parallel links")
    global_ports = -(-(groups - 1) * global_links // routers)
    _check_limits(kind, subnets=groups * routers, hosts_per_subnet=hosts_per_router,
                  ports=hosts_per_router + routers - 1 + global_ports, devices=groups * routers)
    fab = Fabric(kind="dragonfly", params={"groups": groups, "routers": routers,
                                           "hosts_per_router": hosts_per_router, "global_links": global_links})
    def name(x: int, r: int) -> str:
        return f"g{x}r{r}"

    local_ports = hosts_per_router + routers - 1
    for x in range(groups):
        for r in range(routers):
            fab.switches.append(_switch(name(x, r), x * routers + r + 1, Role.ROUTER, x))
    for x in range(groups):
        for r in range(routers):
            for h in range(hosts_per_router):
                _attach(fab, Host(*_subnet_host(DRAGONFLY_IPV4_OCTET, DRAGONFLY_IPV6_GROUP, x * routers + r, h),
                                  name(x, r), name=f"{name(x, r)}h{h}", port=h + 1))
            for q in range(r + 1, routers):       # local full mesh: port = rank of the peer among the others
                fab.links.append(Link(name(x, r), hosts_per_router + q, name(x, q), hosts_per_router + r + 1))
    dealt = [0] * groups                           # global links each group has dealt so far
    used = {(x, r): 0 for x in range(groups) for r in range(routers)}
    for x in range(groups):
        for y in range(x + 1, groups):
            for _ in range(global_links):
                ends = []
                for z in (x, y):
                    r = dealt[z] % routers
                    dealt[z] += 1
                    used[z, r] += 1
                    ends.append((name(z, r), local_ports + used[z, r]))
                (a, a_port), (b, b_port) = ends
                fab.links.append(Link(a, a_port, b, b_port, weight=GLOBAL_LINK_WEIGHT))
    return fab


BUILDERS: dict[str, Callable[..., Fabric]] = {
    "rail_optimised": rail_optimised, "rail": rail_optimised,
    "dual_plane": dual_plane, "dualplane": dual_plane,
    "dragonfly": dragonfly,
}
