"""Source ports chosen with the fabric's hash: flows on disjoint paths, a pair's QPs on distinct ones.

Both are what hosts that know the switches' hash (`HashPaths`) can do without touching a switch:

* `disjoint_ports` (Alibaba HPN's precise path control): among ``tries`` seeded candidate
  source ports a flow, the paths they give; each flow in turn on the path whose busiest link
  direction carries the fewest flows already placed, then a depth-first search for a
  placement whose busiest link carries fewer (within ``budget`` steps), so flows share a link
  only where the topology leaves no other way (or the search gave up, which large fabrics show);
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

PORTS = (49152, 65535)
DEFAULT_TRIES = 64        # candidate ports per flow: far more than a k=4 fat-tree's 4 paths between pods
SEARCH_BUDGET = 200_000   # candidate placements tried in the search for a better one than greedy's


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
    choice = _greedy(flows, options)
    worst = max(link_loads_of(c[1] for c in choice).values(), default=0)
    for limit in range(1, worst):        # a placement whose busiest link carries fewer flows
        found = _search(flows, options, limit, budget)
        if found is not None:
            choice = found
            break
    return [replace(flow, sport=sport) for flow, (sport, _) in zip(flows, choice)]


def link_loads_of(link_sets: Iterable[tuple]) -> Counter:
    loads: Counter = Counter()
    for links in link_sets:
        loads.update(links)
    return loads


def _greedy(flows: Sequence[FiveTuple], options: list) -> list[tuple[int, tuple]]:
    """Each flow in turn on its least loaded candidate."""
    used: dict[str, set[int]] = {flow.src: set() for flow in flows}
    loads: Counter = Counter()
    choice = []
    for flow, opts in zip(flows, options):
        choice.append(_least_loaded(opts, loads, used[flow.src]))
        used[flow.src].add(choice[-1][0])
        loads.update(choice[-1][1])
    return choice


def _search(flows: Sequence[FiveTuple], options: list, limit: int, budget: int) -> list | None:
    """A placement with at most ``limit`` flows on any link (depth first, flows with the fewest
    paths first), or None when there is none or ``budget`` steps did not find one."""
    order = sorted(range(len(flows)), key=lambda i: len(options[i]))
    loads: Counter = Counter()
    used: dict[str, set[int]] = {flow.src: set() for flow in flows}
    choice: dict[int, tuple[int, tuple]] = {}
    steps = 0

    def place(k: int) -> bool:
        nonlocal steps
        if k == len(order):
            return True
        i = order[k]
        for sport, links in sorted(options[i], key=lambda opt: _cost(opt[1], loads)):
            steps += 1
            if steps > budget:
                return False
            if sport in used[flows[i].src] or any(loads[ln] >= limit for ln in links):
                continue
            loads.update(links)
            used[flows[i].src].add(sport)
            choice[i] = (sport, links)
            if place(k + 1):
                return True
            loads.subtract(links)
            used[flows[i].src].discard(sport)
        return False

    return [choice[i] for i in range(len(flows))] if place(0) else None


def _cost(links: tuple, loads: Counter) -> tuple[int, int]:
    """A path's cost on top of ``loads``: its busiest link's flows, then all it shares."""
    return max((loads[ln] for ln in links), default=0), sum(loads[ln] for ln in links)


def _least_loaded(options: list[tuple[int, tuple]], loads: Counter, taken: set[int]) -> tuple[int, tuple]:
    free = [opt for opt in options if opt[0] not in taken]
    if not free:
        raise ValueError(f"no free source port among {len(options)} candidates")
    return min(free, key=lambda opt: _cost(opt[1], loads))


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
