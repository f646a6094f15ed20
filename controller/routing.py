"""Route computation: the forwarding state every switch should have, as pure data.

For every switch and every host subnet, the next hops are the neighbours that lie on a shortest
path (by link weight, `topologies.fabric.Link.weight`) to the switch the subnet is attached to: in
a fat-tree that is exactly up-down ECMP (an edge switch spreads over its k/2 aggregations, an
aggregation over its k/2 cores, a core has one way down); in a dragonfly, whose global links
weigh more than two local hops, it is minimal routing with ECMP over the equal minimal paths.
The switch a host NIC is attached to routes the NIC's /32 and /128 to its port with the NIC's MAC
as destination (a host with two NICs is routed as two hosts). Sets of next hops are deduplicated
per switch: the same set gets
the same next id, whether IPv4 or IPv6 uses it.

`compute_forwarding(model)` returns ``{switch name: SwitchForwarding}``; `controller.entries` turns
one SwitchForwarding into P4Runtime entities. Next ids are assigned deterministically (1, 2, ... in
the sorted order of the next-hop sets), so recomputing from the same topology gives the same ids.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import networkx as nx

from controller.topology import TopologyModel


@dataclass(frozen=True, order=True)
class NextHop:
    """Send out of ``port`` with source MAC ``smac`` and destination MAC ``dmac`` (towards
    ``neighbor``, a switch or a host name)."""

    port: int
    smac: str
    dmac: str
    neighbor: str


NextHopSet = tuple[NextHop, ...]
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Route:
    prefix: IPNetwork
    next_id: int

    @property
    def version(self) -> int:
        return self.prefix.version


@dataclass
class SwitchForwarding:
    """Everything the controller installs on one switch for basic forwarding."""

    switch: str
    device_id: int
    router_mac: str
    arp_prefixes: list[ipaddress.IPv4Network] = field(default_factory=list)
    ndp_prefixes: list[ipaddress.IPv6Network] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    next_groups: dict[int, NextHopSet] = field(default_factory=dict)

    @property
    def routes_v4(self) -> list[Route]:
        return [r for r in self.routes if r.version == 4]

    @property
    def routes_v6(self) -> list[Route]:
        return [r for r in self.routes if r.version == 6]

    def route_for(self, prefix: str | IPNetwork) -> Route:
        net = ipaddress.ip_network(prefix)
        for r in self.routes:
            if r.prefix == net:
                return r
        raise KeyError(f"{self.switch} has no route for {net}")

    def next_hops_for(self, prefix: str | IPNetwork) -> NextHopSet:
        return self.next_groups[self.route_for(prefix).next_id]


def shortest_path_next_hops(model: TopologyModel, dist: dict[str, int], switch: str) -> NextHopSet:
    """Next hops of ``switch`` towards the target of ``dist`` (path costs to the target): the
    neighbours through which a shortest path goes."""
    here = dist.get(switch)
    if here is None or here == 0:
        return ()
    smac = model.switch(switch).mac
    hops = [
        NextHop(adj.port, smac, model.switch(adj.neighbor).mac, adj.neighbor)
        for adj in model.adjacencies(switch)
        if adj.neighbor in dist and dist[adj.neighbor] + model.link_weight(switch, adj.neighbor) == here
    ]
    return tuple(sorted(hops))


def compute_forwarding(model: TopologyModel) -> dict[str, SwitchForwarding]:
    """The desired forwarding state of every switch of the model."""
    graph = model.switch_graph()
    subnets = model.subnets()
    wanted: dict[str, list[tuple[IPNetwork, NextHopSet]]] = {sw.name: [] for sw in model.switches}

    for target, (nets4, nets6) in subnets.items():
        dist = nx.single_source_dijkstra_path_length(graph, target, weight="weight")
        for sw in model.switches:
            if sw.name == target:
                continue
            hops = shortest_path_next_hops(model, dist, sw.name)
            if not hops:
                continue  # unreachable (failed links)
            for net in [*nets4, *nets6]:
                wanted[sw.name].append((net, hops))

    for host in model.hosts:
        for nic in host.nics():
            sw = model.switch(nic.switch)
            hop = (NextHop(nic.switch_port, sw.mac, nic.mac, host.name),)
            wanted[sw.name].append((ipaddress.ip_network(f"{nic.ip4.ip}/32"), hop))
            wanted[sw.name].append((ipaddress.ip_network(f"{nic.ip6.ip}/128"), hop))

    result: dict[str, SwitchForwarding] = {}
    for sw in model.switches:
        groups = sorted({hops for _, hops in wanted[sw.name]})
        next_ids = {hops: i + 1 for i, hops in enumerate(groups)}
        nets4, nets6 = subnets.get(sw.name, ([], []))
        result[sw.name] = SwitchForwarding(
            switch=sw.name,
            device_id=sw.device_id,
            router_mac=sw.mac,
            arp_prefixes=list(nets4),
            ndp_prefixes=list(nets6),
            routes=sorted(
                (Route(net, next_ids[hops]) for net, hops in wanted[sw.name]),
                key=lambda r: (r.version, r.prefix, r.next_id),
            ),
            next_groups={next_ids[hops]: hops for hops in groups},
        )
    return result
