"""Ranks on the fabric's hosts: tensor-parallel groups kept inside one server.

A rail-optimised fabric (`topologies.ai_fabrics.rail_optimised`) has servers: host ``s{s}g{g}``
is GPU g of server s, on rail switch g. Every other fabric's servers are taken to be the hosts
under one edge switch (a fat-tree's edge, a leaf, a dragonfly router). Ranks are dealt in order
(tensor-parallel fastest, `aifabric.workloads.parallelism`) to the servers' hosts, a whole TP
group to one server: a server with room for part of a group only leaves those hosts unused. On
a rail fabric rank r of a server therefore sits on rail r mod GPUs, so data-parallel peers with
the same local index meet on one rail switch. A TP group larger than every server is spread over
consecutive hosts, and the placement says so in ``notes``.
"""
from __future__ import annotations

from dataclasses import dataclass

from topologies.fabric import Fabric

from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.parallelism import Parallelism


@dataclass(frozen=True)
class Placement:
    hosts: tuple[str, ...]          # rank -> host name
    servers: tuple[str, ...]        # rank -> its server (rail fabric: "s<N>"; else: the edge switch)
    fabric: str                     # Fabric.describe()
    notes: tuple[str, ...] = ()

    def host(self, rank: int) -> str:
        return self.hosts[rank]

    def server(self, rank: int) -> str:
        return self.servers[rank]

    def to_dict(self) -> dict:
        return {"fabric": self.fabric, "hosts": list(self.hosts), "servers": list(self.servers),
                "notes": list(self.notes)}


def servers_of(fabric: Fabric) -> list[tuple[str, list[str]]]:
    """(server name, its hosts in order) for every server of ``fabric``."""
    if fabric.kind == "rail_optimised":
        n, gpus = fabric.params["servers"], fabric.params["gpus"]
        return [(f"s{s}", [fabric.host(f"s{s}g{g}").name for g in range(gpus)]) for s in range(n)]
    by_switch: dict[str, list[str]] = {}
    for host in fabric.hosts:
        by_switch.setdefault(host.switch, []).append(host.name)
    return list(by_switch.items())


def place(fabric: Fabric, parallelism: Parallelism) -> Placement:
    """Every rank of ``parallelism`` on a host of ``fabric`` (see the module doc)."""
    tp, world = parallelism.tp, parallelism.world
    servers = servers_of(fabric)
    notes: list[str] = []
    if tp <= max(len(hosts) for _, hosts in servers):
        slots = [[(name, h) for h in hosts[i:i + tp]] for name, hosts in servers
                 for i in range(0, len(hosts) - tp + 1, tp)]
    else:
        flat = [(name, h) for name, hosts in servers for h in hosts]
        slots = [flat[i:i + tp] for i in range(0, len(flat) - tp + 1, tp)]
        notes.append(f"parallelism.tp={tp} exceeds the largest server of {fabric.describe()} "
                     f"({max(len(h) for _, h in servers)} hosts): each TP group spans servers")
    groups = world // tp
    if groups > len(slots):
        raise WorkloadError(f"parallelism: DP*TP*PP = {world} ranks, but {fabric.describe()} holds "
                            f"{len(slots) * tp} of them ({len(fabric.hosts)} hosts, TP groups of {tp} "
                            "kept whole inside a server)")
    chosen = [slot for group in slots[:groups] for slot in group]
    return Placement(tuple(h for _, h in chosen), tuple(s for s, _ in chosen), fabric.describe(), tuple(notes))
