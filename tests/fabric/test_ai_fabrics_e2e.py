"""Rail-optimised, dual-plane and dragonfly fabrics end to end, on softswitch and (where installed)
BMv2: every ordered host pair reaches each other over IPv4 and IPv6 (a dual-plane host on each of
its two planes), routed by the same controller as the fat-tree."""
from __future__ import annotations

import os

import pytest
from targets import FABRIC_TARGETS

from aifabric.lab import checks
from aifabric.lab.lab import Lab
from topologies import ai_fabrics as af
from topologies.fabric import Fabric
from emulation.p4switch import port_accepts
from teardown_check import assert_torn_down

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")]

SHAPES = [
    pytest.param(af.rail_optimised(servers=2, gpus=2, spines=2), id="rail"),
    pytest.param(af.dual_plane(leaves=2, spines=1, hosts_per_leaf=2), id="dualplane"),
    pytest.param(af.dragonfly(groups=3, routers=2, hosts_per_router=1, global_links=2), id="dragonfly"),
]


@pytest.mark.parametrize("target", FABRIC_TARGETS)
@pytest.mark.parametrize("fabric", SHAPES)
def test_all_pairs(fabric: Fabric, target: str, tmp_path) -> None:
    busy = [s.name for s in fabric.switches if port_accepts(s.grpc_port)]
    assert not busy, f"gRPC ports of {busy} are taken: another fabric is running"
    n = len(fabric.hosts)
    nics = range(len(fabric.hosts[0].nics()))
    with Lab(fabric, target=target, log_dir=tmp_path) as lab:
        for nic in nics:
            for family in ("ipv4", "ipv6"):
                reach = checks.all_pairs(lab, family, nic=nic)
                assert reach.pairs == n * (n - 1)
                assert reach.reached == reach.pairs, f"NIC {nic} {family}: unreached {reach.failures()}"
                assert not reach.needed_retry, f"NIC {nic} {family}: first echo request lost: {reach.needed_retry}"
    assert_torn_down(fabric)
