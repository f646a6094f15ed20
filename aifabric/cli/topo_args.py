"""The ``--topo`` choices of ``aifabric up`` and their parameters, and the Fabric they make."""
from __future__ import annotations

import argparse

from topologies.fabric import Fabric
from topologies.shapes import build

# --topo name -> (topologies.shapes.build kind, its parameters: each is a --option of the same name)
TOPOLOGIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "fattree": ("fat_tree", ("k",)),
    "leafspine": ("leaf_spine", ("leaves", "spines", "hosts_per_leaf")),
    "rail": ("rail_optimised", ("servers", "gpus", "spines")),
    "dualplane": ("dual_plane", ("leaves", "spines", "hosts_per_leaf")),
    "dragonfly": ("dragonfly", ("groups", "routers", "hosts_per_router", "global_links")),
}
PARAMETERS: dict[str, tuple[int, str]] = {
    "k": (4, "fat-tree arity (even, >= 2)"),
    "leaves": (4, "leafspine/dualplane: leaves (per plane)"),
    "spines": (2, "leafspine/rail/dualplane: spines (per plane)"),
    "hosts_per_leaf": (2, "leafspine/dualplane: hosts per leaf"),
    "servers": (2, "rail: servers (one host per GPU)"),
    "gpus": (2, "rail: GPUs per server = rail switches"),
    "groups": (4, "dragonfly: groups"),
    "routers": (2, "dragonfly: routers per group"),
    "hosts_per_router": (1, "dragonfly: hosts per router"),
    "global_links": (1, "dragonfly: global links between every pair of groups"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topo", choices=tuple(TOPOLOGIES), default="fattree",
                        help="fattree, leafspine, rail (rail-optimised), dualplane (two planes, a NIC on each), "
                             "dragonfly (minimal routing); shapes and addresses: topologies/README.md")
    for name, (default, help_text) in PARAMETERS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, help=help_text)


def parameters(args: argparse.Namespace) -> dict[str, int]:
    """The parameters of the topology ``args`` name (a demo runs on a fat-tree)."""
    return {n: getattr(args, n) for n in TOPOLOGIES[_topo(args)][1]}


def fabric_of(args: argparse.Namespace) -> Fabric:
    """The Fabric ``args`` describe; ValueError naming the parameter that does not fit the plan."""
    return build(TOPOLOGIES[_topo(args)][0], **parameters(args))


def _topo(args: argparse.Namespace) -> str:
    return args.topo if args.command in ("up", "compose", "workload", "train") else "fattree"


def options(args: argparse.Namespace) -> str:
    """The command-line options that chose the fabric, e.g. ``--leaves 4 --spines 2``."""
    return " ".join(f"--{n.replace('_', '-')} {v}" for n, v in parameters(args).items())
