"""The equal-cost shortest paths between two switches, as next hops towards a destination.

`PathSpace.next_hops(switch, dst)` is the set of links out of ``switch`` that lie on a shortest
path to switch ``dst`` over the links that are up, in port order: exactly the ECMP group
`controller.routing` installs at that switch for ``dst``'s hosts. Following next hops from a
source switch enumerates the candidate paths of a flow (for a fat-tree, one per (aggregation,
core) choice) without materialising them, which is what lets first fit prune a whole subtree at
a full link.

Two ways to compute them, giving the same sets where both apply:

* a fat-tree with every link up: from the switches' roles and pods alone (up to every
  aggregation/core of the switch while the destination is in another pod or below another
  aggregation, then the one way down), no graph search at all;
* anything else (leaf-spine, other shapes, a fat-tree with failed links): hop counts to the
  destination by breadth-first search over the links that are up, computed once per destination
  and cached, next hops cached per (switch, destination).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import Iterator, Sequence

from controller.load_balance.te.index import FabricIndex
from controller.topology import TopologyModel
from topologies.fabric import Role

NextHop = tuple[int, int]   # (directed link id, next switch index)


class PathSpace(ABC):
    """Next hops towards any switch over the links of ``index`` not in ``down`` (link ids)."""

    def __init__(self, index: FabricIndex, down: frozenset[int] = frozenset()) -> None:
        self.index = index
        self.down = down

    @classmethod
    def from_model(cls, model: TopologyModel, index: FabricIndex | None = None) -> "PathSpace":
        """The path space of the model's current link state (a fat-tree's own when all are up)."""
        index = index if index is not None else FabricIndex(model.fabric)
        down = frozenset(link for a, b in model.down_links() for link in index.links_between(a, b))
        if model.fabric.kind == "fat_tree" and not down:
            return FatTreePaths(index)
        return ShortestPaths(index, down)

    @abstractmethod
    def next_hops(self, switch: int, dst: int) -> Sequence[NextHop]:
        """Links out of ``switch`` on a shortest path to ``dst``, as (link, next switch)."""

    def first_fit(self, src: int, dst: int, need: float, residual: Sequence[float]) -> tuple[int, ...] | None:
        """The first of `paths` (src, dst) whose every link has at least ``need`` left.

        Depth-first over the next hops: a branch is abandoned at its first link without room,
        and a switch from which nothing fits is not entered twice for the same search."""
        next_hops = self.next_hops
        path: list[int] = []
        dead: set[int] = set()

        def walk(switch: int) -> bool:
            if switch == dst:
                return True
            for link, nxt in next_hops(switch, dst):
                if residual[link] >= need and nxt not in dead:
                    path.append(link)
                    if walk(nxt):
                        return True
                    path.pop()
            dead.add(switch)
            return False

        return tuple(path) if walk(src) else None

    def paths(self, src: int, dst: int) -> Iterator[tuple[int, ...]]:
        """Every equal-cost shortest path from switch ``src`` to switch ``dst`` (switch links
        only), in port order: the order first fit tries them in."""
        if src == dst:
            yield ()
            return
        for link, nxt in self.next_hops(src, dst):
            for rest in self.paths(nxt, dst):
                yield (link, *rest)


class FatTreePaths(PathSpace):
    """Next hops of a fat-tree with every link up, from roles and pods.

    A path between pods is fixed by its (aggregation, core) choice: up from the source edge to
    aggregation a, up to one of a's cores, down to the aggregation at a's position in the
    destination pod (every core above a leads there), down to the destination edge."""

    def __init__(self, index: FabricIndex) -> None:
        super().__init__(index)
        n = len(index.names)
        self._up: list[tuple[NextHop, ...]] = [()] * n
        self._down: list[dict[int, tuple[NextHop, ...]]] = [{} for _ in range(n)]  # key: edge or pod
        self._role = index.roles
        self._pod = [-1 if pod is None else pod for pod in index.pods]   # cores: -1
        for sw in range(n):
            up: list[NextHop] = []
            down: dict[int, tuple[NextHop, ...]] = {}
            for link, nbr in index.adjacency[sw]:
                if _rank(index.roles[nbr]) > _rank(index.roles[sw]):
                    up.append((link, nbr))
                elif index.roles[sw] is Role.CORE:
                    down[self._pod[nbr]] = ((link, nbr),)
                else:
                    down[nbr] = ((link, nbr),)
            self._up[sw] = tuple(up)
            self._down[sw] = down
        # Lists for first_fit's inner loop: a core's link down to each pod (by pod number), an
        # aggregation's link down to each of its edges, and the aggregation at an
        # aggregation's position in each pod (where all of its cores lead).
        pods = 1 + max(self._pod, default=0)
        self._core_down: list[list[int]] = [[-1] * pods for _ in range(n)]
        self._core_peer: list[tuple[int, ...]] = [()] * n
        self._agg_down: list[dict[int, int]] = [{} for _ in range(n)]
        self._peer: list[tuple[int, ...]] = [()] * n
        for sw in range(n):
            for key, ((link, nbr),) in self._down[sw].items():
                if index.roles[sw] is Role.CORE:
                    self._core_down[sw][key] = link
                else:
                    self._agg_down[sw][key] = link
            if index.roles[sw] is Role.CORE:
                self._core_peer[sw] = tuple(self._down[sw].get(p, ((-1, -1),))[0][1] for p in range(pods))
        for sw in range(n):
            if index.roles[sw] is Role.AGGREGATION and self._up[sw]:
                peers = {self._core_peer[core] for _, core in self._up[sw]}
                if len(peers) != 1:
                    raise ValueError(f"{index.fabric.describe()} is not a fat-tree: the cores above "
                                     f"{index.names[sw]} lead to different aggregations of a pod")
                self._peer[sw] = peers.pop()

    def first_fit(self, src: int, dst: int, need: float, residual: Sequence[float]) -> tuple[int, ...] | None:
        """As `PathSpace.first_fit`, as nested loops over (aggregation, core), checking the
        aggregation's way down to ``dst`` before any of its cores."""
        if src == dst:
            return ()
        dst_pod = self._pod[dst]
        agg_down = self._agg_down
        if self._pod[src] == dst_pod:
            for l1, agg in self._up[src]:
                if residual[l1] >= need:
                    l2 = agg_down[agg][dst]
                    if residual[l2] >= need:
                        return (l1, l2)
            return None
        core_down = self._core_down
        for l1, agg in self._up[src]:
            if residual[l1] < need:
                continue
            l4 = agg_down[self._peer[agg][dst_pod]][dst]
            if residual[l4] < need:
                continue
            for l2, core in self._up[agg]:
                if residual[l2] >= need:
                    l3 = core_down[core][dst_pod]
                    if residual[l3] >= need:
                        return (l1, l2, l3, l4)
        return None

    def next_hops(self, switch: int, dst: int) -> Sequence[NextHop]:
        role = self._role[switch]
        if switch == dst:
            return ()
        if role is Role.EDGE:
            return self._up[switch]
        if role is Role.AGGREGATION:
            if self._pod[switch] == self._pod[dst]:
                return self._down[switch].get(dst, ())
            return self._up[switch]
        return self._down[switch].get(self._pod[dst], ())


def _rank(role: Role) -> int:
    return {Role.EDGE: 0, Role.AGGREGATION: 1, Role.CORE: 2}[role]


class ShortestPaths(PathSpace):
    """Next hops of any topology, from breadth-first hop counts to each destination."""

    def __init__(self, index: FabricIndex, down: frozenset[int] = frozenset()) -> None:
        super().__init__(index, down)
        self._dist: dict[int, list[int]] = {}
        self._next: dict[tuple[int, int], tuple[NextHop, ...]] = {}

    def distances(self, dst: int) -> list[int]:
        """Hop count of every switch to ``dst`` over the links that are up (-1: unreachable)."""
        dist = self._dist.get(dst)
        if dist is None:
            dist = [-1] * len(self.index.names)
            dist[dst] = 0
            queue = deque([dst])
            adjacency, down = self.index.adjacency, self.down
            while queue:
                v = queue.popleft()
                for link, u in adjacency[v]:
                    # link is v->u, the path runs u->v: both directions are down together
                    if dist[u] < 0 and link not in down:
                        dist[u] = dist[v] + 1
                        queue.append(u)
            self._dist[dst] = dist
        return dist

    def next_hops(self, switch: int, dst: int) -> Sequence[NextHop]:
        key = (switch, dst)
        hops = self._next.get(key)
        if hops is None:
            dist = self.distances(dst)
            here = dist[switch]
            hops = tuple((link, nbr) for link, nbr in self.index.adjacency[switch]
                         if here > 0 and dist[nbr] == here - 1 and link not in self.down)
            self._next[key] = hops
        return hops
