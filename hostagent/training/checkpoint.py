"""A data-parallel job's checkpoint: the parameters after a step and the step to run next.

Plain SGD keeps no optimiser state, and a step's batch is a function of (seed, rank, step)
(`data.batch_indices`), so the data position and the random state are the step number: parameters
and step are all a resumed job needs to go on exactly as it would have. Rank 0 writes it (every
rank holds the same parameters after a step); every rank reads it when it starts. A write goes to
a file beside it and is renamed over it, so a rank killed while writing leaves the last whole one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class CheckpointError(ValueError):
    """A checkpoint that does not fit the job reading it (another model's shape or seed)."""


@dataclass(frozen=True)
class Checkpoint:
    params: np.ndarray
    next_step: int
    seed: int

    def save(self, path: str | Path) -> None:
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        with open(partial, "wb") as f:
            np.savez(f, params=self.params, next_step=self.next_step, seed=self.seed)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)

    @classmethod
    def read(cls, path: str | Path) -> Checkpoint | None:
        """The checkpoint at ``path`` as saved (None if there is none)."""
        try:
            with np.load(path) as f:
                return cls(f["params"].astype(np.float32), int(f["next_step"]), int(f["seed"]))
        except FileNotFoundError:
            return None

    @classmethod
    def load(cls, path: str | Path, parameters: int, seed: int) -> Checkpoint | None:
        """The checkpoint at ``path`` (None if there is none), checked against the job's model."""
        found = cls.read(path)
        if found is not None and (found.params.shape != (parameters,) or found.seed != seed):
            raise CheckpointError(f"checkpoint {path}: {found.params.size} parameters of seed {found.seed}; "
                                  f"this job has {parameters} of seed {seed}")
        return found


def saved_step(path: str | Path) -> int:
    """The step a job resumes from with the checkpoint at ``path`` (0: none saved yet)."""
    found = Checkpoint.read(path)
    return found.next_step if found is not None else 0
