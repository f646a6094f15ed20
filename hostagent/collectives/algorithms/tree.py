"""NCCL's double binary tree. Tree 0 is the binary tree NCCL builds on rank numbers (a rank's
parent clears its lowest set bit and sets the next one up); tree 1 is tree 0 mirrored (even n) or
shifted by one (odd n), so a rank that is a leaf in one tree is inner in the other and every rank
sends and receives about one buffer in total. all_reduce sends each half of the buffer up one tree
and back down it, pipelined in pieces; broadcast and reduce use tree 0 re-rooted at the root."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.arrays import ReduceOp, combine
from hostagent.collectives.links import Link, pieces

PIPE_BYTES = 8 << 10  # a piece moves on as soon as it is in: small enough to pipeline over slow links


def btree_parent(n: int, rank: int) -> int:
    """Rank's parent in NCCL's binary tree over 0..n-1 (root 0: -1)."""
    if rank == 0:
        return -1
    bit = 1
    while not bit & rank:
        bit <<= 1
    up = (rank ^ bit) | (bit << 1)
    return up if up < n else rank ^ bit


def dtree_parent(n: int, tree: int, rank: int) -> int:
    if tree == 0:
        return btree_parent(n, rank)
    if n % 2 == 0:  # mirrored
        p = btree_parent(n, n - 1 - rank)
        return -1 if p < 0 else n - 1 - p
    p = btree_parent(n, (rank - 1) % n)  # shifted
    return -1 if p < 0 else (p + 1) % n


def _family(n: int, me: int, parent_of) -> tuple[int, list[int]]:
    return parent_of(me), [r for r in range(n) if r != me and parent_of(r) == me]


def all_reduce(link: Link, x: np.ndarray, op: ReduceOp) -> np.ndarray:
    n, buf = link.size, x.copy()
    half = buf.size // 2
    halves = [(0, half), (half, buf.size)]
    trees = [_family(n, link.me, lambda r, t=t: dtree_parent(n, t, r)) for t in (0, 1)]
    work = [(t, lo + a, lo + b) for t, (lo, hi) in enumerate(halves) for a, b in pieces(hi - lo, buf.itemsize, PIPE_BYTES)]
    for k, (t, lo, hi) in enumerate(work):  # up: children's partial sums, ours, to the parent
        parent, children = trees[t]
        for c in children:
            buf[lo:hi] = combine(op, buf[lo:hi], link.recv(c, 2 * k, hi - lo))
        if parent >= 0:
            link.send(parent, 2 * k, buf[lo:hi])
        else:
            for c in children:
                link.send(c, 2 * k + 1, buf[lo:hi])
    for k, (t, lo, hi) in enumerate(work):  # down: the total from the parent to the children
        parent, children = trees[t]
        if parent >= 0:
            buf[lo:hi] = link.recv(parent, 2 * k + 1, hi - lo)
            for c in children:
                link.send(c, 2 * k + 1, buf[lo:hi])
    return buf


def _rooted(link: Link, root: int) -> tuple[int, list[int]]:
    """Tree 0 on ranks renumbered so that root is 0; parent and children as link indices."""
    n = link.size
    parent, children = _family(n, (link.me - root) % n, lambda v: btree_parent(n, v))
    return (-1 if parent < 0 else (parent + root) % n), [(c + root) % n for c in children]


def broadcast(link: Link, x: np.ndarray, root: int) -> np.ndarray:
    parent, children = _rooted(link, root)
    buf = x.copy()
    for k, (lo, hi) in enumerate(pieces(buf.size, buf.itemsize, PIPE_BYTES)):
        if parent >= 0:
            buf[lo:hi] = link.recv(parent, k, hi - lo)
        for c in children:
            link.send(c, k, buf[lo:hi])
    return buf


def reduce(link: Link, x: np.ndarray, op: ReduceOp, root: int) -> np.ndarray | None:
    parent, children = _rooted(link, root)
    buf = x.copy()
    for k, (lo, hi) in enumerate(pieces(buf.size, buf.itemsize, PIPE_BYTES)):
        for c in children:
            buf[lo:hi] = combine(op, buf[lo:hi], link.recv(c, k, hi - lo))
        if parent >= 0:
            link.send(parent, k, buf[lo:hi])
    return buf if parent < 0 else None
