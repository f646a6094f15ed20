"""Elephant detection: which flows are large enough to be worth placing.

A flow is an elephant when its rate over the last measurement period is at least a stated
fraction of its host link's rate (10% by default, Hedera's threshold).

Where the byte counts come from (the source is pluggable: anything that returns `FlowCounts`):
the intended source is packet sampling at the edge switches (sFlow-style: the edge switch
clones one packet in N of what its hosts send to the controller; a flow's bytes in the period are
N times its sampled bytes), with exact per-entry counters for the flows TE has already pinned
(the direct counter of their override entry). Why not the others:

* per-flow switch counters need a table entry per flow before the flow is known: the fabric
  routes by destination prefix, so its counters sum every flow to a subnet (Hedera polled
  OpenFlow flow counters, which exist because OpenFlow installs an entry per flow);
* INT reports cover only watchlisted flows and carry per-hop queue and latency, not bytes;
* sampling sees every flow without per-flow state in the switch, and an elephant (at least 10%
  of a link for a whole period) yields many samples, so its estimate is tight (relative error
  about 1/sqrt(samples)), while most mice are never seen, which is what detection wants.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from controller.load_balance.te.flows import Flow, FlowRate

DEFAULT_ELEPHANT_FRACTION = 0.1  # Hedera: a flow above 10% of its NIC's rate


@dataclass(frozen=True)
class FlowCounts:
    """One period's measurement: bytes each flow sent during ``period_s`` seconds."""

    bytes_by_flow: Mapping[Flow, int]
    period_s: float


FlowSource = Callable[[], FlowCounts]
"""Returns the flows seen since its previous call (sampling collector, counters, a test's list)."""


def detect_elephants(bytes_by_flow: Mapping[Flow, int], period_s: float, link_bps: float,
                     fraction: float = DEFAULT_ELEPHANT_FRACTION) -> list[FlowRate]:
    """The flows whose rate over ``period_s`` is at least ``fraction`` of ``link_bps`` (the
    host link's rate), largest first (ties by 5-tuple, so the order is deterministic)."""
    if not period_s > 0:
        raise ValueError(f"measurement period {period_s!r} s must be positive")
    if not link_bps > 0:
        raise ValueError(f"host link rate {link_bps!r} bit/s must be positive")
    if not 0 < fraction <= 1:
        raise ValueError(f"elephant fraction {fraction!r} must be in (0, 1]")
    link_bytes = link_bps * period_s / 8
    threshold = fraction * link_bytes
    found = []
    for flow, count in bytes_by_flow.items():
        if count < 0:
            raise ValueError(f"flow {flow} has a negative byte count {count}")
        if count >= threshold:
            found.append(FlowRate(flow, count, period_s, count / link_bytes))
    found.sort(key=lambda r: (-r.bytes, r.flow.sort_key()))
    return found
