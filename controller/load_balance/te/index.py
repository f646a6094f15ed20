"""Integer ids for a fabric's switches and directed links, so placement runs on lists, not
on a networkx graph.

Every link of the fabric (switch-switch and host-switch) is two directed links, one per
direction, each with its own capacity; ids are fixed for a fabric whatever the links' state, so
a path (a tuple of link ids) stays meaningful when a link goes down. A path runs from the source
host's uplink to the destination host's downlink; `FabricIndex.hops` turns it into the
`controller.paths.PathHop`s an override entry (switch, egress port) and an INT report speak of.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from controller.paths import PathHop
from topologies.fabric import Fabric, Role


@dataclass(frozen=True)
class HostAttachment:
    """Where a host is: its switch's index and the ids of its uplink and downlink."""

    switch: int
    uplink: int      # host -> switch
    downlink: int    # switch -> host


class FabricIndex:
    """Switches as 0..n-1 (the fabric's order), directed links as 0..m-1."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.names: list[str] = [sw.name for sw in fabric.switches]
        self.ids: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.device_ids: list[int] = [sw.device_id for sw in fabric.switches]
        self.roles: list[Role] = [sw.role for sw in fabric.switches]
        self.pods: list[int | None] = [sw.pod for sw in fabric.switches]
        # Per directed link: its two ends (switch index, -1 for a host), the egress port at its
        # start and the ingress port at its end.
        self.src: list[int] = []
        self.dst: list[int] = []
        self.egress_port: list[int] = []
        self.ingress_port: list[int] = []
        self.adjacency: list[list[tuple[int, int]]] = [[] for _ in self.names]  # (link, neighbour)
        self.hosts: dict[str, HostAttachment] = {}
        self._pairs: dict[frozenset[str], tuple[int, int]] = {}
        for ln in fabric.links:
            a, b = self.ids.get(ln.a, -1), self.ids.get(ln.b, -1)
            if a < 0 and b < 0:
                raise ValueError(f"link {ln} joins two hosts in {fabric.describe()}")
            ab = self._add(a, ln.a_port, b, ln.b_port)
            ba = self._add(b, ln.b_port, a, ln.a_port)
            self._pairs[frozenset((ln.a, ln.b))] = (ab, ba)
            if a >= 0 and b >= 0:
                self.adjacency[a].append((ab, b))
                self.adjacency[b].append((ba, a))
            elif a < 0:
                self.hosts[ln.a] = HostAttachment(b, ab, ba)
            else:
                self.hosts[ln.b] = HostAttachment(a, ba, ab)
        for adj in self.adjacency:
            adj.sort(key=lambda item: self.egress_port[item[0]])
        self._hops: dict[tuple[int, int], PathHop] = {}

    def _add(self, src: int, src_port: int, dst: int, dst_port: int) -> int:
        self.src.append(src)
        self.dst.append(dst)
        self.egress_port.append(src_port)
        self.ingress_port.append(dst_port)
        return len(self.src) - 1

    @property
    def link_count(self) -> int:
        return len(self.src)

    def host(self, name: str) -> HostAttachment:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no host named {name!r} in {self.fabric.describe()}") from None

    def switch_id(self, name: str) -> int:
        try:
            return self.ids[name]
        except KeyError:
            raise KeyError(f"no switch named {name!r} in {self.fabric.describe()}") from None

    def links_between(self, a: str, b: str) -> tuple[int, int]:
        """The directed links a->b and b->a."""
        try:
            ab, ba = self._pairs[frozenset((a, b))]
        except KeyError:
            raise KeyError(f"no link between {a!r} and {b!r} in {self.fabric.describe()}") from None
        return (ab, ba) if self.src[ab] == self.ids.get(a, -1) else (ba, ab)

    def describe_link(self, link: int) -> str:
        def end(i: int) -> str:
            return self.names[i] if i >= 0 else "host"
        return f"{end(self.src[link])}:{self.egress_port[link]}->{end(self.dst[link])}:{self.ingress_port[link]}"

    def hops(self, path: Sequence[int]) -> tuple[PathHop, ...]:
        """The switches a path (host uplink first, host downlink last) crosses, with the port
        each is entered by and the port it leaves by."""
        hops = []
        for i in range(len(path) - 1):
            pair = (path[i], path[i + 1])
            hop = self._hops.get(pair)
            if hop is None:
                sw = self.dst[path[i]]
                if sw < 0 or self.src[path[i + 1]] != sw:
                    raise ValueError(f"links {self.describe_link(path[i])} and "
                                     f"{self.describe_link(path[i + 1])} do not meet at a switch")
                hop = PathHop(self.names[sw], self.device_ids[sw], self.ingress_port[path[i]],
                              self.egress_port[path[i + 1]])
                self._hops[pair] = hop
            hops.append(hop)
        return tuple(hops)
