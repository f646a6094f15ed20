"""Training through a real k=4 fat-tree, one fabric for the whole module on each target
(softswitch, and BMv2 where it is installed).

A model trained data-parallel: 8 ranks, one per host over four pods, learn the digits with their
gradients summed in the switches and by ring. Each run must follow the single-process reference
over the same steps (same seed, shards, batches): the in-network run the reference that replays
the switches' quantisation, the ring run the exact one, both within 1 point of its final
accuracy; every rank finishes. A rank killed mid-run ends the run with an error naming it on
every rank.

A training workload (aifabric.workloads, the tiny preset) executed by `aifabric train`'s runner:
two iterations with data parallelism alone and with DP x TP x PP, every rank on the host its
placement gives it. Every rank finishes both iterations with every op run, and the accounting
holds on each rank: the time not spent computing is spent in communication the rank waits on
(step = compute + exposed communication, idle within a few percent), and compute is the ops'
emulated durations. With in-network collectives the data-parallel all-reduces are summed by
the switches (their chunks completed, nothing at the fallback aggregator) while TP stays on the
ring. A rank killed mid-run ends every other rank's run with an error naming it; with a restart
allowed the job goes on from the ranks' checkpoint instead, the iterations since done again.

Under the hosts' PLB agents (the ranks' transport RoCEv2-like, hostagent.collectives.rocev2),
with PLB taking every path for congested (K = 0), the agents repath the training's flows and the
ring training still follows the exact reference step by step.

On BMv2 the tests that check the switches' part run (the trainings against their references,
the runner's accounting, the DP all-reduces in the switches); the killed-rank, restart and PLB tests check
the hosts' side alone (the process group, the agents) and run on softswitch only.

The fabric is torn down after.
"""
from __future__ import annotations

import math
import os
import re

import pytest

from hostagent_support import bcc_missing
from targets import FULL_FABRIC_TARGETS
from teardown_check import assert_torn_down

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, raw sockets)"),
]

STEPS = 30            # the reference reaches ~90% test accuracy from ~13%: a step that goes wrong shows
HOSTS = [f"p{p}e{e}h0" for e in range(2) for p in range(4)]
SERVER = "p3e1h1"     # the in-network job's fallback aggregator (must see nothing)


@pytest.fixture(scope="module", params=FULL_FABRIC_TARGETS)
def lab(request):
    from aifabric.lab.lab import Lab
    from controller.aggregation import JobManager
    from topologies.fabric import fat_tree

    fabric = fat_tree(4)
    with Lab(fabric, target=request.param) as lab:
        yield lab, JobManager(lab.controller)
    assert_torn_down(fabric)


def _hosts_side_alone(lab) -> None:
    """Skip on BMv2, saying why: what the test checks does not depend on the switches' target."""
    if lab[0].target != "softswitch":
        pytest.skip("checks the hosts' side alone (process group, agents): run on softswitch")


@pytest.fixture(scope="module")
def training(lab, tmp_path_factory):
    pytest.importorskip("sklearn")
    from aifabric.experiments.train_lab import digits_split, references
    from hostagent.training.step import Config

    data = tmp_path_factory.mktemp("train") / "digits.npz"
    split = digits_split(data)
    refs = references(split, Config(), len(HOSTS), STEPS)
    return (*lab, data, refs)


def _gap(a, b, key="loss"):
    return max(abs(x[key] - y[key]) for x, y in zip(a, b, strict=True))


def _every_rank_finished_alike(run, steps=STEPS):
    assert run.ok, run.errors
    assert len(run.reports) == len(HOSTS)
    for r in run.reports:
        assert len(r["steps"]) == steps
        assert [s["loss"] for s in r["steps"]] == [s["loss"] for s in run.steps(0)]   # one model on every rank


def test_in_network_training_follows_the_quantised_reference(training):
    from aifabric.experiments.train_lab import train_on_fabric
    lab, manager, data, refs = training
    run = train_on_fabric(lab, HOSTS, "in_network", data, STEPS, manager=manager, server=SERVER)
    _every_rank_finished_alike(run)
    assert run.in_network
    # the switches added every frame of the lab's size (LAB_FRAME_VALUES, the job's and the replay's)
    assert run.agg_ops["completed"] >= STEPS * -(-run.reports[0]["parameters"] // LAB_FRAME_VALUES)
    assert run.server.get("packets_in", -1) == 0
    # the switches add integers (no order to differ in): the replay's sums to the bit, so its loss
    # curve (a ring's float additions already differ by ~1e-7); the replay itself stays within the
    # quantisation bound at every step (hostagent.training.reference)
    assert _gap(run.steps(), refs["in_network"]) == 0.0
    assert all(r["grad_error"] <= r["grad_bound"] for r in refs["in_network"])
    assert abs(run.steps()[-1]["test_acc"] - refs["exact"][-1]["test_acc"]) <= 0.01
    assert refs["exact"][-1]["test_acc"] > 0.8


def test_a_job_that_lost_a_rank_goes_on_from_its_checkpoint_in_the_switches(training):
    """Rank 3 crashes at step 15 of 30 and the launcher stops the others at once; the job,
    checkpointed every 10 steps, starts again from step 10 on a fresh aggregation job and its
    steps 10-29 are the quantised reference's to the bit (the switches add integers)."""
    from aifabric.experiments.train_lab import train_on_fabric
    lab, manager, data, refs = training
    # the library's silence timeout (5 s): with 3 s, BMv2's fabric lost the first attempt before its
    # first checkpoint to a rank heard nothing from for 3.46 s (not the crashed one)
    run = train_on_fabric(lab, HOSTS, "in_network", data, STEPS, manager=manager, server=SERVER,
                          exit_rank_at=(3, 15), checkpoint_every=10, restarts=1, deadline_s=120.0)
    assert [r["resumed_from"] for r in run.restarts] == [10], run.restarts
    failed = run.restarts[0]["errors"]          # the launcher stopped the others as soon as rank 3 ended
    assert failed[3] == f"rank 3 ({HOSTS[3]}): no output (exit status 137)", failed
    assert sum(f"stopped by the launcher when rank 3 ({HOSTS[3]}) failed" in e for e in failed) == len(HOSTS) - 1, failed
    _every_rank_finished_alike(run, STEPS - 10)
    assert run.first_step == 10 and [s["step"] for s in run.steps()] == list(range(10, STEPS))
    assert run.in_network and run.server.get("packets_in", -1) == 0
    assert _gap(run.steps(), refs["in_network"][10:]) == 0.0


def test_ring_training_follows_the_exact_reference(training):
    from aifabric.experiments.train_lab import train_on_fabric
    lab, _, data, refs = training
    run = train_on_fabric(lab, HOSTS, "ring", data, STEPS)
    _every_rank_finished_alike(run)
    assert _gap(run.steps(), refs["exact"]) <= 1e-4        # only the order of float additions differs
    assert abs(run.steps()[-1]["test_acc"] - refs["exact"][-1]["test_acc"]) <= 0.01


PLB_STEPS = 10


@pytest.mark.skipif(bcc_missing() is not None, reason=str(bcc_missing()))
def test_plb_repaths_the_rocev2_training_flows_and_the_training_stays_exact(training, tmp_path):
    from aifabric.experiments.train_lab import train_on_fabric
    from hostagent.agent.config import AgentConfig
    from hostagent.agent.load_balance_plb import PlbParams
    _hosts_side_alone(training)
    lab, _, data, refs = training
    # every path congested as PLB sees it (K = 0: every round with deliveries is a congested one;
    # the module's links are not limited, so the switches' queues stay too short to mark), N = 1
    config = AgentConfig("plb", round_s=0.05, plb=PlbParams(rehash_rounds=1, cong_thresh=0), seed=1)
    run = train_on_fabric(lab, HOSTS, "ring", data, PLB_STEPS, host_agent=config, agent_dir=tmp_path)
    _every_rank_finished_alike(run, PLB_STEPS)
    # the agents saw the ranks' flows as RoCEv2 (receiver reports make PLB rounds) and moved them
    assert run.agents["reports_sent"] > 0 and run.agents["repaths"] > 0, run.agents
    assert _gap(run.steps(), refs["exact"][:PLB_STEPS]) <= 1e-4   # repathed (reordered) and still exact


def test_a_killed_rank_stops_the_training_with_its_name(training):
    from aifabric.experiments.train_lab import TrainingFailed, require_ok, train_on_fabric
    _hosts_side_alone(training)
    lab, _, data, _ = training
    run = train_on_fabric(lab, HOSTS, "ring", data, 100000, silent_after=3.0, kill_rank_after=(3, 4.0),
                          deadline_s=60.0)
    assert not run.ok
    assert f"rank 3 ({HOSTS[3]}): killed" in run.errors
    others = [e for e in run.errors if not e.startswith("rank 3 ")]
    assert len(others) == len(HOSTS) - 1                   # every other rank stopped with an error, none hung
    assert all("PeerSilent" in e or "Aborted" in e for e in others), "\n".join(others)
    assert any("rank 3" in e for e in others), others       # the silent rank is named
    with pytest.raises(TrainingFailed, match="killed"):
        require_ok(run)


# --- a training workload by aifabric train's runner --------------------------------------------

def _workload(fabric, **par):
    from aifabric.workloads import Job, Parallelism, Scale, estimate, fit, generate, place, preset
    job = Job(preset("tiny"), Parallelism(**par))
    scale = fit(estimate(generate(job, Scale(1.0))).step_s, 1.0)
    return generate(job, scale, place(fabric, job.parallelism))


def _accounting_holds(run, workload, iterations):
    assert run.ok, run.errors
    assert run.resent == sum(sum(r["resent"].values()) for r in run.reports)
    lateness: list[float] = []      # a compute op's measured / emulated seconds, every rank
    for rank, rep in enumerate(run.reports):
        ops = workload.ops(rank)
        assert len(rep["iterations"]) == iterations
        # what each rank sent again, by kind, reaches the run (the benches' "packets resent")
        assert set(rep["resent"]) == {"transport", "in_network"} and min(rep["resent"].values()) >= 0, rep["resent"]
        for it in rep["iterations"]:
            assert [o["id"] for o in it["ops"]] == [op.id for op in ops]
            for o, op in zip(it["ops"], ops):
                assert all(it["ops"][d]["end"] <= o["start"] for d in op.deps)   # dependencies respected
            step = it["step_s"]
            assert it["compute_s"] + it["exposed_comm_s"] + it["idle_s"] == pytest.approx(step)
            # a compute op sleeps its emulated seconds: never less; later only by as much as the
            # scheduler wakes its thread late (on a busy machine a few ms an op, so no fixed bound)
            compute = [(o["end"] - o["start"], op.emulated_seconds) for o, op in zip(it["ops"], ops)
                       if op.is_compute]
            assert all(took >= asked for took, asked in compute), compute
            late = sorted(took - asked for took, asked in compute)
            lateness.extend(took / asked for took, asked in compute)
            emulated = sum(asked for _, asked in compute)
            assert emulated <= it["compute_s"] <= sum(took for took, _ in compute) + 1e-6
            # nothing but compute and comm: between ops, idle is a thread's wake-up, which costs what
            # a sleep's lateness measures here and now (median), not a poll's period
            assert it["idle_s"] <= 0.05 * step + 0.01 + len(ops) * late[len(late) // 2], it
            assert it["exposed_comm_s"] > 0 and set(it["comm_by_kind_s"]) == {op.kind.value for op in ops
                                                                                if not op.is_compute}
    # the scheduler only delays, so the most punctual of the run's compute ops shows what the runner
    # asked for: an op that slept twice would keep every op at 2x or more (one that slept its
    # unscaled seconds, microseconds, is short of what it was asked, above)
    assert min(lateness) < 1.5, sorted(lateness)[:5]


@pytest.mark.parametrize("par", [dict(dp=8), dict(dp=2, tp=2, pp=2, micro_batches=2)], ids=["dp8", "dp2-tp2-pp2"])
def test_every_rank_runs_its_ops_and_the_accounting_holds(lab, par, tmp_path):
    from aifabric.experiments.train_runner import run_workload
    workload = _workload(lab[0].fabric, **par)
    run = run_workload(lab[0], workload, 2, tmp_path / "plan.json")
    _accounting_holds(run, workload, 2)
    assert not run.in_network and run.agg_ops == {}
    assert run.estimate["step_s"] > 0 and not run.estimate["in_network"]


def test_data_parallel_all_reduces_in_the_switches(lab, tmp_path):
    """dp=4 x tp=2: two DP groups of 4, so two in-network jobs at once; TP pairs on the ring."""
    from aifabric.experiments.train_runner import in_network_groups, run_workload
    the_lab, manager = lab
    workload = _workload(the_lab.fabric, dp=4, tp=2)
    groups = in_network_groups(workload)
    assert sorted(map(sorted, groups)) == [[0, 2, 4, 6], [1, 3, 5, 7]]     # Megatron's order: TP fastest
    run = run_workload(the_lab, workload, 1, tmp_path / "plan.json", manager=manager)
    _accounting_holds(run, workload, 1)
    assert run.in_network and run.estimate["in_network"]
    # every chunk (a frame of the lab's LAB_FRAME_VALUES values) of every DP all-reduce was finished
    # by a root switch, per group
    chunks = sum(math.ceil(max(1, op.emulated_bytes // 4) / LAB_FRAME_VALUES) for g in groups for op in workload.ops(g[0])
                 if op.stream.value == "dp" and op.kind.value == "all_reduce")
    assert chunks > 0 and run.agg_ops["completed"] >= chunks, (run.agg_ops, chunks)
    assert run.server_stats.get("packets_in", -1) == 0                   # the fallback aggregator saw nothing
    assert all(r["in_network_group"] is not None for r in run.reports)
    load = run.link_load
    assert load["fabric_packets"] > 0 and load["busiest"]


OUTAGE_S = 2.0
OUTAGE_ITERATION = 3


def test_a_scheduled_link_failure_is_lived_through_and_placed_in_the_iterations_it_cost(lab, tmp_path):
    """`aifabric train --fail`'s schedule: rank 0's host link down OUTAGE_S s from the start of
    iteration OUTAGE_ITERATION. The job lives through it (what was lost is resent once the link is
    back), both events are logged, the failure in that iteration, and the iterations the outage
    overlapped lost at least the outage less one clean iteration (rank 0 takes part in every
    iteration, so at most one iteration's work can hide it); the effective training time ratio
    is below 1 by as much."""
    from aifabric.experiments.failure_schedule import FailureSchedule, PlannedFailure
    from aifabric.experiments.train_runner import run_workload
    from aifabric.lab.failures import Failures
    _hosts_side_alone(lab)
    the_lab = lab[0]
    workload = _workload(the_lab.fabric, dp=8)
    host = workload.placement.host(0)
    failure = PlannedFailure.parse(f"link:{host}-{the_lab.fabric.host(host).switch}@i{OUTAGE_ITERATION}+{OUTAGE_S}")
    failure.check(the_lab.fabric)
    run = run_workload(the_lab, workload, 8, tmp_path / "plan.json", failures=FailureSchedule(Failures(the_lab), [failure]))
    assert run.ok, run.errors
    down, up = run.failures
    assert (down["what"], up["what"]) == ("down", "up") and not down["error"] and not up["error"], run.failures
    assert down["iteration"] == OUTAGE_ITERATION and up["at_s"] - down["at_s"] >= OUTAGE_S - 0.002, run.failures
    assert run.resent > 0, "nothing was resent: the outage did not reach the ranks' traffic"
    cost = run.time_lost[failure.text]
    assert up["iteration"] is not None and cost["iterations"] == list(range(OUTAGE_ITERATION, up["iteration"] + 1)), \
        (cost, run.failures)
    assert cost["clean_median_s"] is not None, f"every iteration overlapped the outage: {cost}"
    assert cost["lost_s"] >= OUTAGE_S - cost["clean_median_s"], cost
    iterations = len(run.reports[0]["iterations"])
    assert run.effective_ratio == pytest.approx(
        iterations * cost["clean_median_s"] / (iterations * cost["clean_median_s"] + cost["lost_s"]), abs=0.1)


def test_a_killed_rank_stops_every_rank_of_the_workload_with_its_name(lab, tmp_path):
    from aifabric.experiments.train_runner import run_workload
    _hosts_side_alone(lab)
    workload = _workload(lab[0].fabric, dp=2, tp=2, pp=2, micro_batches=2)
    run = run_workload(lab[0], workload, 1000, tmp_path / "plan.json", silent_after=3.0, kill_rank_after=(5, 3.0),
                       deadline_s=60.0)
    assert not run.ok
    host = workload.placement.host(5)
    assert f"rank 5 ({host}): killed" in run.errors
    others = [e for e in run.errors if not e.startswith("rank 5 ")]
    assert len(others) == 7, run.errors                    # every other rank stopped with an error, none hung
    assert all("PeerSilent" in e or "Aborted" in e for e in others), "\n".join(others)
    # the first rank to give up waited on rank 5 itself (no other rank was dead yet), at the
    # iteration's barrier or in an op of a group with it; the rest may blame whoever stopped first
    assert any("barrier: PeerSilent: rank 5 is silent" in e or
               re.search(r"PeerSilent: rank \d+ is silent: [^()]*\([^()]*\); dead or unreachable \(global rank 5\)", e) for e in others), others


KILLED_RANK, KILLED_AT, CHECKPOINT_EVERY, RESTART_ITERATIONS = 5, 3, 2, 6


@pytest.mark.parametrize("kind", ["rank", "host"])
def test_a_job_that_lost_a_rank_restarts_from_the_ranks_checkpoint(lab, tmp_path, kind):
    """`aifabric train --fail rank:5@i3 --restarts 1 --checkpoint-every 2`: rank 5 is killed as
    iteration 3 begins; the launcher stops every other rank at once and starts the job again from
    the ranks' checkpoint of iteration 2, and it finishes. The restart names its cause, iterations
    2 and 3 were done again, the time it lost holds at least the redone iteration 2, and the
    effective training time ratio is below 1 by it. With ``host:`` rank 5's host is lost (its
    links stay down): the job can only finish if the restart moved rank 5 to a spare host."""
    from aifabric.experiments.failure_schedule import FailureSchedule, PlannedFailure, iteration_spans
    from aifabric.experiments.train_runner import run_workload
    from aifabric.lab.failures import Failures
    from hostagent.workload_runner import progress
    _hosts_side_alone(lab)
    the_lab = lab[0]
    workload = _workload(the_lab.fabric, dp=8)
    host = workload.placement.host(KILLED_RANK)
    failure = PlannedFailure.parse(f"rank:{KILLED_RANK}@i{KILLED_AT}" if kind == "rank" else f"host:{host}@i{KILLED_AT}")
    failures = Failures(the_lab)
    try:
        run = run_workload(the_lab, workload, RESTART_ITERATIONS, tmp_path / "plan.json", silent_after=3.0,
                           deadline_s=120.0, failures=FailureSchedule(failures, [failure]),
                           checkpoint_every=CHECKPOINT_EVERY, restarts=1)
        lost_links = set(failures.down_links)
    finally:
        for a, b in list(failures.down_links):      # the fabric is the module's: the lost host back
            failures.restore_link(a, b)
    assert run.ok, run.errors
    [restart] = run.restarts
    assert f"rank {KILLED_RANK} ({host}): killed (SIGKILL)" in restart["errors"], restart
    assert sum(f"stopped by the launcher when rank {KILLED_RANK} ({host}) failed" in e
               for e in restart["errors"]) == 7, restart
    assert restart["resumed_from"] == 2 and restart["redone"] == [2, 3], restart
    if kind == "host":
        spare = restart["replaced"][host]
        assert list(restart["replaced"]) == [host] and spare not in workload.placement.hosts, restart
        assert run.hosts == [spare if h == host else h for h in (workload.placement.host(r) for r in range(8))]
        assert lost_links == {frozenset((host, the_lab.fabric.host(host).switch))}, lost_links
    else:
        assert restart["replaced"] == {} and run.hosts[KILLED_RANK] == host
    # every rank whose host stayed was relaunched from the standby that waited there
    assert restart["warm_ranks"] == (8 if kind == "rank" else 7), restart
    # the last attempt ran iterations 2-5 only, every rank
    assert run.first_iteration == 2 and [len(r["iterations"]) for r in run.reports] == [4] * 8
    assert [row[0] for row in run.iteration_rows()] == [2, 3, 4, 5]
    [down] = [e for e in run.failures if e["what"] == "down"]
    assert down["iteration"] == KILLED_AT and not down["error"], run.failures
    cost = run.time_lost[failure.text]
    assert cost["iterations"] == [2, 3] and cost["lost_s"] == restart["lost_s"], cost
    # what the restart lost holds iteration 2 as the failed attempt ran it (rank 0's progress: to
    # 3's start); the attempt after it may run at another pace (a spare host further away)
    begun = progress.read(tmp_path / "progress")
    first = dict(begun[:KILLED_AT + 1])
    assert [n for n, _ in begun[:KILLED_AT + 1]] == [0, 1, 2, 3], begun
    assert cost["lost_s"] > first[3] - first[2], (cost, begun)
    # the ratio: what the kept iterations (0 and 1 at the failed attempt's pace, 2-5 at the last
    # one's median) took over the wall time, which holds the time lost and, beyond it, whatever
    # the last attempt's iterations took over their median (its first one makes its connections)
    clean = cost["clean_median_s"]
    useful = (first[2] - first[0]) + (RESTART_ITERATIONS - 2) * clean
    excess = sum(b - a - clean for a, b in iteration_spans(run.reports))
    assert useful / (useful + cost["lost_s"] + excess) - 0.05 <= run.effective_ratio
    assert run.effective_ratio <= useful / (useful + cost["lost_s"]) + 0.02, (run.effective_ratio, useful, cost)


def test_ranks_that_repath_live_through_a_core_link_failed_for_good_without_the_fabric_rerouting(lab, tmp_path):
    """A core link that a ring flow of the job hashes onto (the fabric's hash, HashPaths) fails
    for good at iteration 2 in a fabric without failure handling: nothing reroutes, ECMP keeps
    hashing onto the dead link. Ranks with `repath` move each flow that lost packets to another
    source port, and the job ends right; the link is brought back after."""
    from aifabric.experiments.failure_schedule import FailureSchedule, PlannedFailure
    from aifabric.experiments.train_runner import run_workload, workload_flows
    from aifabric.lab.failures import Failures
    from controller.load_balance.hash_paths import HashPaths
    _hosts_side_alone(lab)
    the_lab = lab[0]
    fabric = the_lab.fabric
    workload = _workload(fabric, dp=8)
    cores = {s.name for s in fabric.switches if s.role == "core"}
    with HashPaths.of(the_lab.controller) as paths:
        crossed = [d for f in workload_flows(workload) for d in paths.links(f) if cores & set(d)]
    assert crossed, "no flow of the job crosses a core switch: nothing to fail"
    a, b = crossed[0]
    failures = Failures(the_lab)
    try:
        run = run_workload(the_lab, workload, 6, tmp_path / "plan.json", repath=True,
                           failures=FailureSchedule(failures, [PlannedFailure.parse(f"link:{a}-{b}@i2")]))
    finally:
        failures.restore_link(a, b)
    assert run.ok, run.errors
    assert [e["what"] for e in run.failures] == ["down"] and run.failures[0]["iteration"] == 2, run.failures
    assert run.repaths >= 1 and run.resent > 0, (run.repaths, run.resent)
