"""The ranks' UDP ports in a training run, and which of them talk.

By default every member of a process group binds the group's port, so a group's flows differ
by addresses alone and ECMP hashes them where it may. With ``disjoint`` load balancing (Alibaba
HPN's precise path control) each member of each group binds a port of its own, chosen with the
fabric's hash (`controller.load_balance.hash_paths.HashPaths`) so that the flows the groups carry
(`ring_pairs`) spread over the links: a member at a time, the port among seeded candidates whose
flows' busiest link carries the least (flows weighted by their group's bytes; then the least
shared in all), round after round while one moves. A member's port is both the source of its flows to its next member and
the destination of its previous member's, so the choice is a search over members, not flows.

With ``qp-scaling`` each member sends every message to a peer in parts, each from a queue pair's
source port of its own (`queue_pair_ports`): ports chosen with the same hash so that a member's
queue pairs to each of its peers take paths that differ from each other where the fabric has them.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Sequence

from controller.load_balance.hash_paths import FiveTuple, HashPaths

Pair = tuple[int, int, int]      # (group index, sending rank, receiving rank)
CANDIDATES = 24                  # ports tried for a member in a round
ROUNDS = 6                       # rounds of moves at most


def ring_pairs(groups: Sequence[Sequence[int]], all_to_all: set[tuple[int, ...]]) -> list[Pair]:
    """Each group's ring, member to next member (its rings and chains), every ordered pair of a
    group that runs an all-to-all, both ways in a pair of two; ranks of one group, in order."""
    pairs: dict[Pair, None] = {}
    for index, group in enumerate(groups):
        n = len(group)
        if tuple(group) in all_to_all:
            pairs.update({(index, a, b): None for a in group for b in group if a != b})
            continue
        pairs.update({(index, group[k], group[(k + 1) % n]): None for k in range(n)})
        if n == 2:
            pairs[(index, group[1], group[0])] = None
    return list(pairs)


def disjoint_group_ports(paths: HashPaths, hosts: Sequence[str], groups: Sequence[Sequence[int]],
                         pairs: Sequence[Pair], ports: range, seed: int,
                         weights: Sequence[float] | None = None) -> list[list[int]]:
    """Per group, per member (in the group's order), the port it binds (see the module);
    ``ports``: where they are drawn from, ``ports.start + index`` each group's to begin with.
    ``weights``: per group, what one of its flows counts on a link (its bytes: a data-parallel
    ring's flows then keep apart before a barrier's do); None: every flow 1."""
    rng = random.Random(seed)
    weight = list(weights) if weights is not None else [1.0] * len(groups)
    port = {(i, r): ports.start + i for i, g in enumerate(groups) for r in g}
    touching: dict[tuple[int, int], list[Pair]] = {}
    for p in pairs:
        touching.setdefault((p[0], p[1]), []).append(p)
        touching.setdefault((p[0], p[2]), []).append(p)

    known: dict[tuple, tuple] = {}

    def links(p: Pair, own: tuple[int, int] | None = None, candidate: int = 0) -> tuple:
        index, a, b = p
        sport = candidate if own == (index, a) else port[(index, a)]
        dport = candidate if own == (index, b) else port[(index, b)]
        key = (hosts[a], hosts[b], sport, dport)
        if hosts[a] == hosts[b]:
            return ()
        if key not in known:
            known[key] = paths.links(FiveTuple(*key))
        return known[key]

    loads: Counter = Counter()

    def add(p: Pair, sign: int) -> None:
        for ln in links(p):
            loads[ln] += sign * weight[p[0]]

    for p in pairs:
        add(p, 1)
    for _ in range(ROUNDS):
        moved = False
        for member, mine in touching.items():
            for p in mine:
                add(p, -1)
            taken = {port[(i, r)] for (i, r) in port if r == member[1] and (i, r) != member}
            options = [port[member]] + [c for c in rng.sample(ports, min(CANDIDATES, len(ports))) if c not in taken]

            def cost(candidate: int) -> tuple[float, float]:
                used = [(ln, weight[p[0]]) for p in mine for ln in links(p, member, candidate)]
                return max((loads[ln] + w for ln, w in used), default=0), sum(loads[ln] * w for ln, w in used)
            best = min(options, key=cost)
            if cost(best) < cost(port[member]):
                port[member], moved = best, True
            for p in mine:
                add(p, 1)
        if not moved:
            break
    return [[port[(i, r)] for r in g] for i, g in enumerate(groups)]


def queue_pair_ports(paths: HashPaths, hosts: Sequence[str], groups: Sequence[Sequence[int]],
                     pairs: Sequence[Pair], ports: Sequence[Sequence[int]], qps: int, free: range,
                     seed: int) -> list[list[list[int]]]:
    """Per group, per member, the source ports of its queue pairs 1..``qps``-1 (queue pair 0 is
    the port it binds, ``ports[group][member]``): one at a time, among CANDIDATES seeded draws
    from ``free``, the port that gives the most of the member's flows in the group (``pairs`` it
    sends) a path none of its queue pairs takes yet; a host's ports all distinct."""
    rng = random.Random(seed)
    port = {(i, r): ports[i][k] for i, g in enumerate(groups) for k, r in enumerate(g)}
    taken: dict[str, set[int]] = {}
    for (i, r), p in port.items():
        taken.setdefault(hosts[r], set()).add(p)
    sends: dict[tuple[int, int], list[FiveTuple]] = {}
    for i, a, b in pairs:
        if hosts[a] != hosts[b]:
            sends.setdefault((i, a), []).append(FiveTuple(hosts[a], hosts[b], port[(i, a)], port[(i, b)]))
    out: list[list[list[int]]] = []
    for i, g in enumerate(groups):
        out.append([])
        for r in g:
            flows = sends.get((i, r), [])
            used = [{paths.links(f)} for f in flows]          # per flow: the paths its queue pairs take
            chosen: list[int] = []
            for _ in range(qps - 1):
                options = [c for c in rng.sample(free, min(CANDIDATES, len(free))) if c not in taken[hosts[r]]]
                if not options:
                    raise ValueError(f"{hosts[r]}: no free port left in {free.start}..{free.stop - 1} for a queue pair")
                found = {c: [paths.links(replace(f, sport=c)) for f in flows] for c in options}
                best = max(options, key=lambda c: sum(links not in u for links, u in zip(found[c], used)))
                for links, u in zip(found[best], used):
                    u.add(links)
                chosen.append(best)
                taken[hosts[r]].add(best)
            out[-1].append(chosen)
    return out
