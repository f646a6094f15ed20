"""Global First Fit (Hedera, NSDI'10): each large flow goes on the first of its equal-cost
paths whose every link still has room for the flow's demand; the flow's demand is then reserved
on those links. A flow that fits nowhere is left to the switches' ECMP and reported.

Capacities and demands are fractions of the host link's rate: every directed link (each
direction of a cable, host links included) has ``capacity`` (1.0: all links of the project's
fat-trees and leaf-spines run at the host rate). The paths tried are `PathSpace.paths` order
(port order at every switch); `PathSpace.first_fit` finds the first with room without listing
the others (see there), so a flow costs a few dozen link checks even on a k=32 fat-tree.

Order: flows placed in an earlier round and still large keep their path when it still has room
(`keep`: no reordering for a flow that was doing fine); the others are placed largest demand
first (first-fit decreasing; ties by 5-tuple, so a result never depends on dict order).

Restarts (beyond Hedera): greedy first fit strands flows that another order would fit (a k=4
permutation at full demand leaves 1-3 of 16 on ECMP in about half the seeds, where they collide
with placed flows). While some flow is stranded, first fit runs again over the flows to place
in shuffled orders (largest demand first still; `random.Random(attempt)`, so results are
reproducible), at most `RESTARTS` times and `RESTART_WORK` flow placements in all, and the
result with the fewest stranded flows wins. Kept flows are never moved by a restart; when
keeping them strands a flow, a placement from scratch is tried too and wins if it strands fewer
(the flows that change path then see some reordering once).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from controller.paths import PathHop
from controller.load_balance.te.flows import Flow
from controller.load_balance.te.nexthops import PathSpace

LINK_CAPACITY = 1.0
RESTARTS = 64            # at most this many shuffled orders are tried while some flow is stranded
RESTART_WORK = 10_000    # ... and at most this many flow placements in all (bounds big fabrics)
_SLACK = 1e-9   # a demand fits when it exceeds the room left by no more than rounding noise


@dataclass(frozen=True)
class Placement:
    """A flow's path: directed link ids (host uplink first, host downlink last) and the switch
    hops they make, each with the egress port an override entry pins."""

    flow: Flow
    demand: float
    links: tuple[int, ...]
    hops: tuple[PathHop, ...]


@dataclass
class PlacementResult:
    placed: dict[Flow, Placement]
    unplaced: list[Flow]           # fit on no path: left on ECMP
    residual: list[float]          # room left per directed link (negative: link down)
    restarts: int = 0              # the shuffled order this result came from (0: the canonical one)


def global_first_fit(demands: Mapping[Flow, float], space: PathSpace,
                     keep: Mapping[Flow, Sequence[int]] | None = None,
                     capacity: float = LINK_CAPACITY, restarts: int = RESTARTS) -> PlacementResult:
    """Place every flow of ``demands`` (flow -> demand in (0, capacity]) on ``space``."""
    index = space.index
    residual = [capacity] * index.link_count
    for link in space.down:
        residual[link] = -1.0
    kept: dict[Flow, Placement] = {}
    keep = keep or {}
    todo: list[tuple[Flow, float]] = []
    for flow, demand in demands.items():
        if not 0 < demand <= capacity:
            raise ValueError(f"flow {flow} has demand {demand!r}; demands are in (0, {capacity}]")
        if flow.src_host not in index.hosts or flow.dst_host not in index.hosts:
            missing = flow.src_host if flow.src_host not in index.hosts else flow.dst_host
            raise KeyError(f"flow {flow}: no host named {missing!r} in {index.fabric.describe()}")
        links = keep.get(flow)
        if links is not None and all(residual[link] >= demand - _SLACK for link in links):
            kept[flow] = _reserve(flow, demand, tuple(links), residual, space)
        else:
            todo.append((flow, demand))
    todo.sort(key=lambda item: (-item[1], item[0].sort_key()))

    best = _first_fit_all(todo, kept, residual, space)
    tries = min(restarts, RESTART_WORK // max(1, len(todo)))
    for attempt in range(1, tries + 1):
        if not best.unplaced:
            break
        rng = random.Random(attempt)
        order = sorted(todo, key=lambda item: (-item[1], rng.random()))
        result = _first_fit_all(order, kept, residual, space)
        result.restarts = attempt
        if len(result.unplaced) < len(best.unplaced):
            best = result
    if kept and best.unplaced:
        # Kept paths stranded a flow: a placement from scratch may fit them all (moving some).
        fresh = global_first_fit(demands, space, capacity=capacity, restarts=restarts)
        if len(fresh.unplaced) < len(best.unplaced):
            best = fresh
    return best


def _first_fit_all(todo: list[tuple[Flow, float]], kept: dict[Flow, Placement], residual: list[float],
                   space: PathSpace) -> PlacementResult:
    """First fit of ``todo`` in its order, after the ``kept`` placements (whose reservations
    ``residual`` holds; it is copied, not changed)."""
    residual = list(residual)
    placed = dict(kept)
    unplaced: list[Flow] = []
    hosts, first_fit = space.index.hosts, space.first_fit
    for flow, demand in todo:
        src, dst = hosts[flow.src_host], hosts[flow.dst_host]
        need = demand - _SLACK
        middle = None
        if residual[src.uplink] >= need and residual[dst.downlink] >= need:
            middle = first_fit(src.switch, dst.switch, need, residual)
        if middle is None:
            unplaced.append(flow)
        else:
            placed[flow] = _reserve(flow, demand, (src.uplink, *middle, dst.downlink), residual, space)
    return PlacementResult(placed, unplaced, residual)


def _reserve(flow: Flow, demand: float, links: tuple[int, ...], residual: list[float],
             space: PathSpace) -> Placement:
    for link in links:
        residual[link] -= demand
    return Placement(flow, demand, links, space.index.hops(links))
