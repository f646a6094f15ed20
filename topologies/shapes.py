"""Every fabric shape by name: `build(kind, **params)` for the command line, the description
file and the tests. The shapes themselves are `topologies.fabric` (fat-tree, leaf-spine) and
`topologies.ai_fabrics` (rail-optimised, dual-plane, dragonfly)."""
from __future__ import annotations

from topologies import ai_fabrics
from topologies.fabric import Fabric, fat_tree, leaf_spine


def build(kind: str, **params: int) -> Fabric:
    """``build("fat_tree", k=4)`` / ``build("leaf_spine", leaves=4, spines=2, hosts_per_leaf=2)`` /
    ``build("rail", ...)``, ``build("dual_plane", ...)``, ``build("dragonfly", ...)``
    (`topologies.ai_fabrics`)."""
    builders = {"fat_tree": fat_tree, "fattree": fat_tree, "leaf_spine": leaf_spine, "leafspine": leaf_spine,
                **ai_fabrics.BUILDERS}
    try:
        builder = builders[kind.replace("-", "_")]
    except KeyError:
        known = ", ".join(["fat_tree", "leaf_spine", *ai_fabrics.BUILDERS])
        raise ValueError(f"unknown topology kind {kind!r}; known: {known}") from None
    return builder(**params)
