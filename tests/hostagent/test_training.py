"""hostagent.training in one process: the model's gradient against finite differences, the
switches' sum replayed within its stated bound, and the reference run learning the digits."""
from __future__ import annotations

import numpy as np
import pytest

from hostagent.training import combine, mlp, reference
from hostagent.training.data import Split, batch_indices
from hostagent.training.step import Config


def _split() -> Split:
    sklearn = pytest.importorskip("sklearn.datasets")
    d = sklearn.load_digits()
    order = np.random.default_rng(0).permutation(len(d.target))
    x, y = (d.data / 16).astype(np.float32), d.target
    return Split(x[order[360:]], y[order[360:]], x[order[:360]], y[order[:360]])


def test_gradient_matches_finite_differences():
    shape = mlp.Shape(5, 4, 3)
    rng = np.random.default_rng(3)
    params = mlp.init(shape, 2).astype(np.float64)
    x, y = rng.normal(size=(6, 5)), rng.integers(0, 3, 6)
    grad, _, _ = mlp.loss_and_gradient(shape, params, x, y)
    for i in rng.choice(shape.parameters, 12, replace=False):
        up, down = params.copy(), params.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        numeric = (mlp.loss_and_gradient(shape, up, x, y)[1] - mlp.loss_and_gradient(shape, down, x, y)[1]) / 2e-6
        assert grad[i] == pytest.approx(numeric, rel=1e-4, abs=1e-7)


def test_in_network_replay_is_within_its_bound_and_not_exact():
    rng = np.random.default_rng(5)
    vectors = [rng.normal(scale=10.0 ** rng.integers(-3, 3), size=1000).astype(np.float32) for _ in range(8)]
    summed, bound = combine.in_network(vectors)
    error = np.abs(summed.astype(np.float64) - np.sum(np.stack(vectors).astype(np.float64), axis=0))
    assert (error <= bound).all()
    assert error.max() > 0          # it did quantise


def test_batches_cover_the_shard_once_per_epoch():
    seen = np.concatenate([batch_indices(50, 10, s, 1, 3) for s in range(5)])
    assert sorted(seen) == list(range(50))
    assert not np.array_equal(batch_indices(50, 10, 5, 1, 3), batch_indices(50, 10, 0, 1, 3))


def test_reference_learns_the_digits_and_quantisation_changes_little():
    split = _split()
    exact = reference.train(split, Config(), 8, 60)
    quant = reference.train(split, Config(), 8, 60, "in_network")
    assert exact[0]["test_acc"] < 0.3 and exact[-1]["test_acc"] > 0.9
    assert all(r["grad_error"] <= r["grad_bound"] for r in quant)
    assert abs(exact[-1]["test_acc"] - quant[-1]["test_acc"]) <= 0.01


def test_a_checkpoint_is_whole_or_absent_and_fits_only_its_job(tmp_path):
    from hostagent.training.checkpoint import Checkpoint, CheckpointError, saved_step

    path = tmp_path / "job.npz"
    assert Checkpoint.load(path, 10, 1) is None and saved_step(path) == 0
    params = np.arange(10, dtype=np.float32) / 3
    Checkpoint(params, 7, 1).save(path)
    back = Checkpoint.load(path, 10, 1)
    assert back.next_step == 7 and np.array_equal(back.params, params) and saved_step(path) == 7
    assert [p.name for p in tmp_path.iterdir()] == ["job.npz"]          # the partial file renamed over it
    with pytest.raises(CheckpointError, match="10 parameters of seed 1; this job has 12 of seed 1"):
        Checkpoint.load(path, 12, 1)
    with pytest.raises(CheckpointError, match="this job has 10 of seed 2"):
        Checkpoint.load(path, 10, 2)


def _ranks(tmp_path, net: str, data, steps: int, *extra_of_rank):
    """Three dp_rank processes on loopback addresses; each one's report (None: it said nothing)."""
    import json
    import subprocess
    import sys
    peers = ",".join(f"{net}{i + 1}" for i in range(3))
    procs = [subprocess.Popen([sys.executable, "-m", "hostagent.training.dp_rank", "--rank", str(r), "--peers", peers,
                               "--data", str(data), "--steps", str(steps), "--silent-after", "2", "--timeout", "10",
                               "--host-path", "python", *extra_of_rank[r]], stdout=subprocess.PIPE, text=True)
             for r in range(3)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    return [json.loads(o.splitlines()[-1]) if o.strip() else None for o in outs], [p.returncode for p in procs]


def test_a_job_that_lost_a_rank_resumes_from_its_checkpoint_to_the_bit(tmp_path):
    """Three ranks on loopback, 12 steps by ring: uninterrupted; then with a checkpoint every 4
    steps and rank 1 crashing at step 6 (the others end naming it), started again: the job goes on
    from step 4 and its steps 4-11 are the uninterrupted run's to the bit."""
    data = tmp_path / "digits.npz"
    _split().save(data)
    whole, codes = _ranks(tmp_path, "127.0.71.", data, 12, [], [], [])
    assert codes == [0, 0, 0] and [len(r["steps"]) for r in whole] == [12, 12, 12]
    ckpt = ["--checkpoint", str(tmp_path / "ckpt.npz"), "--checkpoint-every", "4"]
    crashed, codes = _ranks(tmp_path, "127.0.72.", data, 12, ckpt, [*ckpt, "--exit-at-step", "6"], ckpt)
    assert codes[1] == 137 and crashed[1] is None
    assert all(r is not None and not r["ok"] and "rank 1" in r["error"] for r in (crashed[0], crashed[2])), crashed
    resumed, codes = _ranks(tmp_path, "127.0.73.", data, 12, ckpt, ckpt, ckpt)
    assert codes == [0, 0, 0], resumed
    assert all(r["first_step"] == 4 and [s["step"] for s in r["steps"]] == list(range(4, 12)) for r in resumed)
    assert [s["loss"] for s in resumed[0]["steps"]] == [s["loss"] for s in whole[0]["steps"][4:]]
    assert [s["test_acc"] for s in resumed[2]["steps"]] == [s["test_acc"] for s in whole[2]["steps"][4:]]
