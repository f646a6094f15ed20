"""Rabenseifner's recursive halving (reduce-scatter) and doubling (all-gather) for any n.

With p the largest power of two <= n and r = n - p, the first 2r ranks fold in pairs before the
exchange: even rank 2i hands its buffer to odd rank 2i+1 (which reduces it) and waits for the
result; the p remaining ranks take new numbers 0..p-1 and run the power-of-two algorithm, where
at distance d = p/2, p/4, ..., 1 a rank swaps half of its range with new rank (me XOR d)."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.arrays import ReduceOp, combine
from hostagent.collectives.links import Link, split_bounds

FOLD, UNFOLD, RS, AG, SCATTER = 0, 1, 2, 100, 200  # step numbers of the phases


class Fold:
    def __init__(self, n: int, me: int) -> None:
        self.p = 1 << (n.bit_length() - 1)
        self.r = n - self.p
        self.me = me
        self.idle = me < 2 * self.r and me % 2 == 0  # folded into me + 1
        self.new = None if self.idle else (me // 2 if me < 2 * self.r else me - self.r)

    def old(self, new: int) -> int:
        return 2 * new + 1 if new < self.r else new + self.r

    def members(self, new: int) -> list[int]:
        """The original ranks new rank `new` stands for."""
        o = self.old(new)
        return [o - 1, o] if new < self.r else [o]


def _reduce_scatter(link: Link, buf: np.ndarray, op: ReduceOp, f: Fold, bounds: list[int]) -> tuple[int, int]:
    """Recursive halving over the p new ranks; returns the block range (lo, hi) we hold reduced."""
    lo, hi, d, step = 0, f.p, f.p // 2, RS
    while d >= 1:
        partner = f.old(f.new ^ d)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if not f.new & d else ((mid, hi), (lo, mid))
        link.send(partner, step, buf[bounds[give[0]] : bounds[give[1]]])
        a, b = bounds[keep[0]], bounds[keep[1]]
        buf[a:b] = combine(op, buf[a:b], link.recv(partner, step, b - a))
        lo, hi = keep
        d //= 2
        step += 1
    return lo, hi


def _fold_in(link: Link, buf: np.ndarray, op: ReduceOp, f: Fold) -> None:
    if f.idle:
        link.send(link.me + 1, FOLD, buf)
    elif link.me < 2 * f.r:
        buf[:] = combine(op, buf, link.recv(link.me - 1, FOLD, buf.size))


def all_reduce(link: Link, x: np.ndarray, op: ReduceOp) -> np.ndarray:
    f, buf = Fold(link.size, link.me), x.copy()
    _fold_in(link, buf, op, f)
    if f.idle:
        return link.recv(link.me + 1, UNFOLD, buf.size)
    bounds = split_bounds(buf.size, f.p)
    lo, hi = _reduce_scatter(link, buf, op, f, bounds)
    d, step = 1, AG
    while d < f.p:  # recursive doubling: swap what we hold with new rank (me XOR d)
        partner = f.old(f.new ^ d)
        link.send(partner, step, buf[bounds[lo] : bounds[hi]])
        plo, phi = (hi, hi + (hi - lo)) if not f.new & d else (lo - (hi - lo), lo)
        buf[bounds[plo] : bounds[phi]] = link.recv(partner, step, bounds[phi] - bounds[plo])
        lo, hi = min(lo, plo), max(hi, phi)
        d *= 2
        step += 1
    if link.me < 2 * f.r:
        link.send(link.me - 1, UNFOLD, buf)
    return buf


def reduce_scatter(link: Link, x: np.ndarray, op: ReduceOp) -> np.ndarray:
    """Rank i ends with block i of n (split_bounds); the p-way halving leaves the reduced vector
    spread over the new ranks in p blocks, which are then sent on to the n owners."""
    n, f, buf = link.size, Fold(link.size, link.me), x.copy()
    _fold_in(link, buf, op, f)
    pb, nb = split_bounds(buf.size, f.p), split_bounds(buf.size, n)
    mine = np.empty(nb[link.me + 1] - nb[link.me], dtype=buf.dtype)
    held = (0, 0)
    if not f.idle:
        lo, hi = _reduce_scatter(link, buf, op, f, pb)
        held = (pb[lo], pb[hi])
        for owner in range(n):  # our reduced range, cut along the owners' blocks
            a, b = max(held[0], nb[owner]), min(held[1], nb[owner + 1])
            if a < b and owner != link.me:
                link.send(owner, SCATTER, buf[a:b])
            elif a < b:
                mine[a - nb[link.me] : b - nb[link.me]] = buf[a:b]
    for new in range(f.p):  # who holds which part of our block
        a, b = max(pb[new], nb[link.me]), min(pb[new + 1], nb[link.me + 1])
        holder = f.old(new)
        if a < b and holder != link.me:
            mine[a - nb[link.me] : b - nb[link.me]] = link.recv(holder, SCATTER, b - a)
    return mine


def all_gather(link: Link, x: np.ndarray) -> np.ndarray:
    """Recursive doubling over the sets of blocks each new rank holds."""
    n, m, f = link.size, x.size, Fold(link.size, link.me)
    out = np.empty(n * m, dtype=x.dtype)
    out[link.me * m : (link.me + 1) * m] = x
    if f.idle:
        link.send(link.me + 1, FOLD, x)
        return link.recv(link.me + 1, UNFOLD, n * m)
    if link.me < 2 * f.r:
        out[(link.me - 1) * m : link.me * m] = link.recv(link.me - 1, FOLD, m)
    held = [f.members(v) for v in range(f.p)]  # original blocks each new rank holds, as it grows
    d, step = 1, AG
    while d < f.p:
        partner_new = f.new ^ d
        link.send(f.old(partner_new), step, np.concatenate([out[i * m : (i + 1) * m] for i in held[f.new]]))
        theirs = held[partner_new]
        got = link.recv(f.old(partner_new), step, len(theirs) * m)
        for j, i in enumerate(theirs):
            out[i * m : (i + 1) * m] = got[j * m : (j + 1) * m]
        held = [sorted(held[v] + held[v ^ d]) for v in range(f.p)]
        d *= 2
        step += 1
    if link.me < 2 * f.r:
        link.send(link.me - 1, UNFOLD, out)
    return out
