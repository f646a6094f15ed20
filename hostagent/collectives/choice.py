"""What `algo="auto"` runs, from the buffer's size and the topology's groups (the same inputs on
every rank, so every rank chooses the same). Latency-bound sizes take the algorithms with
O(log n) steps, bandwidth-bound sizes the ring (each rank sends 2(n-1)/n of the buffer, the
minimum); a group with an in-network aggregation job sends large all_reduces through the
switches (each rank sends the buffer once). The thresholds follow benchmarks/collectives.py on the
k=4 fat-tree (8 ranks, 400-packet/s links): halving-doubling led all_reduce up to 8 KiB and the
ring from 8 KiB on, the tree never (it sends every byte over log n hops one after another); for
reduce the ring led from 8 KiB, for broadcast the tree everywhere. Hierarchical (groups of equal
size: reduce_scatter inside, all_reduce across, all_gather inside) sends what the ring sends but
keeps most of it under the edge switches, so it is taken for mid sizes when ranks share racks."""

from __future__ import annotations

import ipaddress

import numpy as np

SMALL_BYTES = 8 << 10
MEDIUM_BYTES = 512 << 10
IN_NETWORK_BYTES = 64 << 10


def choose(operation: str, x: np.ndarray, world: int, groups: list[list[int]], in_network: bool) -> str:
    size = x.nbytes
    if operation == "all_reduce":
        if in_network and size >= IN_NETWORK_BYTES and x.dtype.kind in "fi":
            return "in_network"
        if size < SMALL_BYTES:
            return "halving_doubling"
        return "hierarchical" if size < MEDIUM_BYTES and _racks(groups) else "ring"
    if operation in ("reduce_scatter", "all_gather"):
        return "halving_doubling" if size * world < MEDIUM_BYTES else "ring"
    if operation == "broadcast":
        return "tree"
    if operation == "reduce":
        return "tree" if size < SMALL_BYTES // 2 else "ring"
    return "pairwise"


def _racks(groups: list[list[int]]) -> bool:
    """More than one group and some group with several ranks: a tier worth keeping traffic under."""
    return len(groups) > 1 and any(len(g) > 1 for g in groups)


def groups_by_subnet(peers: list[tuple[str, int]], prefix: int = 24) -> list[list[int]]:
    """Ranks whose addresses share a /prefix (on the lab's fat-trees: the hosts of one edge switch)."""
    groups: dict[str, list[int]] = {}
    for rank, (ip, _port) in enumerate(peers):
        try:
            key = str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))
        except ValueError:
            key = ip  # a host name: a group of its own
        groups.setdefault(key, []).append(rank)
    return list(groups.values())
