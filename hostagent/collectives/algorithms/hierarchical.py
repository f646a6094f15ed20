"""Hierarchical all_reduce for ranks in groups given by the topology (the hosts under one edge
switch, the GPUs of one server).

Groups of equal size g (G of them): bandwidth-optimal, as NCCL's tree of rings does it -
reduce_scatter inside each group (rank j of a group ends with block j of its group's sum), an
all_reduce of block j among the j-th ranks of all groups, all_gather inside each group. Every rank
sends 2(g-1)/g + 2(G-1)/(G g) = 2(n-1)/n of the buffer, as in the ring, but only the block
all_reduce, 2(G-1)/G of a g-th of the buffer, crosses the upper tiers.

Groups of different sizes: reduce inside each group to its first member over the group's tree,
all_reduce among those leaders (ring for large buffers, halving-doubling for small ones), then
broadcast inside each group. Only the leaders' traffic crosses the upper tiers."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.algorithms import halving_doubling, ring, tree
from hostagent.collectives.arrays import ReduceOp
from hostagent.collectives.links import Link, split_bounds

ACROSS_RING_BYTES = 256 << 10  # below it, halving-doubling among the groups (fewer steps)


def all_reduce(link: Link, x: np.ndarray, op: ReduceOp, groups: list[list[int]]) -> np.ndarray:
    """`groups` partitions the link's indices; every member passes the same groups."""
    if len({len(g) for g in groups}) == 1:
        return _blocks(link, x, op, groups)
    return _leaders(link, x, op, groups)


def _across(x: np.ndarray):
    return ring if x.nbytes >= ACROSS_RING_BYTES else halving_doubling


def _blocks(link: Link, x: np.ndarray, op: ReduceOp, groups: list[list[int]]) -> np.ndarray:
    mine = next(g for g in groups if link.me in g)
    j = mine.index(link.me)
    inside = link.sub(mine)
    across = link.sub([g[j] for g in groups])  # created by every rank, in the same order
    buf = x.copy()
    bounds = split_bounds(buf.size, len(mine))
    ring.reduce_scatter_blocks(inside, buf, op, bounds)
    lo, hi = bounds[j], bounds[j + 1]
    if len(groups) > 1:
        buf[lo:hi] = _across(buf[lo:hi]).all_reduce(across, buf[lo:hi], op)
    ring.all_gather_blocks(inside, buf, bounds, step0=inside.size)
    return buf


def _leaders(link: Link, x: np.ndarray, op: ReduceOp, groups: list[list[int]]) -> np.ndarray:
    mine = next(g for g in groups if link.me in g)
    inside = link.sub(mine)
    leaders = link.sub([g[0] for g in groups])  # created by every rank, in the same order
    part = tree.reduce(inside, x, op, 0)
    if link.me == mine[0]:
        part = _across(x).all_reduce(leaders, part, op)
    return tree.broadcast(inside, part if part is not None else x, 0)
