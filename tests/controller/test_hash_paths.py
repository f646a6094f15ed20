"""The fabric's hash as a library (`controller.load_balance.hash_paths`) and what hosts do with it
(`controller.load_balance.disjoint`), on the committed fabric program in offline switches.

That the paths are the real switches' choices is checked on a running fabric
(tests/fabric/test_load_balance_fabric.py, INT against `HashPaths`); here: the paths are ones
the routes allow and depend on each switch's seed; disjoint ports put a permutation on
distinct links where ECMP's random ports do not; a pair's queue pairs take distinct paths.
"""
from __future__ import annotations

import random
from collections import Counter

import pytest

from controller import entries as E
from controller.fabric_controller import FabricController, Pipeline
from controller.load_balance.disjoint import disjoint_ports, link_loads, qp_ports
from controller.load_balance.hash_paths import FiveTuple, HashPaths
from controller.paths import installed_paths
from hostagent.traffic import patterns
from topologies.fabric import fat_tree

SPORTS = range(49152, 49152 + 64)


@pytest.fixture(scope="module")
def controller():
    ctl = FabricController(fat_tree(4), Pipeline.from_build_dir())
    yield ctl
    ctl.close()


@pytest.fixture(scope="module")
def paths(controller):
    with HashPaths.of(controller) as hp:
        yield hp


def test_every_path_is_one_the_routes_allow_and_ecmp_uses_them_all(controller, paths):
    allowed = set(installed_paths(controller.fabric, controller.forwarding, "p0e0h0", "p3e1h1"))
    seen = Counter(paths.path(FiveTuple("p0e0h0", "p3e1h1", sport)) for sport in SPORTS)
    assert set(seen) <= allowed
    assert set(seen) == allowed and len(allowed) == 4, seen     # 64 ports reach all 4 cores
    local = paths.path(FiveTuple("p0e0h0", "p0e0h1", 50000))
    assert [(h.switch, h.ingress_port, h.egress_port) for h in local] == [("p0e0", 1, 2)]


def test_paths_follow_each_switch_seed(controller):
    """Without seeds (hash_config's default, a multiplier of 1) every switch hashes alike, and
    the library shows what the program then does: the source port, which enters the CRC twice
    (its field and the fold in ecmp_mix), moves no flow at the two-way groups of a k=4 fat-tree:
    64 ports, one path. With the controller's seeds they spread over all four cores."""
    fabric = controller.fabric
    ctl = FabricController(fabric, Pipeline.from_build_dir(), ecmp_seeds=False)
    try:
        with HashPaths.of(ctl) as flat, HashPaths.of(controller) as seeded:
            def cores(hp):
                return Counter(hp.path(FiveTuple("p0e0h0", "p3e1h1", sport))[2].switch for sport in SPORTS)
            assert len(cores(flat)) == 1, cores(flat)
            assert len(cores(seeded)) == 4, cores(seeded)
    finally:
        ctl.close()


def test_a_seed_entity_is_what_changes_the_choice(controller):
    """The library reads the seed from the desired entities: the same fabric with one edge
    switch's seed changed moves some flows (the hash is the program's, fed by the state)."""
    p4info = controller.pipeline.p4info
    states = {name: agent.desired_state() for name, agent in controller.agents.items()}
    desired, owns = states["p0e0"]
    seed_id = p4info.table_id(E.HASH_CONFIG)
    other = E.default_entry(p4info, E.HASH_CONFIG, E.SET_HASH_SEED, seed=12345)
    states["p0e0"] = ([e for e in desired if e.table_entry.table_id != seed_id] + [other], owns)
    flows = [FiveTuple("p0e0h0", "p3e1h1", sport) for sport in SPORTS]
    with HashPaths.of(controller) as before, \
            HashPaths(controller.fabric, p4info.message, controller.pipeline.device_config, states) as after:
        moved = sum(before.path(f)[0].egress_port != after.path(f)[0].egress_port for f in flows)
    assert 8 <= moved <= 56, moved        # about half of 64 flows change uplink


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_disjoint_ports_put_a_permutation_on_distinct_links(controller, paths, seed):
    names = [h.name for h in controller.fabric.hosts]
    flows = [FiveTuple(f.src, f.dst, f.sport) for f in patterns.permutation(names, seed)]
    ecmp = link_loads(paths, flows)
    chosen = disjoint_ports(paths, flows, seed)
    assert [(f.src, f.dst) for f in chosen] == [(f.src, f.dst) for f in flows]
    loads = link_loads(paths, chosen)
    assert max(loads.values()) == 1, {k: v for k, v in loads.items() if v > 1}
    assert max(ecmp.values()) > 1          # the random ports collided: the test has something to fix


def test_a_pairs_queue_pairs_take_distinct_paths(paths):
    taken: set[int] = set()
    flow = FiveTuple("p1e0h1", "p2e1h0", 50000)
    qps = qp_ports(paths, flow, 4, random.Random(7), taken)
    assert qps[0] == flow and len({q.sport for q in qps}) == 4 and {q.sport for q in qps} <= taken
    assert len({paths.path(q) for q in qps}) == 4
    more = qp_ports(paths, flow, 6, random.Random(7), set())       # more QPs than paths: ports still distinct
    assert len({q.sport for q in more}) == 6 and len({paths.path(q) for q in more}) == 4


def test_a_five_tuple_that_is_wrong_is_named():
    with pytest.raises(ValueError, match="protocol 'icmp'"):
        FiveTuple("a", "b", 1, protocol="icmp")
    with pytest.raises(ValueError, match="flow label needs IPv6"):
        FiveTuple("a", "b", 1, flow_label=3)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_static_pins_spread_a_collective_evenly(controller, seed):
    """Each flow's pins name one of its installed paths (a pin where the routes give a choice),
    and those paths put at most one flow on a link."""
    from controller.load_balance.static import static_pins
    names = [h.name for h in controller.fabric.hosts]
    flows = [FiveTuple(f.src, f.dst, f.sport) for f in patterns.collective(names, seed)]
    pins = static_pins(controller, flows)
    loads: Counter = Counter()
    for flow in flows:
        mine = {p.switch: p.port for p in pins if (p.sport, p.dport) == (flow.sport, flow.dport)
                and p.src_ip == str(controller.fabric.host(flow.src).ip4.ip)}
        paths = [p for p in installed_paths(controller.fabric, controller.forwarding, flow.src, flow.dst)
                 if all(mine.get(h.switch, h.egress_port) == h.egress_port for h in p)]
        assert len(paths) == 1, (flow, mine)
        loads.update((a.switch, b.switch) for a, b in zip(paths[0], paths[0][1:]))
    assert max(loads.values()) == 1, loads
