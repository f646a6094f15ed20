"""Ranks on hosts: a TP group inside one server on a rail-optimised fabric (its GPUs on
different rails), under one edge switch elsewhere; too many ranks refused by name."""
from __future__ import annotations

import pytest

from aifabric.workloads import Parallelism, WorkloadError, place
from topologies.ai_fabrics import dragonfly, rail_optimised
from topologies.fabric import fat_tree


def server_of(host: str) -> str:
    return host.split("g")[0]       # rail hosts are s<server>g<gpu>


def test_tp_groups_stay_inside_one_server_on_a_rail_fabric():
    fab = rail_optimised(servers=4, gpus=4, spines=2)
    par = Parallelism(dp=4, tp=2, pp=2)
    p = place(fab, par)
    assert len(set(p.hosts)) == par.world == 16
    for rank in range(par.world):
        group = par.tp_group(rank)
        assert len({server_of(p.host(r)) for r in group}) == 1
        assert len({fab.host(p.host(r)).switch for r in group}) == len(group)    # one rail each
        assert p.server(rank) == server_of(p.host(rank))


def test_dp_peers_with_the_same_local_index_share_a_rail():
    fab = rail_optimised(servers=4, gpus=4, spines=2)
    par = Parallelism(dp=4, tp=4)
    p = place(fab, par)
    for rank in range(par.world):
        assert len({fab.host(p.host(r)).switch for r in par.dp_group(rank)}) == 1


def test_a_server_too_small_for_another_whole_group_leaves_hosts_unused():
    fab = rail_optimised(servers=3, gpus=4, spines=1)
    p = place(fab, Parallelism(dp=3, tp=3))
    assert p.hosts == ("s0g0", "s0g1", "s0g2", "s1g0", "s1g1", "s1g2", "s2g0", "s2g1", "s2g2")
    with pytest.raises(WorkloadError, match=r"parallelism: DP\*TP\*PP = 12 ranks.*holds 9"):
        place(fab, Parallelism(dp=4, tp=3))


def test_tp_groups_sit_under_one_edge_switch_on_a_fat_tree():
    fab = fat_tree(4)
    par = Parallelism(dp=4, tp=2, pp=2)
    p = place(fab, par)
    for rank in range(par.world):
        assert len({fab.host(p.host(r)).switch for r in par.tp_group(rank)}) == 1
    assert not p.notes


def test_a_tp_group_wider_than_any_server_is_spread_and_said_so():
    fab = dragonfly(groups=4, routers=2, hosts_per_router=1)
    p = place(fab, Parallelism(dp=2, tp=2))
    assert len(set(p.hosts)) == 4 and "spans servers" in p.notes[0]


def test_more_ranks_than_hosts_is_refused():
    with pytest.raises(WorkloadError, match=r"parallelism: DP\*TP\*PP = 32 ranks, but fat_tree\(k=4\)"):
        place(fat_tree(4), Parallelism(dp=8, tp=2, pp=2))
