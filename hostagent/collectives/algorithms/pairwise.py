"""Exchanges where every rank talks to every other: all_to_all by pairwise exchange (step s: send
to me+s, receive from me-s, so each step is a permutation and no rank is hot) and the
dissemination barrier (round k: signal me+2^k, wait for me-2^k; ceil(log2 n) rounds)."""

from __future__ import annotations

import numpy as np

from hostagent.collectives.links import Link


def all_to_all(link: Link, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """inputs[j] goes to rank j (sizes may differ); returns what each rank sent us."""
    n, me = link.size, link.me
    out: list[np.ndarray] = [np.empty(0)] * n
    out[me] = inputs[me].copy()
    for s in range(1, n):
        link.send((me + s) % n, s, inputs[(me + s) % n])
        out[(me - s) % n] = link.recv((me - s) % n, s)
    return out


def barrier(link: Link) -> None:
    n, me, k = link.size, link.me, 0
    empty = np.empty(0, dtype=link.dtype)
    while (1 << k) < n:
        link.send((me + (1 << k)) % n, k, empty)
        link.recv((me - (1 << k)) % n, k, 0)
        k += 1
