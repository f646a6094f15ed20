"""A workload rank's checkpoint: the iteration the job goes on from after a restart.

A workload's ranks hold no model (their ops are sizes and seconds), so the data position is all
of their state. Each rank writes its own as a checkpointed iteration begins, past its barrier
(every rank has finished the iteration before), to a file beside it renamed over its last one,
so a rank killed while writing leaves the last whole one; a restarted job goes on from the
oldest iteration any rank saved, the last one every rank has.
"""
from __future__ import annotations

import os
from pathlib import Path


def _path(directory: str | Path, rank: int) -> Path:
    return Path(directory) / f"rank{rank}"


def save(directory: str | Path, rank: int, iteration: int) -> None:
    path = _path(directory, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(f"{iteration}\n")
    os.replace(partial, path)


def resume_iteration(directory: str | Path, world: int) -> int:
    """The iteration a job of ``world`` ranks goes on from (0: some rank saved none)."""
    saved = []
    for rank in range(world):
        try:
            saved.append(int(_path(directory, rank).read_text()))
        except (FileNotFoundError, ValueError):
            return 0
    return min(saved)
