"""A workload's restarts without a fabric: rank 0's progress file, the ranks' checkpoints, and
what each restart cost."""
from __future__ import annotations

import pytest

from aifabric.experiments.job_restarts import Attempt, kept_seconds, replace_lost, restart_costs
from hostagent.workload_runner import checkpoint, progress
from topologies.fabric import fat_tree


def test_progress_entries_are_read_back_and_a_restart_keeps_the_highest_iteration(tmp_path) -> None:
    path = tmp_path / "progress"
    assert progress.read(path) == [] and progress.iterations_begun(path) == 0
    for n, t in ((0, 10.0), (1, 11.5), (2, 12.25), (1, 20.0)):
        progress.note(path, n, t)
    with open(path, "a") as f:
        f.write("3 2")                                   # a line still being written
    assert progress.read(path) == [(0, 10.0), (1, 11.5), (2, 12.25), (1, 20.0)]
    assert progress.iterations_begun(path) == 3
    assert progress.begun_at(progress.read(path), 1, since=15.0) == 20.0
    assert progress.begun_at(progress.read(path), 2, since=15.0) is None


def test_a_job_resumes_from_the_oldest_checkpoint_any_rank_saved(tmp_path) -> None:
    assert checkpoint.resume_iteration(tmp_path, 3) == 0
    for rank, it in ((0, 4), (1, 4), (2, 2)):
        checkpoint.save(tmp_path, rank, it)
    assert checkpoint.resume_iteration(tmp_path, 3) == 2
    checkpoint.save(tmp_path, 2, 4)
    assert checkpoint.resume_iteration(tmp_path, 3) == 4
    assert checkpoint.resume_iteration(tmp_path, 4) == 0            # rank 3 saved none
    assert not list(tmp_path.glob("*.partial"))


def test_a_restart_costs_from_the_failed_attempts_start_of_the_resumed_iteration_to_the_next_ones() -> None:
    begun = [(0, 10.0), (1, 11.0), (2, 12.0), (3, 13.0),         # attempt 0, killed during iteration 3
             (2, 20.0), (3, 21.0), (4, 22.0),                    # attempt 1 from the checkpoint of 2, killed in 4
             (4, 30.0), (5, 31.0)]                               # attempt 2 from 4
    attempts = [Attempt(9.0, 0, ("rank 5 (h): killed",)), Attempt(18.0, 2, ("rank 1 (g): killed",)),
                Attempt(28.0, 4)]
    first, second = restart_costs(attempts, begun)
    assert first == {"errors": ["rank 5 (h): killed"], "resumed_from": 2, "replaced": {}, "warm_ranks": 0, "redone": [2, 3],
                     "lost_s": 8.0, "launch_s": 2.0}
    assert second == {"errors": ["rank 1 (g): killed"], "resumed_from": 4, "replaced": {}, "warm_ranks": 0, "redone": [4],
                      "lost_s": 8.0, "launch_s": 2.0}


def test_a_restart_before_any_iteration_or_one_never_resumed_is_told_apart() -> None:
    attempts = [Attempt(9.0, 0, ("x",)), Attempt(12.0, 0, ("y",)), Attempt(14.0, 0)]
    begun = [(0, 13.0)]                                # attempt 0 began nothing; attempt 2 never began 0
    first, second = restart_costs(attempts, begun)
    assert first["redone"] == [] and first["lost_s"] == pytest.approx(4.0)      # from its launch
    assert second["redone"] == [0] and second["lost_s"] is None and second["launch_s"] is None


def test_a_lost_hosts_ranks_move_to_the_nearest_spare_host() -> None:
    fabric = fat_tree(4)                      # hosts p<pod>e<edge>h<n>, two on each edge switch
    ranks = ["p0e0h0", "p0e0h0", "p0e1h0", "p1e0h0"]       # rank -> host; two ranks on p0e0h0
    hosts, replaced = replace_lost(fabric, ranks, {"p0e0h0"})
    assert replaced == {"p0e0h0": "p0e0h1"} and hosts == ["p0e0h1", "p0e0h1", "p0e1h0", "p1e0h0"]
    # its edge switch's other host a rank's: one in its pod; that one taken (the aggregator): another pod's
    assert replace_lost(fabric, ranks + ["p0e0h1"], {"p0e0h0"})[1] == {"p0e0h0": "p0e1h1"}
    assert replace_lost(fabric, ranks + ["p0e0h1"], {"p0e0h0"}, taken={"p0e1h1"})[1] == {"p0e0h0": "p1e0h1"}
    # nearest before the fabric's order: pod 1's hosts come after pod 0's spares
    assert replace_lost(fabric, ["p0e0h0", "p1e1h0"], {"p1e1h0"})[1] == {"p1e1h0": "p1e1h1"}
    assert replace_lost(fabric, ["p0e0h0", "p1e1h0"], {"p1e1h0"}, taken={"p1e1h1"})[1] == {"p1e1h0": "p1e0h0"}
    assert replace_lost(fabric, ranks, set()) == (ranks, {})


def test_no_spare_host_is_named() -> None:
    fabric = fat_tree(4)
    every = [h.name for h in fabric.hosts]
    with pytest.raises(ValueError, match="host p0e0h0 is lost and .* has no spare host"):
        replace_lost(fabric, every, {"p0e0h0"})


def test_what_a_failed_attempt_kept_counts_at_its_own_pace() -> None:
    # attempt 0 kept iterations 0-1 (1.0 s each), attempt 1 from 2 kept 2-4 (3.0 s each: a slower
    # spare host), attempt 2 from 5; iteration 3's second start (attempt 1) is the one counted
    begun = [(0, 10.0), (1, 11.0), (2, 12.0), (3, 12.5),
             (2, 20.0), (3, 23.0), (4, 26.0), (5, 29.0), (6, 30.0),
             (5, 40.0)]
    attempts = [Attempt(9.0, 0), Attempt(19.0, 2), Attempt(39.0, 5)]
    assert kept_seconds(attempts, begun) == pytest.approx(2 * 1.0 + 3 * 3.0)
    assert kept_seconds(attempts[:1], begun) == 0.0
