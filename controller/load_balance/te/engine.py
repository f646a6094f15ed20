"""`TrafficEngineer`: one round of centralized traffic engineering, Hedera's loop.

Every period: read the flows' byte counts from the measurement source, keep the elephants,
estimate their natural demands, place them with Global First Fit on the topology model, and
compare the override entries that placement asks for with those installed after the previous
round: new entries to install, entries whose egress port changes, stale entries to remove
(flows that ended, shrank below the threshold, moved, or fit nowhere and go back to ECMP).

An override entry pins one flow (5-tuple) at one switch to one egress port. By default only
switches where the flow has a choice (more than one equal-cost next hop) get one; the others
forward it the only shortest way anyway. Every pinned port is an equal-cost next hop, so while
entries are being changed, any mix of old and new entries still sends a packet along a shortest
path: no loops and no black holes, whatever order the switches apply them in.

Nothing here speaks P4Runtime: `run_round(apply)` hands the `TeRound` to ``apply``, which writes
the entries to the switches (``desired``, the whole set, for a writer that replaces its table's
contents; ``install``/``modify``/``remove`` for one that writes updates); the round is recorded
as installed only when ``apply`` returns, so a failed write is retried by the next round.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from controller.telemetry.int_report import FlowKey
from controller.load_balance.te.demand import estimate_demands
from controller.load_balance.te.elephants import DEFAULT_ELEPHANT_FRACTION, FlowSource, detect_elephants
from controller.load_balance.te.flows import Flow, FlowRate, key_order
from controller.load_balance.te.index import FabricIndex
from controller.load_balance.te.nexthops import PathSpace
from controller.load_balance.te.placement import PlacementResult, global_first_fit
from controller.topology import TopologyModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TeConfig:
    host_link_bps: float                                # the rate demands are fractions of
    elephant_fraction: float = DEFAULT_ELEPHANT_FRACTION
    pin_every_hop: bool = False                         # also where the flow has no choice
    keep_paths: bool = True                             # a placed flow keeps its path while it fits


@dataclass(frozen=True)
class OverrideEntry:
    """Send ``flow`` out of ``egress_port`` at ``switch``."""

    switch: str
    device_id: int
    flow: FlowKey
    egress_port: int

    @property
    def key(self) -> tuple[str, FlowKey]:
        return (self.switch, self.flow)


OverrideKey = tuple[str, FlowKey]


@dataclass
class TeRound:
    number: int
    period_s: float
    elephants: list[FlowRate]
    demands: dict[Flow, float]
    placement: PlacementResult
    desired: dict[OverrideKey, OverrideEntry]
    install: list[OverrideEntry] = field(default_factory=list)
    modify: list[OverrideEntry] = field(default_factory=list)   # new egress port for an entry
    remove: list[OverrideEntry] = field(default_factory=list)   # stale: as installed before

    @property
    def unplaced(self) -> list[Flow]:
        """Elephants no path had room for: they stay on ECMP."""
        return self.placement.unplaced

    @property
    def changed(self) -> bool:
        return bool(self.install or self.modify or self.remove)


Apply = Callable[[TeRound], None]


class TrafficEngineer:
    """Hedera-style TE on ``model`` with flows from ``source``; see the module's description."""

    def __init__(self, model: TopologyModel, source: FlowSource, config: TeConfig) -> None:
        if not config.host_link_bps > 0:
            raise ValueError(f"host link rate {config.host_link_bps!r} bit/s must be positive")
        self.model = model
        self.source = source
        self.config = config
        self.index = FabricIndex(model.fabric)
        self._space: PathSpace | None = None
        self._space_links: list[tuple[str, str]] | None = None
        self._installed: dict[OverrideKey, OverrideEntry] = {}
        self._paths: dict[Flow, tuple[int, ...]] = {}
        self.rounds = 0

    @property
    def installed(self) -> dict[OverrideKey, OverrideEntry]:
        """The override entries as of the last committed round."""
        return dict(self._installed)

    def space(self) -> PathSpace:
        """The path space of the model's current link state (rebuilt when links change)."""
        down = self.model.down_links()
        if self._space is None or down != self._space_links:
            self._space = PathSpace.from_model(self.model, self.index)
            self._space_links = down
        return self._space

    def plan(self) -> TeRound:
        """Measure, detect, estimate, place and diff; changes nothing (see `commit`)."""
        counts = self.source()
        elephants = detect_elephants(counts.bytes_by_flow, counts.period_s,
                                     self.config.host_link_bps, self.config.elephant_fraction)
        demands = estimate_demands([e.flow for e in elephants])
        space = self.space()
        result = global_first_fit(demands, space, keep=self._paths if self.config.keep_paths else None)
        desired = self._overrides(result, space)
        rnd = TeRound(self.rounds + 1, counts.period_s, elephants, demands, result, desired)
        for key, entry in desired.items():
            old = self._installed.get(key)
            if old is None:
                rnd.install.append(entry)
            elif old != entry:
                rnd.modify.append(entry)
        rnd.remove = [entry for key, entry in self._installed.items() if key not in desired]
        for entries in (rnd.install, rnd.modify, rnd.remove):
            entries.sort(key=_entry_order)
        return rnd

    def commit(self, rnd: TeRound) -> None:
        """Record ``rnd``'s entries as installed: the next round diffs against them."""
        self._installed = dict(rnd.desired)
        self._paths = {flow: p.links for flow, p in rnd.placement.placed.items()}
        self.rounds = rnd.number

    def run_round(self, apply: Apply | None = None) -> TeRound:
        """`plan`, then ``apply`` (write the changes to the switches), then `commit`."""
        rnd = self.plan()
        if apply is not None:
            apply(rnd)
        self.commit(rnd)
        return rnd

    def run(self, apply: Apply, period_s: float, stop: threading.Event, rounds: int | None = None) -> None:
        """A round every ``period_s`` seconds until ``stop`` is set (or ``rounds`` ran). A round
        that fails (a write the switches refused) is logged and not committed: the next retries."""
        done = 0
        while not stop.is_set() and (rounds is None or done < rounds):
            started = time.monotonic()
            try:
                self.run_round(apply)
            except Exception:  # noqa: BLE001 - logged; the next round tries again
                log.exception("TE round failed")
            done += 1
            stop.wait(max(0.0, period_s - (time.monotonic() - started)))

    def _overrides(self, result: PlacementResult, space: PathSpace) -> dict[OverrideKey, OverrideEntry]:
        index = space.index
        every = self.config.pin_every_hop
        desired: dict[OverrideKey, OverrideEntry] = {}
        for flow, placement in result.placed.items():
            target = index.hosts[flow.dst_host].switch
            for link, hop in zip(placement.links, placement.hops):
                if every or len(space.next_hops(index.dst[link], target)) > 1:
                    entry = OverrideEntry(hop.switch, hop.device_id, flow.key, hop.egress_port)
                    desired[entry.key] = entry
        return desired


def _entry_order(entry: OverrideEntry) -> tuple:
    return (entry.switch, *key_order(entry.flow))
