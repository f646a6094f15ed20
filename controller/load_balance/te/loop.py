"""Traffic engineering running on a live fabric: sample, place, pin, every period.

`TeLoop` ties the pieces together on a `FabricController`: a `FlowSampler` (the edge switches'
packet samples) as the measurement source, a `TrafficEngineer` for the rounds, and the
controller's `TeOverrides` (the ``te_override`` table) as the writer:

    loop = TeLoop(controller, TeConfig(host_link_bps=...), period_s=1.0, one_in=8).start()
    ...
    loop.stop()          # the sampler's entries and every pin are removed

Each round replaces the installed pins with exactly those the round wants (new, moved, and
stale ones gone, in one reconciliation per switch); a round whose write fails is not committed,
so the next round tries again. Every round that changed a pin records how long it took from
reading the samples to the last pin written (`pin_delays`), and the writes' part of it
(`write_times`).
"""
from __future__ import annotations

import logging
import threading
import time

from controller.load_balance.te.engine import TeConfig, TeRound, TrafficEngineer
from controller.load_balance.te.overrides import Pin, TeOverrides
from controller.load_balance.te.sampling import DEFAULT_ONE_IN, FlowSampler

log = logging.getLogger(__name__)


def pins_of(rnd: TeRound) -> list[Pin]:
    """The override entries a round wants, as `Pin` records for `TeOverrides.replace`."""
    return [Pin(e.switch, e.flow.src_ip, e.flow.dst_ip, e.flow.protocol, e.flow.src_port, e.flow.dst_port,
                e.egress_port) for e in rnd.desired.values()]


class TeLoop:
    """Hedera's control loop on ``controller``; see the module's description."""

    def __init__(self, controller, config: TeConfig, period_s: float = 1.0, one_in: int = DEFAULT_ONE_IN,
                 overrides: TeOverrides | None = None) -> None:
        if not period_s > 0:
            raise ValueError(f"TE period {period_s!r} s must be positive")
        self.controller = controller
        self.config = config
        self.period_s = period_s
        self.sampler = FlowSampler(controller, one_in=one_in)
        self.overrides = overrides if overrides is not None else TeOverrides(controller)
        self.engineer = TrafficEngineer(controller.model, self._sample, config)
        self.rounds: list[TeRound] = []
        self.round_times: list[float] = []   # seconds from `start` to each round's apply
        self.pin_delays: list[float] = []    # rounds that changed pins: s from the samples read to pins written
        self.write_times: list[float] = []   # rounds that changed pins: s writing them
        self._sampled_at = 0.0
        self._started = 0.0
        self.pins_moved = 0          # pins whose port a later round changed (a flow moved)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self):
        """The sampler's counts, the time they were read kept: a round's delay runs from it."""
        self._sampled_at = time.monotonic()
        return self.sampler()

    def apply(self, rnd: TeRound) -> None:
        writing = time.monotonic()
        self.overrides.replace(pins_of(rnd))
        written = time.monotonic()
        self.pins_moved += len(rnd.modify)
        self.rounds.append(rnd)
        self.round_times.append(written - self._started)
        if rnd.changed:
            self.pin_delays.append(written - self._sampled_at)
            self.write_times.append(written - writing)
            log.info("TE round %d: %d elephants, %d placed, %d unplaced; pins +%d ~%d -%d in %.0f ms "
                     "(%.0f ms writing)", rnd.number, len(rnd.elephants), len(rnd.placement.placed),
                     len(rnd.unplaced), len(rnd.install), len(rnd.modify), len(rnd.remove),
                     1000 * self.pin_delays[-1], 1000 * self.write_times[-1])

    def start(self) -> "TeLoop":
        """Start sampling and a round every period, from nothing installed (a loop can be
        stopped and started again: each start is a fresh engineer)."""
        if self._thread is not None:
            return self
        self.engineer = TrafficEngineer(self.controller.model, self._sample, self.config)
        self.rounds, self.round_times, self.pins_moved = [], [], 0
        self.pin_delays, self.write_times = [], []
        self._started = time.monotonic()
        self.sampler.start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="te-loop", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        # The first round waits a whole period: it needs a period's samples.
        if not self._stop.wait(self.period_s):
            self.engineer.run(self.apply, self.period_s, self._stop)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sampler.stop()
        self.overrides.replace([])

    def __enter__(self) -> "TeLoop":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
