"""A switch's uplinks: the ports whose spread load balancing decides.

A switch's tier is its distance (in switch hops) from the nearest switch with hosts: edges and
leaves are tier 0, aggregation switches and spines 1, cores 2. An uplink is a port towards a
switch of a higher tier, so the ports a load-balancing decision chooses among (ECMP, spraying,
flowlets, TE pins) on the way up. Topologies without tiers above the hosts' switches (a
dragonfly, where every router has hosts) have no uplinks.

The exporter serves them (``aifabric_port_uplink``) so that a dashboard joins them with the port
rates: a switch's uplink imbalance is its busiest uplink's rate over their mean (1: a perfect
spread; ``n``, the number of uplinks: everything on one).
"""
from __future__ import annotations

from collections import deque

from topologies.fabric import Fabric


def switch_tiers(fabric: Fabric) -> dict[str, int]:
    """Switch name -> tier (hops from the nearest switch with hosts); switches no such switch
    reaches are left out."""
    names = {sw.name for sw in fabric.switches}
    tiers = {name: 0 for name in sorted(names) if fabric.hosts_of(name)}
    queue = deque(tiers)
    while queue:
        name = queue.popleft()
        for neighbor in fabric.ports_of(name).values():
            if neighbor in names and neighbor not in tiers:
                tiers[neighbor] = tiers[name] + 1
                queue.append(neighbor)
    return tiers


def uplinks(fabric: Fabric) -> dict[str, dict[int, str]]:
    """Switch name -> {port: neighbour} of its uplinks (switches without one are left out)."""
    tiers = switch_tiers(fabric)
    out: dict[str, dict[int, str]] = {}
    for name, tier in tiers.items():
        up = {port: peer for port, peer in fabric.ports_of(name).items() if tiers.get(peer, -1) > tier}
        if up:
            out[name] = up
    return dict(sorted(out.items()))

