"""One data-parallel step, split where the ranks communicate: `local` packs a rank's gradient
with its loss and count of right answers into one vector (one all_reduce carries all three), and
`apply` turns the summed vector into the mean gradient's SGD update and the global batch's loss
and accuracy. A rank and the single-process reference run the same two functions."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hostagent.training import mlp
from hostagent.training.data import Split, batch_indices


@dataclass(frozen=True)
class Config:
    hidden: int = 32
    batch: int = 16          # per rank
    lr: float = 0.5
    seed: int = 1


def shape_of(split: Split, cfg: Config) -> mlp.Shape:
    return mlp.Shape(split.x_train.shape[1], cfg.hidden, int(split.y_train.max()) + 1)


def local(shape: mlp.Shape, params: np.ndarray, split: Split, cfg: Config, rank: int, ranks: int,
          step: int) -> np.ndarray:
    """[gradient..., loss sum, right answers] of rank's batch at ``step`` (float32)."""
    x, y = split.shard(rank, ranks)
    rows = batch_indices(len(y), cfg.batch, step, cfg.seed, rank)
    grad, loss, correct = mlp.loss_and_gradient(shape, params, x[rows], y[rows])
    return np.concatenate([grad, np.array([loss, correct], dtype=np.float32)])


def apply(params: np.ndarray, summed: np.ndarray, cfg: Config, ranks: int) -> tuple[float, float]:
    """SGD on ``params`` in place with the mean gradient; (train loss, train accuracy) of the
    global batch."""
    examples = cfg.batch * ranks
    params -= np.float32(cfg.lr / examples) * summed[:-2]
    return float(summed[-2]) / examples, float(summed[-1]) / examples
