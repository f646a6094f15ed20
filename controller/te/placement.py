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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from controller.paths import PathHop
from controller.te.flows import Flow
from controller.te.nexthops import PathSpace

LINK_CAPACITY = 1.0
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


def global_first_fit(demands: Mapping[Flow, float], space: PathSpace,
                     keep: Mapping[Flow, Sequence[int]] | None = None,
                     capacity: float = LINK_CAPACITY) -> PlacementResult:
    """Place every flow of ``demands`` (flow -> demand in (0, capacity]) on ``space``."""
    index = space.index
    residual = [capacity] * index.link_count
    for link in space.down:
        residual[link] = -1.0
    placed: dict[Flow, Placement] = {}
    unplaced: list[Flow] = []
    keep = keep or {}
    todo: list[tuple[Flow, float]] = []
    for flow, demand in demands.items():
        if not 0 < demand <= capacity:
            raise ValueError(f"flow {flow} has demand {demand!r}; demands are in (0, {capacity}]")
        links = keep.get(flow)
        if links is not None and all(residual[link] >= demand - _SLACK for link in links):
            placed[flow] = _reserve(flow, demand, tuple(links), residual, space)
        else:
            todo.append((flow, demand))
    todo.sort(key=lambda item: (-item[1], item[0].sort_key()))

    hosts, first_fit = index.hosts, space.first_fit
    for flow, demand in todo:
        try:
            src, dst = hosts[flow.src_host], hosts[flow.dst_host]
        except KeyError as exc:
            raise KeyError(f"flow {flow}: no host named {exc.args[0]!r} in {index.fabric.describe()}") from None
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
