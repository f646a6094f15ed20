"""The process group on a real k=4 fat-tree (slow: 20 switches, one fabric for the module): a
rank on each of the 16 hosts running operations x algorithms, a non-power-of-two group across
pods, and in-network all_reduce made by the switches. Every rank checks each of its results
against numpy (hostagent.collectives.verify: int32 exact, floats within the stated bound), so a
run is right only when every rank said so.
"""
from __future__ import annotations

import os

import pytest
from targets import FULL_FABRIC_TARGETS

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)"),
]


@pytest.fixture(scope="module", params=FULL_FABRIC_TARGETS)
def fabric_lab(request):
    from aifabric.lab.lab import Lab
    from controller.aggregation import JobManager
    from topologies.fabric import fat_tree

    with Lab(fat_tree(4), target=request.param) as lab:
        yield lab, JobManager(lab.controller)


def _hosts(lab) -> list[str]:
    return sorted(h.name for h in lab.fabric.hosts)


def test_sixteen_ranks_every_operation(fabric_lab):
    from aifabric.experiments.collectives_lab import run_group
    lab, _ = fabric_lab
    calls = ("all_reduce:ring,all_reduce:tree,all_reduce:halving_doubling,all_reduce:hierarchical,all_reduce:auto,"
             "reduce_scatter:ring,reduce_scatter:halving_doubling,all_gather:ring,all_gather:halving_doubling,"
             "all_to_all:pairwise,broadcast:tree,broadcast:ring,reduce:tree,reduce:ring,barrier:dissemination")
    # a rendezvous: the first call's deadline starts once all 16 ranks are up (16 Python processes
    # starting beside 20 switches can take longer than a call's deadline on a busy 2-core machine)
    run = run_group(lab, _hosts(lab), calls, [1, 4097], dtype="float32", timeout=60.0, rendezvous_port=29501)
    assert run.ok, run.errors
    assert len(run.reports) == 16 and all(len(r["calls"]) == 30 for r in run.reports)


@pytest.mark.parametrize("dtype", ["int32", "bfloat16"])
def test_five_ranks_across_pods(fabric_lab, dtype):
    """Not a power of two: halving-doubling folds a rank in; hosts in four pods. The ranks find each
    other at a rendezvous (rank 0's host runs the store), not from a list of their addresses."""
    from aifabric.experiments.collectives_lab import run_group
    lab, _ = fabric_lab
    hosts = ["p0e0h0", "p1e0h1", "p2e1h0", "p3e1h1", "p0e1h0"]
    run = run_group(lab, hosts, "all_reduce:halving_doubling,all_reduce:tree,reduce_scatter:halving_doubling,"
                    "all_to_all:pairwise", [65, 1000], dtype=dtype, timeout=60.0, rendezvous_port=29500)
    assert run.ok, run.errors
    assert [r["world"] for r in run.reports] == [5] * 5


def test_in_network_all_reduce_is_made_by_the_switches(fabric_lab):
    from aifabric.experiments.collectives_lab import run_group
    lab, manager = fabric_lab
    hosts = [f"p{p}e{e}h0" for e in range(2) for p in range(4)]
    # 8 slots: at 32 slots x 8 workers, unshaped, BMv2 here lost results faster than the workers
    # gave up on them (200 retransmissions); at 8 it keeps up
    run = run_group(lab, hosts, "all_reduce:in_network,all_reduce:auto", [3000, 20000], dtype="float32",
                    manager=manager, server="p3e1h1", slots=8, timeout=60.0)
    assert run.ok, run.errors
    assert run.in_network
    assert run.agg_ops["completed"] >= 2 * (-(-20000 // LAB_FRAME_VALUES))  # the switches finished the chunks
    assert run.server.get("packets_in", -1) == 0                   # nothing reached the fallback aggregator
    assert [c.get("chose") for c in run.calls()][-1] == "in_network"  # auto took the switches for 80 kB


def test_open_mpi_all_reduce_across_four_hosts(fabric_lab):
    """Open MPI beside ours: mpirun in one host, a daemon in each other host's namespace, TCP over
    the fabric; every rank checks MPI_Allreduce's sum against numpy (the runner's bound)."""
    from aifabric.experiments.mpi_lab import available, run_mpi
    lab, _ = fabric_lab
    assert available() is None, available()      # scripts/bootstrap.sh installs openmpi-bin and mpi4py
    hosts = ["p0e0h0", "p1e0h1", "p2e1h0", "p3e1h1"]
    run = run_mpi(lab, hosts, ["all_reduce"], [4097], deadline_s=120.0)
    assert run.ok, run.errors
    assert [r["rank"] for r in run.reports] == [0, 1, 2, 3] and all(r["world"] == 4 for r in run.reports)
    assert all(c["ok"] and c["elements"] == 4097 for r in run.reports for c in r["calls"])
