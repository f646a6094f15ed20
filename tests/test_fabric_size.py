"""The memory estimate aifabric checks before bring-up counts every switch port's receive ring,
and the fat-tree shortcut (sized without building the tree) counts what the built tree has."""
from __future__ import annotations

import pytest

from aifabric.cli import build_parser
from aifabric.validate import HOST_MIB, PORT_MIB, SWITCH_MIB, check_memory, fabric_size
from aifabric import topo_args


@pytest.mark.parametrize("k", [2, 4, 6])
def test_the_fat_tree_shortcut_counts_the_ports_the_built_tree_has(k):
    size = fabric_size(build_parser().parse_args(["demo", "--k", str(k)]))
    built = topo_args.build(topo_args.TOPOLOGIES["fattree"][0], k=k)
    names = {sw.name for sw in built.switches}
    assert (size.switches, size.hosts) == (len(built.switches), len(built.hosts))
    assert size.switch_ports == sum(end in names for ln in built.links for end in (ln.a, ln.b)) == size.switches * k


def test_the_estimate_counts_switches_hosts_and_ports():
    size = fabric_size(build_parser().parse_args(["up", "--topo", "leafspine", "--leaves", "2", "--spines", "2",
                                                  "--hosts-per-leaf", "3"]))
    # each leaf: 3 hosts + 2 spines; each spine: 2 leaves
    assert (size.switches, size.hosts, size.switch_ports) == (4, 6, 2 * 5 + 2 * 2)
    assert size.memory_mib == 4 * SWITCH_MIB + 6 * HOST_MIB + 14 * PORT_MIB
    with pytest.raises(ValueError, match="4 switches and 6 hosts need about"):
        check_memory("leafspine", size, size.memory_mib - 1)
    check_memory("leafspine", size, size.memory_mib)
