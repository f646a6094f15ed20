"""A pure-Python description of a fabric: switches, hosts and the links between them.

`fat_tree(k)` and `leaf_spine(leaves, spines, hosts_per_leaf)` build a `Fabric` that follows the
address plan of `topologies.addressing`. Nothing here touches the system: the same description is
used by the Mininet topology (`emulation.mininet_topo`), by the controller's topology model and
route computation (`controller.topology`, `controller.routing`) and by the tests.

Contract with the controller:

* ``Switch.device_id`` is the P4Runtime device id, ``Switch.grpc_address`` its server address,
  ``Switch.mac`` its router MAC (my_station, ARP/NDP replies, source MAC of routed packets).
* ``Host.switch``/``Host.port`` say where a host is attached; ``Host.ip4``/``Host.ip6`` carry their
  prefix, so ``Host.ip4.network`` is the subnet its switch routes.
* ``Link.a_port``/``Link.b_port`` are P4 port numbers (Mininet names the interfaces
  ``<switch>-eth<port>``). Host-switch links are links too, with the host's port 0.
* ``Link.weight`` is the link's routing cost (1 unless a topology says otherwise: a dragonfly's
  global links cost more, so routes take at most one of them).
* A host may have more NICs than its first (``Host.extra_nics``, e.g. a dual-plane host's NIC on
  its second plane): each is attached to its own switch port, has its own addresses and is routed
  like a host of its own; ``Host.nics()`` lists them all, the first built from the host's fields.

The AI-cluster shapes (rail-optimised, dual-plane, dragonfly) are built in `topologies.ai_fabrics`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterator

import networkx as nx

from topologies import addressing as ap


class Role(str, Enum):
    EDGE = "edge"
    AGGREGATION = "aggregation"
    CORE = "core"
    LEAF = "leaf"
    SPINE = "spine"
    RAIL = "rail"
    ROUTER = "router"


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int
    role: Role
    mac: str
    grpc_port: int
    pod: int | None = None
    grpc_host: str = ap.GRPC_HOST     # another host name when the switches run elsewhere (a container)

    @property
    def grpc_address(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"


@dataclass(frozen=True)
class Attachment:
    """A NIC's addresses, its gateways and the switch it is attached to."""

    ip4: ipaddress.IPv4Interface
    ip6: ipaddress.IPv6Interface
    mac: str
    gateway4: ipaddress.IPv4Address
    gateway6: ipaddress.IPv6Address
    switch: str


@dataclass(frozen=True, kw_only=True)
class Nic(Attachment):
    """One interface of a host (``<host>-eth<port>``) and the switch port it is attached to;
    ``routes4``/``routes6`` are the networks the host reaches through it (besides its own subnet;
    the first NIC has the default routes instead)."""

    port: int
    switch_port: int
    routes4: tuple[ipaddress.IPv4Network, ...] = ()
    routes6: tuple[ipaddress.IPv6Network, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Host(Attachment):
    """A host: its first NIC's attachment (port ``HOST_PORT``, on switch port ``port``) and its
    other NICs."""

    name: str
    port: int
    extra_nics: tuple[Nic, ...] = ()

    def nics(self) -> tuple[Nic, ...]:
        """Every NIC of the host, its first (port 0, the fields above) first."""
        first = Nic(self.ip4, self.ip6, self.mac, self.gateway4, self.gateway6, self.switch, port=HOST_PORT,
                    switch_port=self.port)
        return (first, *self.extra_nics)


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int
    weight: int = 1

    def _end(self, node: str) -> int:
        """0 where ``node`` is end a, 1 where it is end b."""
        if node not in (self.a, self.b):
            raise KeyError(f"{node} is not an end of link {self}")
        return 0 if node == self.a else 1

    def port_of(self, node: str) -> int:
        return (self.a_port, self.b_port)[self._end(node)]

    def other(self, node: str) -> str:
        return (self.b, self.a)[self._end(node)]


HOST_PORT = 0
"""Port number of a host's single interface (``<host>-eth0``)."""


@dataclass
class Fabric:
    """Switches, hosts and links of one topology, in a deterministic order."""

    kind: str
    params: dict[str, int]
    switches: list[Switch] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def switch(self, name: str) -> Switch:
        for sw in self.switches:
            if sw.name == name:
                return sw
        raise KeyError(f"no switch named {name!r} in {self.describe()}")

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host named {name!r} in {self.describe()}")

    def hosts_of(self, switch: str) -> list[Host]:
        return [h for h in self.hosts if h.switch == switch]

    def host_ports(self, switch: str) -> list[int]:
        """Ports of ``switch`` with a host NIC at the other end (any NIC, not only first ones)."""
        return sorted(nic.switch_port for h in self.hosts for nic in h.nics() if nic.switch == switch)

    def switch_links(self) -> Iterator[Link]:
        """Links whose both ends are switches."""
        names = {sw.name for sw in self.switches}
        return (ln for ln in self.links if ln.a in names and ln.b in names)

    def fabric_ports(self) -> dict[str, list[int]]:
        """Each switch's ports with a switch at the other end."""
        ports: dict[str, list[int]] = {sw.name: [] for sw in self.switches}
        for ln in self.switch_links():
            ports[ln.a].append(ln.a_port)
            ports[ln.b].append(ln.b_port)
        return {name: sorted(p) for name, p in ports.items()}

    def ports_of(self, switch: str) -> dict[int, str]:
        """port number -> name of the node at the other end."""
        ports: dict[int, str] = {}
        for ln in self.links:
            if switch in (ln.a, ln.b):
                ports[ln.port_of(switch)] = ln.other(switch)
        return dict(sorted(ports.items()))

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.kind}({args})"

    def to_graph(self) -> nx.Graph:
        """An undirected graph: nodes are switch and host names with attribute ``kind``
        ("switch"/"host") and ``obj`` (the Switch/Host); each edge has ``ports``, a dict
        node name -> port number on that node, ``link`` (the Link) and ``weight`` (its cost)."""
        g = nx.Graph(fabric=self.describe())
        for sw in self.switches:
            g.add_node(sw.name, kind="switch", obj=sw)
        for h in self.hosts:
            g.add_node(h.name, kind="host", obj=h)
        for ln in self.links:
            if g.has_edge(ln.a, ln.b):
                raise ValueError(f"parallel links between {ln.a} and {ln.b} are not supported")
            g.add_edge(ln.a, ln.b, ports={ln.a: ln.a_port, ln.b: ln.b_port}, link=ln, weight=ln.weight)
        return g


def fat_tree(k: int) -> Fabric:
    """A k-ary fat-tree (k pods, (k/2)^2 cores, k^3/4 hosts); see `topologies.addressing`."""
    ap.check_fat_tree_k(k)
    half = k // 2
    fab = Fabric(kind="fat_tree", params={"k": k})
    for pod in range(k):
        for i in range(half):
            dev = ap.edge_device_id(k, pod, i)
            fab.switches.append(
                Switch(ap.edge_name(pod, i), dev, Role.EDGE, ap.switch_mac(dev), ap.grpc_port(dev), pod)
            )
        for i in range(half):
            dev = ap.agg_device_id(k, pod, i)
            fab.switches.append(
                Switch(ap.agg_name(pod, i), dev, Role.AGGREGATION, ap.switch_mac(dev), ap.grpc_port(dev), pod)
            )
    for j in range(half * half):
        dev = ap.core_device_id(k, j)
        fab.switches.append(Switch(ap.core_name(j), dev, Role.CORE, ap.switch_mac(dev), ap.grpc_port(dev)))

    for pod in range(k):
        for e in range(half):
            edge = ap.edge_name(pod, e)
            gateway4, gateway6 = ap.fat_tree_gateway4(pod, e), ap.fat_tree_gateway6(pod, e)
            for h in range(half):
                host = Host(
                    name=ap.fat_tree_host_name(pod, e, h),
                    ip4=ap.fat_tree_host_ip4(pod, e, h),
                    ip6=ap.fat_tree_host_ip6(pod, e, h),
                    mac=ap.fat_tree_host_mac(pod, e, h),
                    gateway4=gateway4,
                    gateway6=gateway6,
                    switch=edge,
                    port=ap.edge_host_port(h),
                )
                fab.hosts.append(host)
                fab.links.append(Link(host.name, HOST_PORT, edge, host.port))
    for pod in range(k):
        for e in range(half):
            for a in range(half):
                fab.links.append(
                    Link(ap.edge_name(pod, e), ap.edge_uplink_port(k, a), ap.agg_name(pod, a), ap.agg_downlink_port(e))
                )
    for pod in range(k):
        for j in range(half * half):
            a = ap.core_agg_index(k, j)
            fab.links.append(Link(ap.agg_name(pod, a), ap.agg_uplink_port(k, j), ap.core_name(j), ap.core_port(pod)))
    return fab


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int) -> Fabric:
    """A two-tier Clos: every leaf connects to every spine; see `topologies.addressing`."""
    ap.check_leaf_spine(leaves, spines, hosts_per_leaf)
    fab = Fabric(
        kind="leaf_spine", params={"leaves": leaves, "spines": spines, "hosts_per_leaf": hosts_per_leaf}
    )
    for i in range(leaves):
        dev = ap.leaf_device_id(i)
        fab.switches.append(Switch(ap.leaf_name(i), dev, Role.LEAF, ap.switch_mac(dev), ap.grpc_port(dev)))
    for j in range(spines):
        dev = ap.spine_device_id(leaves, j)
        fab.switches.append(Switch(ap.spine_name(j), dev, Role.SPINE, ap.switch_mac(dev), ap.grpc_port(dev)))
    for i in range(leaves):
        for h in range(hosts_per_leaf):
            host = Host(
                name=ap.leaf_spine_host_name(i, h),
                ip4=ap.leaf_spine_host_ip4(i, h),
                ip6=ap.leaf_spine_host_ip6(i, h),
                mac=ap.leaf_spine_host_mac(i, h),
                gateway4=ap.leaf_spine_gateway4(i),
                gateway6=ap.leaf_spine_gateway6(i),
                switch=ap.leaf_name(i),
                port=ap.leaf_host_port(h),
            )
            fab.hosts.append(host)
            fab.links.append(Link(host.name, HOST_PORT, host.switch, host.port))
    for i in range(leaves):
        for j in range(spines):
            fab.links.append(
                Link(ap.leaf_name(i), ap.leaf_uplink_port(hosts_per_leaf, j), ap.spine_name(j), ap.spine_port(i))
            )
    return fab

