"""The training data as ranks see it: one .npz file (x_train, y_train, x_test, y_test, float32
features), rank r's shard (every n-th example from r), and the batch of each step (a seeded
permutation of the shard per epoch), so a single process can replay every rank's batches."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Split:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def save(self, path: str | Path) -> None:
        np.savez(path, x_train=self.x_train, y_train=self.y_train, x_test=self.x_test, y_test=self.y_test)

    @classmethod
    def load(cls, path: str | Path) -> Split:
        with np.load(path) as f:
            return cls(f["x_train"].astype(np.float32), f["y_train"].astype(np.int64),
                       f["x_test"].astype(np.float32), f["y_test"].astype(np.int64))

    def shard(self, rank: int, ranks: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x_train[rank::ranks], self.y_train[rank::ranks]


def batch_indices(shard_size: int, batch: int, step: int, seed: int, rank: int) -> np.ndarray:
    """The shard's rows of ``step``'s batch: the epoch's permutation (seed, rank, epoch), cut in
    whole batches (the epoch's remainder is skipped, so every step's batch has ``batch`` rows)."""
    if batch > shard_size:
        raise ValueError(f"batch {batch} is larger than the shard ({shard_size} examples)")
    per_epoch = shard_size // batch
    epoch, k = divmod(step, per_epoch)
    order = np.random.default_rng([seed, rank, epoch]).permutation(shard_size)
    return order[k * batch:(k + 1) * batch]
