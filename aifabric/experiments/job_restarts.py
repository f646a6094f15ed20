"""A workload restarted from its checkpoint after a failed attempt, as an elastic launcher does:
each attempt's start, and what each restart cost, read from rank 0's progress file
(hostagent.workload_runner.progress): the time from when the failed attempt began the iteration
the job resumed from to when the next attempt began it again. That is the work redone (the
iterations since the checkpoint), the wait for the failure to be noticed and every rank stopped,
and the relaunch, together.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.workload_runner.progress import begun_at


@dataclass(frozen=True)
class Attempt:
    started: float                 # monotonic, as its ranks were launched
    resumed_from: int              # the iteration it began with (0: the first attempt)
    errors: tuple[str, ...] = ()   # why it ended, for an attempt that failed


def restart_costs(attempts: list[Attempt], begun: list[tuple[int, float]]) -> list[dict]:
    """Per restart (each attempt but the last): why the attempt before it failed, the iteration it
    resumed from, the iterations the failed attempt had begun from there (done again), the time
    lost and of it the launch (from the next attempt's launch to its first iteration, its
    barrier passed; both None where the next attempt never began that iteration)."""
    out = []
    for failed, nxt in zip(attempts, attempts[1:]):
        k = nxt.resumed_from
        during = [(n, t) for n, t in begun if failed.started <= t < nxt.started]
        was = begun_at(during, k, failed.started)
        again = begun_at(begun, k, nxt.started)
        out.append({"errors": list(failed.errors), "resumed_from": k,
                    "redone": sorted({n for n, _ in during if n >= k}),
                    "lost_s": None if again is None else round(again - (failed.started if was is None else was), 3),
                    "launch_s": None if again is None else round(again - nxt.started, 3)})
    return out
