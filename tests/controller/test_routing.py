"""Route computation on fat-trees (k = 4, 6, 8) and leaf-spines: pure functions, no network."""

from __future__ import annotations

import ipaddress

import pytest

from controller.routing import compute_forwarding
from controller.topology import TopologyModel
from topologies.fabric import Role, fat_tree, leaf_spine


def forwarding_for(fabric):
    return compute_forwarding(TopologyModel(fabric))


@pytest.fixture(scope="module", params=[4, 6, 8])
def tree(request):
    k = request.param
    fab = fat_tree(k)
    return k, fab, forwarding_for(fab)


def test_every_switch_routes_every_subnet_or_host(tree) -> None:
    k, fab, fw = tree
    half = k // 2
    subnets = k * half  # one /24 (and /64) per edge switch
    for sw in fab.switches:
        state = fw[sw.name]
        if sw.role is Role.EDGE:
            expected = subnets - 1 + half  # other subnets + own hosts
        else:
            expected = subnets
        assert len(state.routes_v4) == expected, sw.name
        assert len(state.routes_v6) == expected, sw.name


def test_group_sizes_are_up_down_ecmp(tree) -> None:
    k, fab, fw = tree
    half = k // 2
    edge, agg, core = fw["p0e0"], fw["p0a0"], fw["c0"]
    # to a host in another pod
    assert len(edge.next_hops_for("10.1.0.0/24")) == half
    assert len(agg.next_hops_for("10.1.0.0/24")) == half
    assert len(core.next_hops_for("10.1.0.0/24")) == 1
    # to another edge of the same pod: up to any aggregation, then down
    assert len(edge.next_hops_for("10.0.1.0/24")) == half
    assert len(agg.next_hops_for("10.0.1.0/24")) == 1
    # IPv6 uses the same groups as IPv4
    assert edge.route_for("fd00:0:1:0::/64").next_id == edge.route_for("10.1.0.0/24").next_id
    assert core.route_for("fd00:0:1:0::/64").next_id == core.route_for("10.1.0.0/24").next_id


def test_groups_are_deduplicated(tree) -> None:
    k, fab, fw = tree
    half = k // 2
    for sw in fab.switches:
        state = fw[sw.name]
        sizes = sorted(len(g) for g in state.next_groups.values())
        if sw.role is Role.EDGE:
            assert sizes == [1] * half + [half]  # one per host + one uplink group
        elif sw.role is Role.AGGREGATION:
            assert sizes == [1] * half + [half]  # one per edge below + one core group
        else:
            assert sizes == [1] * k  # one per pod
        assert sorted(state.next_groups) == list(range(1, len(state.next_groups) + 1))
        used = {r.next_id for r in state.routes}
        assert used == set(state.next_groups)
        assert len(set(state.next_groups.values())) == len(state.next_groups)


def test_next_hops_carry_ports_and_macs(tree) -> None:
    k, fab, fw = tree
    half = k // 2
    edge = fw["p0e0"]
    ups = edge.next_hops_for("10.1.0.0/24")
    assert [h.port for h in ups] == [half + a + 1 for a in range(half)]
    assert [h.neighbor for h in ups] == [f"p0a{a}" for a in range(half)]
    assert all(h.smac == fab.switch("p0e0").mac for h in ups)
    assert [h.dmac for h in ups] == [fab.switch(f"p0a{a}").mac for a in range(half)]
    core = fw["c0"].next_hops_for(f"10.{k - 1}.0.0/24")
    assert [(h.port, h.neighbor) for h in core] == [(k, f"p{k - 1}a0")]


def test_edge_host_routes_point_at_host_ports(tree) -> None:
    k, fab, fw = tree
    for host in fab.hosts_of("p1e1"):
        for addr in (f"{host.ip4.ip}/32", f"{host.ip6.ip}/128"):
            (hop,) = fw["p1e1"].next_hops_for(addr)
            assert (hop.port, hop.dmac, hop.neighbor) == (host.port, host.mac, host.name)
    # a switch has host routes for its own hosts only
    own = {ipaddress.ip_network(f"{h.ip4.ip}/32") for h in fab.hosts_of("p1e0")}
    own |= {ipaddress.ip_network(f"{h.ip6.ip}/128") for h in fab.hosts_of("p1e0")}
    assert {r.prefix for r in fw["p1e0"].routes if r.prefix.prefixlen in (32, 128)} == own
    assert not [r for r in fw["p1a0"].routes if r.prefix.prefixlen in (32, 128)]


def test_arp_and_ndp_prefixes_only_on_edges(tree) -> None:
    k, fab, fw = tree
    assert [str(n) for n in fw["p2e1"].arp_prefixes] == ["10.2.1.0/24"]
    assert [str(n) for n in fw["p2e1"].ndp_prefixes] == ["fd00:0:2:1::/64"]
    assert fw["p2a1"].arp_prefixes == [] and fw["c0"].ndp_prefixes == []


def test_recomputation_is_deterministic() -> None:
    a, b = forwarding_for(fat_tree(4)), forwarding_for(fat_tree(4))
    assert a == b


def test_link_failure_shrinks_groups_and_recovery_restores_them() -> None:
    model = TopologyModel(fat_tree(4))
    model.set_link_up("p0e0", "p0a0", False)
    fw = compute_forwarding(model)
    assert [h.neighbor for h in fw["p0e0"].next_hops_for("10.1.0.0/24")] == ["p0a1"]
    # p0a0 can no longer reach p0e0 directly: down via ... nothing shorter than through a core?
    assert [h.neighbor for h in fw["p0a0"].next_hops_for("10.0.0.0/24")] == ["p0e1"]
    # cores that reach pod 0 through p0a0 only are now 1 hop farther; they still route
    assert len(fw["c0"].next_hops_for("10.0.0.0/24")) == 1
    model.set_link_up("p0e0", "p0a0", True)
    assert compute_forwarding(model) == forwarding_for(fat_tree(4))
    with pytest.raises(KeyError, match="'p0e0'.*'c0'"):
        model.set_link_up("p0e0", "c0", False)


@pytest.mark.parametrize("leaves, spines, hpl", [(2, 1, 1), (4, 2, 2), (6, 4, 3)])
def test_leaf_spine_routes(leaves: int, spines: int, hpl: int) -> None:
    fab = leaf_spine(leaves, spines, hpl)
    fw = forwarding_for(fab)
    for i in range(leaves):
        leaf = fw[f"l{i}"]
        assert len(leaf.routes_v4) == leaves - 1 + hpl
        assert len(leaf.routes_v6) == leaves - 1 + hpl
        sizes = sorted(len(g) for g in leaf.next_groups.values())
        assert sizes == sorted([1] * hpl + ([spines] if leaves > 1 else []))
        other = (i + 1) % leaves
        hops = leaf.next_hops_for(f"10.200.{other}.0/24")
        assert [h.port for h in hops] == [hpl + j + 1 for j in range(spines)]
    for j in range(spines):
        spine = fw[f"s{j}"]
        assert len(spine.routes_v4) == leaves
        assert sorted(len(g) for g in spine.next_groups.values()) == [1] * leaves
        (hop,) = spine.next_hops_for("fd00:1:1::/64")
        assert (hop.port, hop.neighbor) == (2, "l1")
