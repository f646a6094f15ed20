"""Source ports chosen with the fabric's hash: flows on disjoint paths, a pair's QPs on distinct ones.

Both are what hosts that know the switches' hash (`HashPaths`) can do without touching a switch:

* `disjoint_ports` (Alibaba HPN's precise path control): among ``tries`` seeded candidate
  source ports a flow, the paths they give, and the flows spread over them by
  `controller.load_balance.spread.balanced`, so flows share a link only where the topology
  leaves no other way;
* `qp_ports` (QP scaling, as Meta's collective library spreads a peer pair over several queue
  pairs): ``qps`` source ports for one pair whose paths differ from each other where the
  fabric has that many paths, found among ``tries`` seeded candidates.

Ports come from the dynamic range (49152-65535), distinct per source host.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Iterable, Sequence

from controller.load_balance.hash_paths import FiveTuple, HashPaths
from controller.load_balance.spread import SEARCH_BUDGET, balanced, link_loads_of

PORTS = (49152, 65535)
DEFAULT_TRIES = 64        # candidate ports per flow: far more than a k=4 fat-tree's 4 paths between pods


def link_loads(paths: HashPaths, flows: Iterable[FiveTuple]) -> Counter:
    """Flows per switch-to-switch link direction."""
    return link_loads_of(paths.links(flow) for flow in flows)


def disjoint_ports(paths: HashPaths, flows: Sequence[FiveTuple], seed: int,
                   tries: int = DEFAULT_TRIES, budget: int = SEARCH_BUDGET) -> list[FiveTuple]:
    """``flows`` with source ports that spread them over the fabric's links (see the module)."""
    rng = random.Random(seed)
    options = []                          # per flow: its candidates' (port, links), one per distinct path
    for flow in flows:
        by_path: dict[tuple, int] = {}
        for sport in _candidates(rng, set(), tries, first=flow.sport):
            by_path.setdefault(paths.links(replace(flow, sport=sport)), sport)
        options.append([(sport, links) for links, sport in by_path.items()])
    choice = balanced(options, [flow.src for flow in flows], budget)
    return [replace(flow, sport=sport) for flow, (sport, _) in zip(flows, choice)]


def qp_ports(paths: HashPaths | None, flow: FiveTuple, qps: int, rng: random.Random, taken: set[int],
             tries: int = DEFAULT_TRIES) -> list[FiveTuple]:
    """``qps`` copies of ``flow`` with their own source ports (the first keeps the flow's), on
    distinct paths where ``paths`` is given and the fabric has that many; ``taken``: the source
    host's ports in use, to which these are added."""
    if qps < 1:
        raise ValueError(f"QP scaling: {qps} queue pairs a peer pair, at least 1")
    taken.add(flow.sport)
    chosen, spare = [flow], []           # spare: candidates on a path already taken
    seen = {paths.path(flow)} if paths is not None else set()
    for sport in _candidates(rng, taken, tries * qps):
        if len(chosen) == qps:
            break
        candidate = replace(flow, sport=sport)
        path = paths.path(candidate) if paths is not None else sport
        (spare if path in seen else chosen).append(candidate)
        seen.add(path)
    chosen += spare[:qps - len(chosen)]
    if len(chosen) < qps:
        raise ValueError(f"{flow.src}: no free source ports left for {qps} queue pairs")
    taken.update(c.sport for c in chosen)
    return chosen


def _candidates(rng: random.Random, taken: set[int], tries: int, first: int | None = None):
    """Up to ``tries`` distinct free ports: ``first`` (if free), then seeded draws."""
    lo, hi = PORTS
    offered: set[int] = set()
    if first is not None and first not in taken:
        offered.add(first)
        yield first
    while len(offered) < min(tries, hi - lo + 1 - len(taken)):
        sport = rng.randint(lo, hi)
        if sport not in taken and sport not in offered:
            offered.add(sport)
            yield sport
