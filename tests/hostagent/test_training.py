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
