"""Ring algorithms: reduce-scatter then all-gather around the ring (bandwidth-optimal: each rank
sends 2(n-1)/n of the buffer), a pipelined chain for broadcast, reduce-scatter plus gather for reduce."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.arrays import ReduceOp, combine
from hostagent.collectives.links import Link, pieces, split_bounds

PIPE_BYTES = 8 << 10  # a piece moves on as soon as it is in: small enough to pipeline over slow links


def reduce_scatter_blocks(link: Link, buf: np.ndarray, op: ReduceOp, bounds: list[int]) -> None:
    """In place: afterwards buf[bounds[me]:bounds[me+1]] holds the reduction over all members.
    Step s sends block (me-s-1) to the next rank and reduces block (me-s-2) from the previous."""
    n, me = link.size, link.me
    nxt, prv = (me + 1) % n, (me - 1) % n
    for s in range(n - 1):
        out, inc = (me - s - 1) % n, (me - s - 2) % n
        link.send(nxt, s, buf[bounds[out] : bounds[out + 1]])
        lo, hi = bounds[inc], bounds[inc + 1]
        buf[lo:hi] = combine(op, buf[lo:hi], link.recv(prv, s, hi - lo))


def all_gather_blocks(link: Link, buf: np.ndarray, bounds: list[int], step0: int = 0) -> None:
    """In place: block me is ours; afterwards every block is filled."""
    n, me = link.size, link.me
    nxt, prv = (me + 1) % n, (me - 1) % n
    for s in range(n - 1):
        out, inc = (me - s) % n, (me - s - 1) % n
        link.send(nxt, step0 + s, buf[bounds[out] : bounds[out + 1]])
        lo, hi = bounds[inc], bounds[inc + 1]
        buf[lo:hi] = link.recv(prv, step0 + s, hi - lo)


def all_reduce(link: Link, x: np.ndarray, op: ReduceOp) -> np.ndarray:
    buf = x.copy()
    bounds = split_bounds(buf.size, link.size)
    reduce_scatter_blocks(link, buf, op, bounds)
    all_gather_blocks(link, buf, bounds, step0=link.size)
    return buf


def reduce_scatter(link: Link, x: np.ndarray, op: ReduceOp) -> np.ndarray:
    buf = x.copy()
    bounds = split_bounds(buf.size, link.size)
    reduce_scatter_blocks(link, buf, op, bounds)
    return buf[bounds[link.me] : bounds[link.me + 1]].copy()


def all_gather(link: Link, x: np.ndarray) -> np.ndarray:
    m, n = x.size, link.size
    buf = np.empty(m * n, dtype=x.dtype)
    buf[link.me * m : (link.me + 1) * m] = x
    all_gather_blocks(link, buf, [i * m for i in range(n + 1)])
    return buf


def broadcast(link: Link, x: np.ndarray, root: int) -> np.ndarray:
    """A chain root, root+1, ... pipelined in pieces of PIPE_BYTES."""
    n = link.size
    pos = (link.me - root) % n
    buf = x.copy()
    for k, (lo, hi) in enumerate(pieces(buf.size, buf.itemsize, PIPE_BYTES)):
        if pos > 0:
            buf[lo:hi] = link.recv((link.me - 1) % n, k, hi - lo)
        if pos < n - 1:
            link.send((link.me + 1) % n, k, buf[lo:hi])
    return buf


def reduce(link: Link, x: np.ndarray, op: ReduceOp, root: int) -> np.ndarray | None:
    buf = x.copy()
    n = link.size
    bounds = split_bounds(buf.size, n)
    reduce_scatter_blocks(link, buf, op, bounds)
    if link.me != root:
        link.send(root, n, buf[bounds[link.me] : bounds[link.me + 1]])
        return None
    for i in range(n):
        if i != root:
            buf[bounds[i] : bounds[i + 1]] = link.recv(i, n, bounds[i + 1] - bounds[i])
    return buf
