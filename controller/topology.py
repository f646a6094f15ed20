"""The controller's topology model: a networkx graph built from a `topologies.fabric.Fabric`.

The model knows which links are up. Route computation (`controller.routing`) asks it for switch
distances and for the port/neighbour pairs of a switch; failure handling marks links down and up
again (`set_link_up`) and recomputes routes from the same model.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import networkx as nx

from topologies.fabric import Fabric, Host, Nic, Switch


@dataclass(frozen=True)
class Adjacency:
    """One switch-to-switch link seen from ``switch``: out of ``port`` to ``neighbor``."""

    switch: str
    port: int
    neighbor: str
    neighbor_port: int


class TopologyModel:
    """Switches, hosts and links of a fabric, and which switch-switch links are up."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.graph: nx.Graph = fabric.to_graph()
        self._down: set[frozenset[str]] = set()

    # --- queries ---------------------------------------------------------------------------

    @property
    def switches(self) -> list[Switch]:
        return list(self.fabric.switches)

    @property
    def hosts(self) -> list[Host]:
        return list(self.fabric.hosts)

    def switch(self, name: str) -> Switch:
        return self.fabric.switch(name)

    def switch_graph(self) -> nx.Graph:
        """The subgraph of switches and the switch-switch links that are up (a copy)."""
        g = self.graph.subgraph(sw.name for sw in self.fabric.switches).copy()
        g.remove_edges_from([tuple(pair) for pair in self._down if g.has_edge(*pair)])
        return g

    def adjacencies(self, switch: str) -> list[Adjacency]:
        """Switch neighbours of ``switch`` over links that are up, ordered by port."""
        self.switch(switch)  # KeyError naming the switch when unknown
        result = []
        for nbr, data in self.graph.adj[switch].items():
            if self.graph.nodes[nbr]["kind"] != "switch" or frozenset((switch, nbr)) in self._down:
                continue
            result.append(Adjacency(switch, data["ports"][switch], nbr, data["ports"][nbr]))
        return sorted(result, key=lambda a: a.port)

    def subnets(self) -> dict[str, tuple[list[ipaddress.IPv4Network], list[ipaddress.IPv6Network]]]:
        """switch name -> (IPv4 subnets, IPv6 subnets) of the host NICs attached to it."""
        result: dict[str, tuple[list[ipaddress.IPv4Network], list[ipaddress.IPv6Network]]] = {}
        for nic in self.nics():
            v4, v6 = result.setdefault(nic.switch, ([], []))
            if nic.ip4.network not in v4:
                v4.append(nic.ip4.network)
            if nic.ip6.network not in v6:
                v6.append(nic.ip6.network)
        return result

    def nics(self) -> list[Nic]:
        """Every NIC of every host (a host's first NIC is the host's own fields)."""
        return [nic for h in self.fabric.hosts for nic in h.nics()]

    def link_weight(self, a: str, b: str) -> int:
        """Routing cost of the link a-b."""
        return self.graph.edges[a, b]["weight"]

    # --- link state ------------------------------------------------------------------------

    def set_link_up(self, a: str, b: str, up: bool) -> None:
        """Mark the switch-switch link a-b up or down."""
        if not self.graph.has_edge(a, b):
            raise KeyError(f"no link between {a!r} and {b!r} in {self.fabric.describe()}")
        pair = frozenset((a, b))
        if up:
            self._down.discard(pair)
        else:
            self._down.add(pair)

    def down_links(self) -> list[tuple[str, str]]:
        return sorted(tuple(sorted(p)) for p in self._down)  # type: ignore[misc]
