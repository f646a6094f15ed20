"""Packets a lab's switches failed to process: never a silent drop.

softswitch drops a packet whose processing raised (a fault of the generated code, an assert
of the program) and counts it by what was raised (its run-time control ``stats``:
``counters.error_kinds``). `read` gathers those counts from every softswitch of a running
Mininet net; `PacketErrorWatch` tells, lab by lab, which counts moved since it last looked
(what the pytest plugin, `aifabric.testing`, fails a test on). BMv2 keeps no such count.
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, Iterable

log = logging.getLogger("aifabric.lab")

Counts = dict[str, dict[str, int]]      # switch -> what was raised -> packets


def read(net: Any) -> Counts:
    """Every softswitch of ``net`` whose program failed on a packet: its counts by kind.
    A switch that cannot answer (stopped by a test) is left out and logged."""
    from softswitch.ctl import packet_errors

    counts: Counts = {}
    for sw in getattr(net, "switches", ()):
        if getattr(sw, "target_kind", None) != "softswitch":
            continue
        try:
            kinds = packet_errors(sw.runtime_address, timeout=2.0)
        except (OSError, ValueError) as err:
            log.info("packet errors of %s unread: %s", sw.name, err)
            continue
        if kinds:
            counts[sw.name] = kinds
    return counts


def describe(counts: Counts) -> str:
    return "; ".join(f"{sw}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
                     for sw, kinds in sorted(counts.items()))


def moved(before: Counts, now: Counts) -> Counts:
    """The counts of ``now`` that grew since ``before`` (by how much)."""
    out: Counts = {}
    for sw, kinds in now.items():
        grew = {k: n - before.get(sw, {}).get(k, 0) for k, n in kinds.items()}
        grew = {k: d for k, d in grew.items() if d > 0}
        if grew:
            out[sw] = grew
    return out


class PacketErrorWatch:
    """What each lab's switches counted when last looked at (nothing for a lab not yet seen)."""

    def __init__(self) -> None:
        self._seen: weakref.WeakKeyDictionary[Any, Counts] = weakref.WeakKeyDictionary()

    def moved(self, labs: Iterable[Any], forget: Callable[[Any], None]) -> Counts:
        """Counts that moved since the last call, over ``labs`` (running, or stopped: then
        what their teardown read, after which ``forget(lab)`` is called: nothing more moves)."""
        out: Counts = {}
        for lab in labs:
            now = lab.packet_errors()
            for sw, kinds in moved(self._seen.get(lab, {}), now).items():
                out[sw] = kinds
            self._seen[lab] = now
            if lab.net is None and lab.teardown is not None:
                forget(lab)
        return out
