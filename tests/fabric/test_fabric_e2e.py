"""A k=4 fat-tree end to end, on softswitch and (where installed) on BMv2: every ordered host
pair reaches each other over IPv4 and IPv6, and many flows between two pods use all four core
switches (read from the switches' egress port counters)."""
from __future__ import annotations

import os

import pytest

from aifabric.lab import checks
from aifabric.lab.lab import Lab
from topologies.fabric import fat_tree
from emulation.p4switch import port_accepts
from teardown_check import assert_torn_down
from targets import FABRIC_TARGETS

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)")]



@pytest.mark.parametrize("target", FABRIC_TARGETS)
def test_fat_tree_k4_all_pairs_and_ecmp(target, tmp_path):
    fabric = fat_tree(4)
    busy = [s.name for s in fabric.switches if port_accepts(s.grpc_port)]
    assert not busy, f"gRPC ports of {busy} are taken: another fabric is running"
    with Lab(fabric, target=target, log_dir=tmp_path) as lab:
        for family in ("ipv4", "ipv6"):
            reach = checks.all_pairs(lab, family)
            assert reach.pairs == 240
            assert reach.reached == 240, f"{family}: unreached {reach.failures()}"
            # one echo request in flight per host: a loss-free fabric answers every first one
            assert not reach.needed_retry, f"{family}: pairs whose first echo request was lost: {reach.needed_retry}"
        per_core, sent = checks.ecmp_over_cores(lab, flows=64, count=10)
        total = sum(per_core.values())
        # a slow target may lose part of the bursts; what matters is where the rest went
        assert total >= 0.5 * sent, f"{sent} datagrams sent, the cores forwarded only {per_core}"
        assert all(n > 0 for n in per_core.values()), f"some core carried nothing: {per_core}"
        assert max(per_core.values()) < 0.5 * total, f"one core took half of the flows: {per_core}"
    assert_torn_down(fabric)
