"""Hierarchical all_reduce for ranks in groups given by the topology (the hosts under one edge
switch, the GPUs of one server): reduce inside each group to its first member over the group's
tree, all_reduce among those leaders (ring for large buffers, halving-doubling for small ones),
then broadcast inside each group. Only the leaders' traffic crosses the upper tiers."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.algorithms import halving_doubling, ring, tree
from hostagent.collectives.arrays import ReduceOp
from hostagent.collectives.links import Link

LEADERS_RING_BYTES = 256 << 10


def all_reduce(link: Link, x: np.ndarray, op: ReduceOp, groups: list[list[int]]) -> np.ndarray:
    """`groups` partitions the link's indices; every member passes the same groups."""
    mine = next(g for g in groups if link.me in g)
    inside = link.sub(mine)
    leaders = link.sub([g[0] for g in groups])  # created by every rank, in the same order
    part = tree.reduce(inside, x, op, 0)
    if link.me == mine[0]:
        across = ring if x.nbytes >= LEADERS_RING_BYTES else halving_doubling
        part = across.all_reduce(leaders, part, op)
    return tree.broadcast(inside, part if part is not None else x, 0)
