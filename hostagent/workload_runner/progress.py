"""Rank 0's progress file (``python -m hostagent.workload_runner --progress FILE``): a line
``N T`` as iteration N begins, past its barrier (every rank has finished N - 1), T the monotonic
clock then, which the lab's hosts share with the launcher (network namespaces, one kernel). A
job restarted from a checkpoint appends to the same file, so an iteration can begin twice."""
from __future__ import annotations

from pathlib import Path


def note(path: str | Path, iteration: int, at: float) -> None:
    with open(path, "a") as f:
        f.write(f"{iteration} {at:.6f}\n")


def read(path: str | Path) -> list[tuple[int, float]]:
    """Every (iteration, time begun) written so far, in order (a half-written last line left out)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.split("\n")[:-1]:         # whole lines only: the last may be being written
        fields = line.split()
        if len(fields) == 2:
            try:
                out.append((int(fields[0]), float(fields[1])))
            except ValueError:
                continue
    return out


def iterations_begun(path: str | Path) -> int:
    """How far the job got: the highest iteration begun, plus one (0: none yet)."""
    return max((n + 1 for n, _ in read(path)), default=0)


def begun_at(entries: list[tuple[int, float]], iteration: int, since: float) -> float | None:
    """When ``iteration`` first began at or after ``since`` (None: not since)."""
    return next((t for n, t in entries if n == iteration and t >= since), None)
