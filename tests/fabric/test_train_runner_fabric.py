"""A training workload (aifabric.workloads, the tiny preset) executed on a real k=4 fat-tree
(softswitch; one fabric for the module): two iterations with data parallelism alone and with
DP x TP x PP, every rank on the host its placement gives it. Every rank finishes both iterations
with every op run, and the accounting holds on each rank: the time not spent computing is spent
in communication the rank waits on (step = compute + exposed communication, idle within a few
percent), and compute is the ops' emulated durations. A rank killed mid-run ends every other
rank's run with an error naming it; the fabric is torn down after.
"""
from __future__ import annotations

import os
import re

import pytest

from teardown_check import assert_torn_down

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)"),
]


@pytest.fixture(scope="module")
def lab():
    from aifabric.lab.lab import Lab
    from topologies.fabric import fat_tree

    fabric = fat_tree(4)
    with Lab(fabric, target="softswitch") as lab:
        yield lab
    assert_torn_down(fabric)


def _workload(fabric, **par):
    from aifabric.workloads import Job, Parallelism, Scale, estimate, fit, generate, place, preset
    job = Job(preset("tiny"), Parallelism(**par))
    scale = fit(estimate(generate(job, Scale(1.0))).step_s, 1.0)
    return generate(job, scale, place(fabric, job.parallelism))


@pytest.mark.parametrize("par", [dict(dp=8), dict(dp=2, tp=2, pp=2, micro_batches=2)], ids=["dp8", "dp2-tp2-pp2"])
def test_every_rank_runs_its_ops_and_the_accounting_holds(lab, par, tmp_path):
    from aifabric.experiments.train_runner import run_workload
    workload = _workload(lab.fabric, **par)
    run = run_workload(lab, workload, 2, tmp_path / "plan.json")
    assert run.ok, run.errors
    for rank, rep in enumerate(run.reports):
        ops = workload.ops(rank)
        assert len(rep["iterations"]) == 2
        for it in rep["iterations"]:
            assert [o["id"] for o in it["ops"]] == [op.id for op in ops]
            for o, op in zip(it["ops"], ops):
                assert all(it["ops"][d]["end"] <= o["start"] for d in op.deps)   # dependencies respected
            step = it["step_s"]
            assert it["compute_s"] + it["exposed_comm_s"] + it["idle_s"] == pytest.approx(step)
            assert it["idle_s"] <= 0.05 * step + 0.01, it                       # nothing but compute and comm
            emulated = sum(op.emulated_seconds for op in ops if op.is_compute)
            assert emulated <= it["compute_s"] <= 1.2 * emulated + 0.02          # compute = the ops' durations
            assert it["exposed_comm_s"] > 0 and set(it["comm_by_kind_s"]) == {op.kind.value for op in ops
                                                                                if not op.is_compute}


def test_a_killed_rank_stops_every_rank_with_its_name(lab, tmp_path):
    from aifabric.experiments.train_runner import run_workload
    workload = _workload(lab.fabric, dp=2, tp=2, pp=2, micro_batches=2)
    run = run_workload(lab, workload, 1000, tmp_path / "plan.json", silent_after=3.0, kill_rank_after=(5, 3.0),
                       deadline_s=60.0)
    assert not run.ok
    host = workload.placement.host(5)
    assert f"rank 5 ({host}): killed" in run.errors
    others = [e for e in run.errors if not e.startswith("rank 5 ")]
    assert len(others) == 7, run.errors                    # every other rank stopped with an error, none hung
    assert all("PeerSilent" in e or "Aborted" in e for e in others), others
    # the first rank to give up waited on rank 5 itself (no other rank was dead yet), at the
    # iteration's barrier or in an op of a group with it; the rest may blame whoever stopped first
    assert any("barrier: PeerSilent: rank 5 is silent" in e or
               re.search(r"PeerSilent: rank \d+ is silent: [^()]*\([^()]*\); dead or unreachable \(global rank 5\)", e) for e in others), others
