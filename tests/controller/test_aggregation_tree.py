"""Aggregation trees and the slot pool, on the topology model alone (no emulator)."""
import pytest

from controller.aggregation import SlotPool, choose_tree
from controller.topology import TopologyModel
from topologies.fabric import fat_tree, leaf_spine


def _tree(fabric, names, salt=0):
    return choose_tree(TopologyModel(fabric), [fabric.host(n) for n in names], salt)


def test_one_rack_is_aggregated_by_its_edge_switch_alone():
    t = _tree(fat_tree(4), ["p0e0h0", "p0e0h1"])
    assert t.root == "p0e0" and list(t.nodes) == ["p0e0"]
    assert t.worker_ids == {"p0e0h0": 0, "p0e0h1": 1}
    assert t.nodes["p0e0"].fan_in == 2


def test_one_pod_is_rooted_at_an_aggregation_switch():
    fab = fat_tree(4)
    t = _tree(fab, ["p0e0h0", "p0e0h1", "p0e1h0"])
    assert t.root in ("p0a0", "p0a1")
    root = t.nodes[t.root]
    assert [c.name for c in root.children] == ["p0e0", "p0e1"]
    assert t.nodes["p0e0"].fan_in == 2 and t.nodes["p0e1"].fan_in == 1
    # every child reaches its parent over a real link, through the ports the tree names
    for node in t.nodes.values():
        if node.parent is None:
            continue
        link = next(ln for ln in fab.links if {ln.a, ln.b} == {node.switch, node.parent})
        assert link.port_of(node.switch) == node.parent_port
        parent_child = t.nodes[node.parent].children[node.index_at_parent]
        assert parent_child.name == node.switch and parent_child.port == link.port_of(node.parent)


def test_pods_are_joined_at_a_core_and_the_job_id_spreads_roots():
    names = ["p0e0h0", "p1e1h1", "p2e0h0", "p3e1h0"]
    roots = {_tree(fat_tree(4), names, salt).root for salt in range(4)}
    assert roots == {"c0", "c1", "c2", "c3"}
    t = _tree(fat_tree(4), names)
    assert t.nodes[t.root].fan_in == 4
    assert sum(1 for c in (c for n in t.nodes.values() for c in n.children) if c.is_host) == 4


def test_leaf_spine_tree_and_unique_worker_ids_per_switch():
    t = _tree(leaf_spine(4, 2, 2), ["l0h0", "l0h1", "l3h1"])
    assert t.root.startswith("s")
    for node in t.nodes.values():
        assert [c for c in node.children] and len({c.name for c in node.children}) == node.fan_in
    assert t.worker_ids["l0h0"] != t.worker_ids["l0h1"]


def test_slot_pool_first_fit_and_exhaustion():
    pool = SlotPool(100)
    a = pool.allocate(40)
    b = pool.allocate(40)
    assert (a, b) == (0, 40)
    assert pool.allocate(30) is None          # 20 left
    pool.free(a)
    assert pool.allocate(30) == 0             # the hole is reused
    assert pool.free_slots == 30
    with pytest.raises(ValueError):
        pool.allocate(0)
    with pytest.raises(KeyError):
        pool.free(99)
