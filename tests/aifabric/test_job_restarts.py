"""A workload's restarts without a fabric: rank 0's progress file, the ranks' checkpoints, and
what each restart cost."""
from __future__ import annotations

import pytest

from aifabric.experiments.job_restarts import Attempt, restart_costs
from hostagent.workload_runner import checkpoint, progress


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
    assert first == {"errors": ["rank 5 (h): killed"], "resumed_from": 2, "redone": [2, 3], "lost_s": 8.0,
                     "launch_s": 2.0}
    assert second == {"errors": ["rank 1 (g): killed"], "resumed_from": 4, "redone": [4], "lost_s": 8.0,
                      "launch_s": 2.0}


def test_a_restart_before_any_iteration_or_one_never_resumed_is_told_apart() -> None:
    attempts = [Attempt(9.0, 0, ("x",)), Attempt(12.0, 0, ("y",)), Attempt(14.0, 0)]
    begun = [(0, 13.0)]                                # attempt 0 began nothing; attempt 2 never began 0
    first, second = restart_costs(attempts, begun)
    assert first["redone"] == [] and first["lost_s"] == pytest.approx(4.0)      # from its launch
    assert second["redone"] == [0] and second["lost_s"] is None and second["launch_s"] is None
