"""A workload restarted from its checkpoint after a failed attempt, as an elastic launcher does:
the hosts it restarts on (a lost host's ranks on a replacement, `replace_lost`), each attempt's
start, and what each restart cost, read from rank 0's progress file
(hostagent.workload_runner.progress): the time from when the failed attempt began the iteration
the job resumed from to when the next attempt began it again. That is the work redone (the
iterations since the checkpoint), the wait for the failure to be noticed and every rank stopped,
and the relaunch, together.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from hostagent.workload_runner.progress import begun_at
from topologies.fabric import Fabric


@dataclass(frozen=True)
class Attempt:
    started: float                 # monotonic, as its ranks were launched
    resumed_from: int              # the iteration it began with (0: the first attempt)
    errors: tuple[str, ...] = ()   # why it ended, for an attempt that failed
    replaced: dict[str, str] = field(default_factory=dict)   # lost host -> the host its ranks moved to
    warm: int = 0                  # its ranks launched from a standby (aifabric.experiments.warm_ranks)


def replace_lost(fabric: Fabric, hosts: list[str], lost: set[str], taken: set[str] = frozenset()
                 ) -> tuple[list[str], dict[str, str]]:
    """The ranks' hosts (``hosts``, by rank) with each ``lost`` one's ranks moved to a spare: a
    host of the fabric that runs no rank, is not lost and not in ``taken``, the nearest first
    (on the lost host's edge switch, then in its pod, then anywhere; in the fabric's order
    among equals). Returns the new hosts and lost -> replacement; ValueError naming the lost
    host where no spare is left."""
    pods = {sw.name: sw.pod for sw in fabric.switches}
    replaced: dict[str, str] = {}
    for name in dict.fromkeys(h for h in hosts if h in lost):
        edge = fabric.host(name).switch
        busy = set(hosts) | set(replaced.values()) | lost | set(taken)
        spares = [h for h in fabric.hosts if h.name not in busy]
        if not spares:
            raise ValueError(f"host {name} is lost and {fabric.describe()} has no spare host for its ranks "
                             f"(every other host runs a rank, is lost or is taken)")
        nearest = min(spares, key=lambda h: (h.switch != edge, pods.get(h.switch) != pods.get(edge)))
        replaced[name] = nearest.name
    return [replaced.get(h, h) for h in hosts], replaced


def restart_costs(attempts: list[Attempt], begun: list[tuple[int, float]]) -> list[dict]:
    """Per restart (each attempt but the last): why the attempt before it failed, the hosts it
    replaced (lost -> spare), how many of its ranks a standby took, the iteration it resumed from, the iterations the failed attempt had begun from there (done again), the time
    lost and of it the launch (from the next attempt's launch to its first iteration, its
    barrier passed; both None where the next attempt never began that iteration)."""
    out = []
    for failed, nxt in zip(attempts, attempts[1:]):
        k = nxt.resumed_from
        during = [(n, t) for n, t in begun if failed.started <= t < nxt.started]
        was = begun_at(during, k, failed.started)
        again = begun_at(begun, k, nxt.started)
        out.append({"errors": list(failed.errors), "resumed_from": k, "replaced": dict(nxt.replaced),
                    "warm_ranks": nxt.warm,
                    "redone": sorted({n for n, _ in during if n >= k}),
                    "lost_s": None if again is None else round(again - (failed.started if was is None else was), 3),
                    "launch_s": None if again is None else round(again - nxt.started, 3)})
    return out


def kept_seconds(attempts: list[Attempt], begun: list[tuple[int, float]]) -> float:
    """What the iterations each failed attempt kept (those before the iteration the next one
    resumed from) were worth: their number times the median of their times in that attempt,
    from rank 0's progress entries (an iteration's time: to the next one's start)."""
    total = 0.0
    for failed, nxt in zip(attempts, attempts[1:]):
        during = dict((n, t) for n, t in begun if failed.started <= t < nxt.started)
        kept = range(failed.resumed_from, nxt.resumed_from)
        times = [during[n + 1] - during[n] for n in kept if n in during and n + 1 in during]
        if times:
            total += len(kept) * statistics.median(times)
    return total
