"""The aggregation tree of a job: the workers' edge switches add their local workers'
contributions, every switch above adds its children's partial sums, and the root sends the sums
back down (ATP's rack-then-cross-rack aggregation, on any tree-shaped part of the fabric).

The root is the switch closest to all the workers' edge switches (smallest largest distance);
among equals the job id picks, so concurrent jobs spread over the aggregation and core switches.
Every other tree switch is on a shortest path from the root to an edge switch (a BFS tree), so
each has exactly one parent, adjacent to it."""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from controller.topology import TopologyModel
from topologies.fabric import Host

MAX_CHILDREN = 32  # p4src: AGG_MAX_CHILDREN, the width of a set's contributor bitmap


@dataclass(frozen=True)
class Child:
    """A child of a tree switch: a worker host or a switch below, reached through ``port``."""

    name: str
    port: int
    is_host: bool


@dataclass
class TreeNode:
    switch: str
    children: list[Child] = field(default_factory=list)   # child index = position
    parent: str | None = None                              # None: the root
    parent_port: int = 0                                   # this switch's port towards the parent
    index_at_parent: int = 0

    @property
    def fan_in(self) -> int:
        return len(self.children)

    @property
    def is_root(self) -> bool:
        return self.parent is None


@dataclass
class AggregationTree:
    root: str
    nodes: dict[str, TreeNode]
    worker_ids: dict[str, int]     # host name -> its child index at its edge switch

    def describe(self) -> str:
        levels = []
        frontier = [self.root]
        while frontier:
            levels.append(",".join(frontier))
            frontier = [c.name for n in frontier for c in self.nodes[n].children if not c.is_host]
        return " <- ".join(levels)


def choose_tree(model: TopologyModel, workers: list[Host], salt: int = 0) -> AggregationTree:
    """The tree for ``workers`` (at least one); ``salt`` (the job id) breaks ties between
    equally good roots. Raises ValueError when a switch would have more than MAX_CHILDREN
    children or the workers' switches are not connected."""
    graph = model.switch_graph()
    edges = sorted({h.switch for h in workers})
    lengths = {e: nx.single_source_shortest_path_length(graph, e) for e in edges}
    best: list[tuple[int, str]] = []
    for sw in sorted(graph.nodes):
        if all(sw in lengths[e] for e in edges):
            best.append((max(lengths[e][sw] for e in edges), sw))
    if not best:
        raise ValueError(f"the switches of the workers ({', '.join(edges)}) are not connected")
    depth = min(d for d, _ in best)
    roots = [sw for d, sw in best if d == depth]
    root = roots[salt % len(roots)]

    # BFS from the root; each switch's parent is its first neighbour (by port) one step closer.
    dist = nx.single_source_shortest_path_length(graph, root)
    nodes: dict[str, TreeNode] = {root: TreeNode(root)}
    for edge in edges:
        cur = edge
        while cur not in nodes:
            up = next(a for a in model.adjacencies(cur) if dist.get(a.neighbor) == dist[cur] - 1)
            nodes[cur] = TreeNode(cur, parent=up.neighbor, parent_port=up.port)
            cur = up.neighbor
    worker_ids: dict[str, int] = {}
    for name, node in sorted(nodes.items()):
        hosts = sorted((h for h in workers if h.switch == name), key=lambda h: h.port)
        for h in hosts:
            worker_ids[h.name] = len(node.children)
            node.children.append(Child(h.name, h.port, True))
        below = sorted((n for n in nodes.values() if n.parent == name), key=lambda n: n.switch)
        for child in below:
            down = next(a for a in model.adjacencies(name) if a.neighbor == child.switch)
            child.index_at_parent = len(node.children)
            node.children.append(Child(child.switch, down.port, False))
        if node.fan_in > MAX_CHILDREN:
            raise ValueError(f"switch {name} would aggregate {node.fan_in} children; its bitmap holds {MAX_CHILDREN}")
    return AggregationTree(root, nodes, worker_ids)
