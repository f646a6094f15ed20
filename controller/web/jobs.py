"""AllReduce jobs as the page shows them: workers, aggregation tree, and progress.

`JobWatch.update(jobs)` is given the jobs a `controller.aggregation.JobManager` runs now. Progress
is what the switches can tell: the ``completed`` cells of the ``agg_ops`` counter at the job's
root switch (a chunk the root has summed from every child), counted from the moment the job was
first seen; that counter is the switch's, not the job's, so jobs sharing a root share the count
(``shared_root`` says so). A job that ended stays listed for ``keep_ended_s`` with its final
count. A job that runs on its parameter server (no slots in the switches) has no tree and no
switch-side progress. Failed counter reads are counted by switch, never raised.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from controller.aggregation.entries import AGG_OPS, OUTCOMES

COMPLETED = OUTCOMES.index("completed")
KEEP_ENDED_S = 60.0


@dataclass
class _Seen:
    job: object
    first_seen: float
    baseline: int | None
    completed: int | None = None
    ended: float | None = None


def tree_edges(job) -> list[list[str]]:
    """[child, parent] for every edge of the job's tree (worker hosts to their switch, switches to
    their parent)."""
    if job.tree is None:
        return []
    return [[child.name, node.switch] for node in job.tree.nodes.values() for child in node.children]


class JobWatch:
    """The jobs seen so far and their progress."""

    def __init__(self, read_counter: Callable[[str, str], Mapping[int, object]], *,
                 clock: Callable[[], float] = time.monotonic, keep_ended_s: float = KEEP_ENDED_S) -> None:
        """``read_counter(switch, counter)``: `FabricController.read_port_counters`."""
        self.read_counter = read_counter
        self.clock = clock
        self.keep_ended_s = keep_ended_s
        self.read_errors: dict[str, int] = {}
        self.last_error: str | None = None
        self._seen: dict[tuple[int, int], _Seen] = {}
        self._lock = threading.Lock()

    def _completed_at(self, switch: str) -> int | None:
        try:
            cell = self.read_counter(switch, AGG_OPS).get(COMPLETED)
        except Exception as err:  # noqa: BLE001 - a switch that is down must not stop the page
            self.read_errors[switch] = self.read_errors.get(switch, 0) + 1
            self.last_error = f"{switch}: {err}"
            return None
        return int(cell.packets) if cell is not None else 0      # type: ignore[attr-defined]

    def update(self, jobs: Mapping[int, object]) -> list[dict]:
        """The running jobs (``jobs``: job id -> `controller.aggregation.Job`) and the recently
        ended ones, as JSON records."""
        now = self.clock()
        with self._lock:
            running = {(j.job_id, j.epoch): j for j in jobs.values()}      # type: ignore[attr-defined]
            for key, job in running.items():
                seen = self._seen.get(key)
                root = job.tree.root if job.tree is not None else None
                if seen is None:
                    base = self._completed_at(root) if root else None
                    seen = self._seen[key] = _Seen(job, now, base, 0 if base is not None else None)
                elif root and seen.baseline is not None:
                    seen.completed = self._progress(root, seen)
            for key, seen in list(self._seen.items()):
                if key not in running and seen.ended is None:
                    seen.ended = now
                    root = seen.job.tree.root if seen.job.tree is not None else None    # type: ignore[attr-defined]
                    if root and seen.baseline is not None:
                        seen.completed = self._progress(root, seen)
                if seen.ended is not None and now - seen.ended > self.keep_ended_s:
                    del self._seen[key]
            roots: dict[str, int] = {}
            for key in running:
                if running[key].tree is not None:
                    roots[running[key].tree.root] = roots.get(running[key].tree.root, 0) + 1
            return [self._record(seen, now, roots) for _key, seen in sorted(self._seen.items())]

    def _progress(self, root: str, seen: _Seen) -> int | None:
        value = self._completed_at(root)
        return seen.completed if value is None else max(0, value - (seen.baseline or 0))

    def _record(self, seen: _Seen, now: float, roots: dict[str, int]) -> dict:
        job = seen.job
        root = job.tree.root if job.tree is not None else None      # type: ignore[attr-defined]
        return {
            "id": job.job_id, "epoch": job.epoch, "workers": list(job.workers),     # type: ignore[attr-defined]
            "aggregator": job.aggregator, "in_network": job.in_network,           # type: ignore[attr-defined]
            "root": root, "tree": job.tree.describe() if job.tree is not None else None,   # type: ignore[attr-defined]
            "tree_edges": tree_edges(job),
            "state": "ended" if seen.ended is not None else "running",
            "seconds": round((seen.ended or now) - seen.first_seen, 1),
            "chunks_completed": seen.completed if seen.baseline is not None else None,
            "shared_root": roots.get(root, 0) > 1 if root else False,
        }
