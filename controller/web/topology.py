"""The fabric as the page draws it: nodes by tier with their positions, links, link directions.

Tiers go top to bottom: cores or spines (and a dragonfly's routers), then aggregation, then the
switches hosts hang on (edge, leaf, rail), then the hosts. Within a tier, nodes are ordered by
their group (a fat-tree's pod, a dual-plane fabric's plane, a rail, a dragonfly group) and name;
a host sits under its switch. Positions are computed here (a preset layout), so the page and
its tests see the same picture on every load.

Every link has two directions, each its own edge on the page (``a>b`` is what ``a`` sends to
``b`` out of ``a``'s port): a direction's load and queue are those of its sending port.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from topologies.fabric import Fabric, Role

# Tier of each role before compression (absent roles leave no empty row).
ROLE_RANK = {Role.CORE: 0, Role.SPINE: 0, Role.ROUTER: 0, Role.AGGREGATION: 1,
             Role.EDGE: 2, Role.LEAF: 2, Role.RAIL: 2}
TIER_NAMES = {Role.CORE: "core", Role.SPINE: "spine", Role.ROUTER: "router", Role.AGGREGATION: "aggregation",
              Role.EDGE: "edge", Role.LEAF: "leaf", Role.RAIL: "rail"}
GROUP_WORD = {"fat_tree": "pod", "dual_plane": "plane", "dragonfly": "group"}
X_SPACING = 90.0      # between neighbours in the widest tier
Y_SPACING = 150.0     # between tiers


@dataclass(frozen=True)
class Direction:
    """What ``src`` sends to ``dst`` out of its ``port`` (into ``dst``'s ``dst_port``)."""

    id: str
    link: str
    src: str
    dst: str
    port: int
    dst_port: int


def link_id(a: str, b: str) -> str:
    return "|".join(sorted((a, b)))


def direction_id(src: str, dst: str) -> str:
    return f"{src}>{dst}"


def directions(fabric: Fabric) -> list[Direction]:
    """Both directions of every link, in the fabric's link order."""
    out = []
    for ln in fabric.links:
        out.append(Direction(direction_id(ln.a, ln.b), link_id(ln.a, ln.b), ln.a, ln.b, ln.a_port, ln.b_port))
        out.append(Direction(direction_id(ln.b, ln.a), link_id(ln.a, ln.b), ln.b, ln.a, ln.b_port, ln.a_port))
    return out


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _group_of_switch(fabric: Fabric, sw) -> str | None:
    if sw.role == Role.RAIL:
        return f"rail {sw.device_id - 1}"          # r{g} has device id g + 1 (topologies.ai_fabrics)
    word = GROUP_WORD.get(fabric.kind)
    return f"{word} {sw.pod}" if word and sw.pod is not None else None


def topology_json(fabric: Fabric) -> dict:
    """Nodes (tier, group, position), links and link directions of ``fabric``."""
    ranks = sorted({ROLE_RANK[sw.role] for sw in fabric.switches})
    tier_of_rank = {r: i for i, r in enumerate(ranks)}
    host_tier = len(ranks)
    tiers: dict[int, list[dict]] = {}
    groups = {sw.name: _group_of_switch(fabric, sw) for sw in fabric.switches}
    for sw in fabric.switches:
        tier = tier_of_rank[ROLE_RANK[sw.role]]
        tiers.setdefault(tier, []).append({
            "id": sw.name, "kind": "switch", "role": sw.role.value, "tier": tier, "group": groups[sw.name],
            "device_id": sw.device_id})
    width = X_SPACING * max([len(fabric.hosts)] + [len(v) for v in tiers.values()])
    x_of: dict[str, float] = {}
    for tier, nodes in tiers.items():
        nodes.sort(key=lambda n: (_natural(n["group"] or ""), _natural(n["id"])))
        _place(nodes, tier, width, x_of)
    hosts = [{"id": h.name, "kind": "host", "role": "host", "tier": host_tier, "group": groups.get(h.switch),
              "switch": h.switch, "ipv4": str(h.ip4.ip), "_key": (x_of.get(h.switch, 0.0), h.port)}
             for h in fabric.hosts]
    hosts.sort(key=lambda n: n.pop("_key"))
    _place(hosts, host_tier, width, x_of)
    tier_names = [", ".join(sorted({TIER_NAMES[sw.role] for sw in fabric.switches
                                    if tier_of_rank[ROLE_RANK[sw.role]] == t})) for t in range(host_tier)]
    return {
        "fabric": fabric.describe(),
        "kind": fabric.kind,
        "tiers": [*tier_names, "hosts"],
        "nodes": [n for t in sorted(tiers) for n in tiers[t]] + hosts,
        "links": [{"id": link_id(ln.a, ln.b), "a": ln.a, "a_port": ln.a_port, "b": ln.b, "b_port": ln.b_port}
                  for ln in fabric.links],
        "directions": [d.__dict__ for d in directions(fabric)],
    }


def _place(nodes: list[dict], tier: int, width: float, x_of: dict[str, float]) -> None:
    step = width / max(1, len(nodes))
    for i, node in enumerate(nodes):
        node["x"], node["y"] = round((i + 0.5) * step, 1), tier * Y_SPACING
        x_of[node["id"]] = node["x"]
