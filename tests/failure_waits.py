"""Waiting for failure handling's verdicts on a fabric whose machine may be busy.

A verdict of death takes the detection time, stretched by the monitor for heartbeats that arrive
late (controller/failover/monitor.py): on a machine busy with something else it can take several
times the idle figure. A wait for one is given ``base_s`` beyond what detection takes at that
moment, so a slow verdict on a busy machine is waited for and a missing one still fails.
"""
from __future__ import annotations

import time
from typing import Callable


def wait_for_verdict(handler, what: str, predicate: Callable[[], bool], base_s: float, poll_s: float = 0.05) -> float:
    """Seconds until ``predicate`` held; AssertionError naming ``what`` once ``base_s`` plus the
    longest detection time seen while waiting passed without it."""
    t0 = time.monotonic()
    allowed = base_s
    while not predicate():
        allowed = max(allowed, base_s + handler.monitor.detection_s)
        if time.monotonic() - t0 > allowed:
            raise AssertionError(f"timed out after {allowed:.1f} s waiting for {what} (base {base_s:g} s, "
                                 f"detection now {handler.monitor.detection_s:.1f} s)")
        time.sleep(poll_s)
    return time.monotonic() - t0


def rerouted_back(handler, since: int) -> bool:
    """A reroute after the first ``since`` left no link down: the model's links are set before
    the routes are recomputed, so only its record says the healthy routes are in place."""
    return any(not r.down for r in handler.reroutes[since:])
