"""Flows onto paths so that the busiest link carries as few flows as can be found.

Each flow has options, ``(key, links)``: a key (a source port, a path's index) and the link
directions that option's path crosses. `balanced` places every flow on the option whose
busiest link carries the fewest flows placed before it (then the fewest shared in all), then
looks depth first for a placement whose busiest link carries fewer, within ``budget`` steps, so
flows share a link only where their options leave no other way (or the search gave up, which
large fabrics show). Flows of one owner (a source host choosing ports) may be told to take
distinct keys.
"""
from __future__ import annotations

from collections import Counter
from typing import Hashable, Iterable, Sequence

Option = tuple[Hashable, tuple]        # (key, the link directions its path crosses)
SEARCH_BUDGET = 200_000                # options tried in the search for a better placement than greedy's


def link_loads_of(link_sets: Iterable[tuple]) -> Counter:
    """Flows per link direction."""
    loads: Counter = Counter()
    for links in link_sets:
        loads.update(links)
    return loads


def balanced(options: Sequence[list[Option]], owners: Sequence[Hashable | None],
             budget: int = SEARCH_BUDGET) -> list[Option]:
    """One option per flow (see the module); ``owners[i]``: flows of the same owner take distinct
    keys (None: no such rule for flow i)."""
    choice = _greedy(options, owners)
    worst = max(link_loads_of(links for _, links in choice).values(), default=0)
    for limit in range(1, worst):
        found = _search(options, owners, limit, budget)
        if found is not None:
            return found
    return choice


def _greedy(options: Sequence[list[Option]], owners: Sequence[Hashable | None]) -> list[Option]:
    used: dict[Hashable, set] = {}
    loads: Counter = Counter()
    choice = []
    for opts, owner in zip(options, owners):
        taken = used.setdefault(owner, set()) if owner is not None else set()
        free = [opt for opt in opts if opt[0] not in taken]
        if not free:
            raise ValueError(f"{owner}: no option left among {len(opts)} that another of its flows does not take")
        best = min(free, key=lambda opt: _cost(opt[1], loads))
        taken.add(best[0])
        loads.update(best[1])
        choice.append(best)
    return choice


def _search(options: Sequence[list[Option]], owners: Sequence[Hashable | None], limit: int,
            budget: int) -> list[Option] | None:
    """A placement with at most ``limit`` flows on any link (flows with the fewest options first),
    or None when there is none or ``budget`` steps did not find one."""
    order = sorted(range(len(options)), key=lambda i: len(options[i]))
    loads: Counter = Counter()
    used: dict[Hashable, set] = {}
    choice: dict[int, Option] = {}
    steps = 0

    def place(k: int) -> bool:
        nonlocal steps
        if k == len(order):
            return True
        i = order[k]
        taken = used.setdefault(owners[i], set()) if owners[i] is not None else set()
        for key, links in sorted(options[i], key=lambda opt: _cost(opt[1], loads)):
            steps += 1
            if steps > budget:
                return False
            if key in taken or any(loads[ln] >= limit for ln in links):
                continue
            loads.update(links)
            taken.add(key)
            choice[i] = (key, links)
            if place(k + 1):
                return True
            loads.subtract(links)
            taken.discard(key)
        return False

    return [choice[i] for i in range(len(options))] if place(0) else None


def _cost(links: tuple, loads: Counter) -> tuple[int, int]:
    """A path's cost on top of ``loads``: its busiest link's flows, then all it shares."""
    return max((loads[ln] for ln in links), default=0), sum(loads[ln] for ln in links)
