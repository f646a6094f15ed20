"""In-network AllReduce on a real k=4 fat-tree (slow: 20 switches), in frames of 64 and 320 values,
with ring and parameter-server baselines, loss, concurrent jobs, the pool-full fallback and
refused job requests.

Every worker process checks its result against the exact sum of all workers' tensors (int32
exactly, float32 within the quantisation bound), so `RunResult.ok` means every worker got the
right answer. That the switches did the adding is shown by their ``agg_ops`` counters and by
the parameter server, which sees no packet of an in-network job.
"""
from __future__ import annotations

import os
import re
import threading

import pytest
from targets import FABRIC_TARGETS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)"),
]

RATE = "1M"             # links limited so a burst of windows never outruns the switches' CPU


@pytest.fixture(scope="module", params=FABRIC_TARGETS)
def fabric_lab(request):
    from aifabric.lab.lab import Lab
    from aifabric.lab.links import LinkPlan, LinkRate, limit_links
    from controller.aggregation import JobManager
    from controller.loss import LossEmulation
    from topologies.fabric import fat_tree

    with Lab(fat_tree(4), target=request.param) as lab:
        limit_links(lab, LinkPlan(LinkRate.parse(RATE)))
        yield lab, JobManager(lab.controller), LossEmulation(lab.controller)


def _run(fabric_lab, algorithm, workers, server, **kw):
    from aifabric.experiments.allreduce_lab import run_allreduce
    lab, manager, _ = fabric_lab
    kw.setdefault("timeout", 1.0)
    return run_allreduce(lab, manager, algorithm, workers, server, **kw)


EIGHT_PODS = [f"p{p}e{e}h0" for e in range(2) for p in range(4)]      # 8 workers over 4 pods: a core


@pytest.mark.parametrize("workers, elements, dtype, frame_values", [
    (["p0e0h0", "p0e0h1"], 1000, "int32", 64),                          # one rack: the edge is the root
    (["p0e0h0", "p0e0h1", "p0e1h0"], 777, "float32", 64),              # one pod: an aggregation switch
    (EIGHT_PODS, 3000, "float32", 64),
    (EIGHT_PODS, 3000, "int32", 64),                                    # SwitchML's frames and the largest,
    (EIGHT_PODS, 3000, "int32", 320),                                   # int32 exact through three levels
    (["p0e0h0", "p0e0h1", "p0e1h0"], 777, "float32", 320),
], ids=["2-rack", "3-pod", "8-pods", "8-pods-int32", "8-pods-int32-320", "3-pod-320"])
def test_in_network_sum_is_right_and_made_by_the_switches(fabric_lab, workers, elements, dtype, frame_values):
    r = _run(fabric_lab, "innetwork", workers, "p3e1h1", elements=elements, dtype=dtype, frame_values=frame_values)
    assert r.ok, r.errors
    assert r.in_network
    assert all(w["frame_values"] == frame_values for w in r.per_worker)
    chunks = -(-elements // frame_values)
    assert r.agg_ops["completed"] >= chunks                      # a root finished every chunk
    assert r.server.get("packets_in", -1) == 0                   # nothing reached the fallback aggregator
    assert r.agg_ops["refused"] == 0
    for w in r.per_worker:                                       # one packet out and one in per chunk
        assert w["packets_sent"] >= chunks and w["packets_received"] >= chunks
        assert w["bytes_sent"] == w["packets_sent"] * (16 + 4 * frame_values)   # frames of the job's size
    _assert_nothing_was_lost(r)


def _assert_nothing_was_lost(r):
    """A loss-free fabric answers every chunk's first contribution once: a worker retransmits
    (up to `retries` times a chunk) only when a result did not come, so a result the switches
    lost would still give a right sum; the retransmissions and the copies they cause tell."""
    per_worker = {w["host"]: (w["retransmissions"], w["duplicates"]) for w in r.per_worker}
    assert all(v == (0, 0) for v in per_worker.values()), f"(retransmissions, duplicates) per worker: {per_worker}"
    dups = {k: r.agg_ops[k] for k in ("dup_answered", "dup_dropped", "dup_resent_up")}
    assert not any(dups.values()), f"the switches saw contributions twice: {dups}"


@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_in_network_recovers_from_loss(fabric_lab, loss):
    lab, _, emulation = fabric_lab
    workers = ["p0e0h0", "p1e0h0", "p2e1h0"]
    try:
        for w in workers:            # both directions of every worker's link, and the tree's uplinks
            host = lab.fabric.host(w)
            emulation.set_link(w, host.switch, loss)
            for a in ("p0a0", "p0a1"):
                emulation.set_link("p0e0", a, loss)
        # SwitchML's 64-value frames: 250 chunks a worker, so that 1% loss surely hits some
        r = _run(fabric_lab, "innetwork", workers, "p3e1h1", elements=16000, dtype="int32", timeout=0.5,
                 frame_values=64)
    finally:
        emulation.clear()
    assert r.ok, r.errors
    assert sum(w["retransmissions"] for w in r.per_worker) > 0
    assert r.agg_ops["dup_answered"] + r.agg_ops["dup_dropped"] + r.agg_ops["dup_resent_up"] > 0


def test_two_jobs_at_once_stay_apart(fabric_lab):
    results = {}

    def job(name, workers, server, seed, dtype):
        results[name] = _run(fabric_lab, "innetwork", workers, server, elements=2500, dtype=dtype, seed=seed)

    threads = [threading.Thread(target=job, args=("a", ["p0e0h0", "p1e0h0", "p2e0h0"], "p3e0h0", 11, "int32")),
               threading.Thread(target=job, args=("b", ["p0e1h0", "p1e1h0", "p2e1h1"], "p3e1h0", 22, "float32"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"].ok, results["a"].errors
    assert results["b"].ok, results["b"].errors
    assert results["a"].in_network and results["b"].in_network
    _assert_nothing_was_lost(results["a"])
    _assert_nothing_was_lost(results["b"])


def test_a_job_without_slots_falls_back_to_the_parameter_server(fabric_lab):
    _, manager, _ = fabric_lab
    hog = manager.pool.allocate(manager.pool.free_slots)          # the pool is full
    try:
        r = _run(fabric_lab, "innetwork", ["p0e0h0", "p1e1h1"], "p2e0h0", elements=700, dtype="int32")
    finally:
        manager.pool.free(hog)
    assert r.ok, r.errors
    assert not r.in_network
    frames = -(-700 // r.per_worker[0]["frame_values"])          # the lab's frame size, every chunk to the server
    assert r.server["packets_in"] >= 2 * frames


@pytest.mark.parametrize("algorithm", ["ring", "ps"])
def test_baselines_are_right_too(fabric_lab, algorithm):
    r = _run(fabric_lab, algorithm, ["p0e0h0", "p1e0h1", "p3e1h0"], "p2e0h0", elements=1500, dtype="float32")
    assert r.ok, r.errors


def test_bad_job_requests_are_refused_with_the_reason(fabric_lab):
    from controller.aggregation import JobError
    _, manager, _ = fabric_lab
    cases = [
        ((["p0e0h0", "nohost"], "p1e0h0"), "unknown host(s) nohost"),
        ((["p0e0h0", "p0e0h0"], "p1e0h0"), "named twice"),
        ((["p0e0h0"], "p1e0h0"), "at least 2 workers"),
        ((["p0e0h0", "p1e0h0"], "p1e0h0"), "cannot also be a worker"),
    ]
    for (workers, server), words in cases:
        with pytest.raises(JobError, match=re.escape(words)):
            manager.start(workers, server)
    with pytest.raises(JobError, match="slots=0"):
        manager.start(["p0e0h0", "p1e0h0"], "p2e0h0", slots=0)
    assert not manager.jobs
