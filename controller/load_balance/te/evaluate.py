"""How good a set of paths is: link loads and the rates flows would really get.

`link_loads` sums the demands on every directed link (a load above 1.0 is a collision: the link
is asked for more than it carries). `max_min_rates` is what the flows would get from a fair
transport on those paths: progressive filling (every unfrozen flow's rate grows at the same pace;
a flow freezes when it reaches its demand or when a link it crosses fills up). The sum of those
rates over the sum of the demands is the fraction of the demanded bandwidth the paths deliver
(for a permutation of full-rate flows: the fraction of bisection bandwidth).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from controller.load_balance.te.flows import Flow
from controller.load_balance.te.placement import LINK_CAPACITY

_EPS = 1e-9


@dataclass(frozen=True)
class LoadSummary:
    flows: int
    max_load: float            # largest sum of demands on one directed link
    overloaded_links: int      # links whose demands exceed their capacity
    throughput: float          # sum of the max-min fair rates
    demand: float              # sum of the demands

    @property
    def fraction(self) -> float:
        """Delivered over demanded bandwidth (1.0: every flow gets its demand)."""
        return self.throughput / self.demand if self.demand else 1.0


def link_loads(paths: Mapping[Flow, Sequence[int]], demands: Mapping[Flow, float],
               link_count: int) -> list[float]:
    loads = [0.0] * link_count
    for flow, links in paths.items():
        d = demands[flow]
        for link in links:
            loads[link] += d
    return loads


def max_min_rates(paths: Mapping[Flow, Sequence[int]], demands: Mapping[Flow, float],
                  link_count: int, capacity: float = LINK_CAPACITY) -> dict[Flow, float]:
    """Each flow's max-min fair rate on its path, capped by its demand."""
    flows = list(paths)
    if not flows:
        return {}
    flow_of = np.fromiter((i for i, f in enumerate(flows) for _ in paths[f]), dtype=np.int64)
    link_of = np.fromiter((link for f in flows for link in paths[f]), dtype=np.int64)
    demand = np.array([demands[f] for f in flows], dtype=float)
    rate = np.zeros(len(flows))
    frozen = np.zeros(len(flows), dtype=bool)
    room = np.full(link_count, capacity, dtype=float)
    while not frozen.all():
        active = ~frozen[flow_of]
        users = np.bincount(link_of[active], minlength=link_count)
        busy = users > 0
        step = min((room[busy] / users[busy]).min(), (demand - rate)[~frozen].min())
        rate[~frozen] += step
        room -= step * users
        full = busy & (room <= _EPS)
        stop = np.zeros(len(flows), dtype=bool)
        stop[flow_of[active & full[link_of]]] = True
        frozen |= stop | (demand - rate <= _EPS)
    return {f: float(r) for f, r in zip(flows, rate)}


def summarize(paths: Mapping[Flow, Sequence[int]], demands: Mapping[Flow, float],
              link_count: int, capacity: float = LINK_CAPACITY) -> LoadSummary:
    loads = link_loads(paths, demands, link_count)
    rates = max_min_rates(paths, demands, link_count, capacity)
    return LoadSummary(
        flows=len(paths),
        max_load=max(loads, default=0.0),
        overloaded_links=sum(1 for x in loads if x > capacity + _EPS),
        throughput=sum(rates.values()),
        demand=sum(demands[f] for f in paths),
    )
