"""Hedera's demand estimation: the rate each flow would get if only the hosts' NICs limited it.

A TCP flow's measured rate says little about what it wants: it is held back by whatever
congested it. Hedera (NSDI'10, Figure 7) estimates the *natural* demand instead, the max-min fair
share of every flow in a non-blocking network where only the sending and receiving host links
(capacity 1.0 each, all rates here are fractions of the host link) constrain it:

* sender pass: each host splits what its converged flows leave of its link equally among its
  other flows;
* receiver pass: a host receiving more than 1.0 in total limits its flows: those below the
  equal share keep their demand, the rest (repeatedly, as the share grows) get the equal share of
  what is left, and become converged;

repeated until no demand changes. The result is feasible (every host sends and receives at most
1.0) and max-min fair for the NIC constraints.
"""
from __future__ import annotations

from typing import Sequence

from controller.load_balance.te.flows import Flow

_CHANGE = 1e-12   # demands closer than this are the same (floating-point noise is not a change)


def estimate_demands(flows: Sequence[Flow]) -> dict[Flow, float]:
    """Each flow's estimated demand, as a fraction of the host link's capacity (0 < d <= 1)."""
    index: dict[Flow, int] = {}
    by_src: dict[str, list[int]] = {}
    by_dst: dict[str, list[int]] = {}
    for i, flow in enumerate(flows):
        if flow in index:
            raise ValueError(f"flow {flow} is listed twice for demand estimation")
        index[flow] = i
        by_src.setdefault(flow.src_host, []).append(i)
        by_dst.setdefault(flow.dst_host, []).append(i)
    demand = [0.0] * len(flows)
    converged = [False] * len(flows)
    senders, receivers = list(by_src.values()), list(by_dst.values())

    # A few rounds suffice in practice; the bound turns a bug into an error, not an endless loop.
    for _ in range(2 * len(flows) + 10):
        changed = False
        for group in senders:
            changed |= _sender_pass(group, demand, converged)
        for group in receivers:
            changed |= _receiver_pass(group, demand, converged)
        if not changed:
            return {flow: demand[i] for flow, i in index.items()}
    raise RuntimeError(f"demand estimation of {len(flows)} flows did not converge")


def _sender_pass(group: list[int], demand: list[float], converged: list[bool]) -> bool:
    fixed = 0.0
    free = []
    for i in group:
        if converged[i]:
            fixed += demand[i]
        else:
            free.append(i)
    if not free:
        return False
    share = max(0.0, 1.0 - fixed) / len(free)
    return _assign(free, share, demand)


def _receiver_pass(group: list[int], demand: list[float], converged: list[bool]) -> bool:
    if sum(demand[i] for i in group) <= 1.0 + _CHANGE:
        return False
    limited = group
    taken = 0.0                       # what the flows below the share keep
    share = 1.0 / len(limited)
    while True:
        below = [i for i in limited if demand[i] < share]
        if not below:
            break
        taken += sum(demand[i] for i in below)
        limited = [i for i in limited if demand[i] >= share]
        share = (1.0 - taken) / len(limited)  # limited is not empty: their sum exceeds the rest
    for i in limited:
        converged[i] = True
    return _assign(limited, share, demand)


def _assign(indices: list[int], value: float, demand: list[float]) -> bool:
    changed = False
    for i in indices:
        if abs(demand[i] - value) > _CHANGE:
            changed = True
        demand[i] = value
    return changed
