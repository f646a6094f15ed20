"""Rail-optimised, dual-plane and dragonfly fabrics: their plans, and the routes the controller
computes for them (every NIC reachable, no loops, ECMP and minimal paths); no network needed."""

from __future__ import annotations

import ipaddress
from collections import Counter
from itertools import pairwise

import pytest

from controller.routing import SwitchForwarding, compute_forwarding
from controller.topology import TopologyModel
from topologies import ai_fabrics as af
from topologies.fabric import Fabric, Role
from topologies.shapes import build

SHAPES = [
    af.rail_optimised(servers=3, gpus=4, spines=2),
    af.dual_plane(leaves=3, spines=2, hosts_per_leaf=2),
    af.dragonfly(groups=4, routers=2, hosts_per_router=1),
    af.dragonfly(groups=3, routers=3, hosts_per_router=2, global_links=2),
]
IDS = [f.describe() for f in SHAPES]


def walk(fabric: Fabric, fw: dict[str, SwitchForwarding], start: str, dst: ipaddress.IPv4Address
         ) -> list[list[str]]:
    """Every switch path the routes allow from ``start`` to the NIC owning ``dst`` (all ECMP
    branches); fails on a loop, a black hole or a path longer than the number of switches."""
    paths, todo = [], [[start]]
    while todo:
        path = todo.pop()
        here = fw[path[-1]]
        assert len(path) <= len(fabric.switches), f"{dst}: path {path} is longer than the fabric"
        matching = [r for r in here.routes if r.version == 4 and dst in r.prefix]
        assert matching, f"{path[-1]} has no route to {dst} (path {path})"
        route = max(matching, key=lambda r: r.prefix.prefixlen)
        for hop in here.next_groups[route.next_id]:
            if hop.neighbor in {h.name for h in fabric.hosts}:
                paths.append(path)
                continue
            assert hop.neighbor not in path, f"{dst}: loop {path + [hop.neighbor]}"
            todo.append(path + [hop.neighbor])
    return paths


def reachable_pairs(fabric: Fabric) -> list[tuple[str, ipaddress.IPv4Address]]:
    """(first switch, destination) for every NIC to every NIC of another host on the same plane
    (the switch a NIC is attached to starts its packets)."""
    nics = [(h.name, nic) for h in fabric.hosts for nic in h.nics()]
    return [(a.switch, b.ip4.ip) for ha, a in nics for hb, b in nics
            if ha != hb and a.port == b.port]


@pytest.mark.parametrize("fabric", SHAPES, ids=IDS)
def test_names_ids_and_addresses_are_unique(fabric: Fabric) -> None:
    assert sorted(sw.device_id for sw in fabric.switches) == list(range(1, len(fabric.switches) + 1))
    nics = [nic for h in fabric.hosts for nic in h.nics()]
    for values in ([sw.name for sw in fabric.switches] + [h.name for h in fabric.hosts],
                   [sw.mac for sw in fabric.switches] + [n.mac for n in nics],
                   [n.ip4 for n in nics], [n.ip6 for n in nics],
                   [(ln.a, ln.a_port) for ln in fabric.links] + [(ln.b, ln.b_port) for ln in fabric.links]):
        assert len(values) == len(set(values))
    for n in nics:
        assert n.gateway4 in n.ip4.network and n.gateway6 in n.ip6.network
        assert fabric.ports_of(n.switch)[n.switch_port] in {h.name for h in fabric.hosts}
    fabric.to_graph()       # no parallel links
    for sw in fabric.switches:
        assert all(len(f"{sw.name}-eth{p}") <= 15 for p in fabric.ports_of(sw.name))


@pytest.mark.parametrize("fabric", SHAPES, ids=IDS)
def test_every_nic_reaches_every_nic_of_its_plane_without_loops(fabric: Fabric) -> None:
    fw = compute_forwarding(TopologyModel(fabric))
    for start, dst in reachable_pairs(fabric):
        assert walk(fabric, fw, start, dst)


def test_rail_optimised_keeps_a_rail_local_and_spreads_cross_rail_over_every_spine() -> None:
    fab = af.rail_optimised(servers=3, gpus=4, spines=2)
    assert Counter(sw.role for sw in fab.switches) == {Role.RAIL: 4, Role.SPINE: 2}
    assert [h.switch for h in fab.hosts if h.name.startswith("s2")] == ["r0", "r1", "r2", "r3"]
    assert str(fab.host("s2g3").ip4) == "10.220.3.4/24" and str(fab.host("s2g3").ip6) == "fd00:2:3::4/64"
    fw = compute_forwarding(TopologyModel(fab))
    assert {h.neighbor for h in fw["r0"].next_hops_for("10.220.0.3/32")} == {"s1g0"}   # rail-local
    assert {h.neighbor for h in fw["r0"].next_hops_for("10.220.3.0/24")} == {"s0", "s1"}
    assert [len(p) for p in walk(fab, fw, "r0", ipaddress.IPv4Address("10.220.3.2"))] == [3, 3]


def test_dual_plane_hosts_have_a_nic_on_each_plane_and_the_planes_never_meet() -> None:
    fab = af.dual_plane(leaves=3, spines=2, hosts_per_leaf=2)
    host = fab.host("t2h1")
    first, second = host.nics()
    assert (first.switch, first.switch_port, str(first.ip4)) == ("p0l2", 2, "10.210.2.3/24")
    assert (second.port, second.switch, second.switch_port, str(second.ip4), str(second.ip6)) == (
        1, "p1l2", 2, "10.211.2.3/24", "fd00:4:2::3/64")
    assert second.routes4 == (ipaddress.IPv4Network("10.211.0.0/16"),)
    assert fab.host_ports("p1l2") == fab.host_ports("p0l2") == [1, 2]    # INT/ECN edge ports on both planes
    model = TopologyModel(fab)
    graph = model.switch_graph()
    planes = [{sw.name for sw in fab.switches if sw.pod == p} for p in (0, 1)]
    assert not any(graph.has_edge(a, b) for a in planes[0] for b in planes[1])
    fw = compute_forwarding(model)
    for p, (own, other) in enumerate([(af.plane_supernets(0)[0], af.plane_supernets(1)[0]),
                                      (af.plane_supernets(1)[0], af.plane_supernets(0)[0])]):
        for name in planes[p]:
            prefixes = [r.prefix for r in fw[name].routes_v4]
            assert prefixes and all(x.subnet_of(own) for x in prefixes), name
            assert not any(x.subnet_of(other) for x in prefixes), name


def test_dragonfly_routes_are_minimal_and_ecmp_where_paths_tie() -> None:
    fab = af.dragonfly(groups=4, routers=2, hosts_per_router=1)
    weights = {frozenset((ln.a, ln.b)): ln.weight for ln in fab.switch_links()}
    assert Counter(weights.values()) == {af.GLOBAL_LINK_WEIGHT: 6, 1: 4}   # one per group pair; local mesh
    fw = compute_forwarding(TopologyModel(fab))
    for start, dst in reachable_pairs(fab):
        for path in walk(fab, fw, start, dst):
            hops = [weights[frozenset(pair)] for pair in pairwise(path)]
            assert hops.count(af.GLOBAL_LINK_WEIGHT) <= 1, f"{path} takes two global links"
            assert len(hops) <= 3, f"{path} is not minimal"
    # g0r1 has no global link to group 1: it goes local to g0r0, which has one, even though
    # g0r1's own global link to group 2 would reach group 1 in as few hops
    assert [h.neighbor for h in fw["g0r1"].next_hops_for("10.230.2.0/24")] == ["g0r0"]

    tied = af.dragonfly(groups=3, routers=2, hosts_per_router=1, global_links=2)
    fw = compute_forwarding(TopologyModel(tied))
    # two global links to group 1 start at g0r0 and g0r1: both ways to g1r1 are minimal
    assert [h.neighbor for h in fw["g0r0"].next_hops_for("10.230.3.0/24")] == ["g0r1", "g1r0"]


@pytest.mark.parametrize("call, message", [
    (lambda: af.rail_optimised(servers=0), "servers=0"),
    (lambda: af.rail_optimised(gpus=255), "255 host subnets"),
    (lambda: af.dual_plane(hosts_per_leaf=300), "300 hosts on one switch"),
    (lambda: af.dragonfly(groups=1), "groups=1"),
    (lambda: af.dragonfly(routers=2, global_links=3), "global_links=3 exceeds routers=2"),
    (lambda: af.dragonfly(groups=254, routers=1, hosts_per_router=60), "needs 313 ports"),
])
def test_bad_parameters_are_named(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_built_by_kind_and_mirrored_in_mininet() -> None:
    from emulation.mininet_topo import FabricTopo

    assert build("rail-optimised", servers=2, gpus=2, spines=1).kind == "rail_optimised"
    assert build("dragonfly").describe() == "dragonfly(groups=4, routers=2, hosts_per_router=1, global_links=1)"
    fab = build("dual-plane", leaves=2, spines=1, hosts_per_leaf=1)
    topo = FabricTopo(fab)
    assert sorted(topo.hosts()) == ["t0h0", "t1h0"] and len(topo.links()) == len(fab.links)
    link = topo.linkInfo("t1h0", "p1l1")
    assert (link["port1"], link["addr1"], link["params1"]) == (1, "00:00:0a:d3:01:02", {"ip": "10.211.1.2/24"})
    assert topo.nodeInfo("t1h0")["extra_nics"] == fab.host("t1h0").extra_nics


def test_a_dragonfly_description_file_gives_the_controller_the_same_routes(tmp_path) -> None:
    """`aifabric controller --fabric FILE` routes from the description: the link weights travel."""
    from aifabric.lab import description

    fab = af.dragonfly(groups=4, routers=2, hosts_per_router=1)
    path = description.FabricDescription.from_fabric(fab).write(tmp_path / "fabric.json")
    again = description.load(path).to_fabric()
    assert compute_forwarding(TopologyModel(again)) == compute_forwarding(TopologyModel(fab))


@pytest.mark.parametrize("fabric", SHAPES, ids=IDS)
def test_cleanup_knows_every_interface_and_node_of_the_shape(fabric: Fabric) -> None:
    """Teardown and `aifabric clean` find a lab's leftovers by name: every name must be theirs."""
    from emulation.cleanup import _FABRIC_INTF, _is_fabric_host_shell

    for ln in fabric.links:
        for node, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
            assert _FABRIC_INTF.match(f"{node}-eth{port}"), f"{node}-eth{port}"
            assert _is_fabric_host_shell(["bash", "--norc", "-is", f"mininet:{node}"]), node


def test_a_dual_plane_description_file_carries_the_second_nics(tmp_path) -> None:
    """A controller given the description routes both planes; a second NIC on a port no link
    joins is refused, naming the field."""
    import json

    from aifabric.lab import description

    fab = af.dual_plane(leaves=2, spines=1, hosts_per_leaf=2)
    path = description.FabricDescription.from_fabric(fab).write(tmp_path / "fabric.json")
    again = description.load(path).to_fabric()
    assert again.hosts == fab.hosts
    assert compute_forwarding(TopologyModel(again)) == compute_forwarding(TopologyModel(fab))
    data = json.loads(path.read_text())
    assert data["hosts"][3]["extra_nics"][0]["interface"] == "t1h1-eth1"
    data["hosts"][3]["extra_nics"][0]["switch_port"] = 9
    path.write_text(json.dumps(data))
    with pytest.raises(description.DescriptionError, match=r"hosts\[3\]\.extra_nics\[0\]\.switch_port: no link"):
        description.load(path)
    data["hosts"][3]["extra_nics"][0]["routes4"] = ["10.211.0.0/33"]
    path.write_text(json.dumps(data))
    with pytest.raises(description.DescriptionError, match=r"routes4\[0\]: '10.211.0.0/33' is not an IPv4 network"):
        description.load(path)
