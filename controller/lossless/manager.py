"""`Lossless`: the traffic classes on a running `FabricController`, and which of them are lossless.

    lossless = Lossless(controller, config, runtime)   # the classes' entities (a state source)
    lossless.apply()                                    # every switch's queues, PFC, watchdog
    lossless.use("job-7", {3})                          # a job's classes lossless while it runs
    lossless.release("job-7")

The classes' P4Runtime entities (controller.lossless.entries) are reconciled like routes; the
target's part (controller.lossless.target) goes over each switch's run-time control, in parallel,
at `apply` and whenever the lossless classes change: the lossless set is ``config.lossless`` and
every class a job asked for (`use`).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Iterable

from p4.v1 import p4runtime_pb2

from controller.lossless.config import LosslessConfig, TrafficClass, WatchdogConfig
from controller.lossless.entries import OWNED_TABLES, class_entities
from controller.lossless.target import RuntimeControl, Unsupported, check_target, class_commands, lossless_commands

if TYPE_CHECKING:
    from controller.fabric_controller import FabricController


class Lossless:
    def __init__(self, controller: "FabricController", config: LosslessConfig, runtime: RuntimeControl) -> None:
        self.controller, self.config, self.runtime = controller, config, runtime
        self.jobs: dict[str, frozenset[int]] = {}
        self._lock = threading.Lock()
        controller.add_state_source(self)

    # -- the state source: P4Runtime entities -----------------------------------------------
    def owned(self, switch: str) -> set[tuple]:
        p4info = self.controller.pipeline.p4info
        return {("table", p4info.table_id(t)) for t in OWNED_TABLES}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        return class_entities(self.controller.pipeline.p4info, self.controller.fabric, switch, self.config)

    # -- which classes are lossless ---------------------------------------------------------
    @property
    def lossless(self) -> set[int]:
        with self._lock:
            return set(self.config.lossless).union(*self.jobs.values())

    def use(self, job: str, priorities: Iterable[int]) -> None:
        """``job``'s classes lossless (with the others already so) on every switch."""
        chosen = frozenset(priorities)
        self.config.check_lossless(chosen)
        before = self.lossless
        with self._lock:
            self.jobs[job] = chosen
        if self.lossless != before:
            self.apply_lossless()

    def release(self, job: str) -> None:
        """``job`` done: its classes lossy again unless another job (or the config) keeps them."""
        before = self.lossless
        with self._lock:
            self.jobs.pop(job, None)
        if self.lossless != before:
            self.apply_lossless()

    def replace_class(self, klass: TrafficClass) -> None:
        """A class's settings changed (its ECN thresholds, depth, ...): the entities and queues of
        every switch follow at once."""
        self.config = replace(self.config, classes=tuple(klass if c.priority == klass.priority else c
                                                         for c in self.config.classes))
        self.config.check_lossless(self.lossless)
        self._each(self._queue_commands)
        self.controller.apply_source(self, [sw.name for sw in self.controller.fabric.switches])

    def set_watchdog(self, watchdog: WatchdogConfig | None) -> None:
        """The switches' PFC watchdog (None: off) from now on."""
        self.config = replace(self.config, watchdog=watchdog)
        self.apply_lossless()

    # -- the targets ------------------------------------------------------------------------
    def apply(self) -> None:
        """Every switch's classes (queues) and lossless classes; Unsupported naming a switch whose
        target cannot (BMv2: PFC, weights, bit rates), before anything is written to any."""
        lossless = self.lossless
        self._check(lossless)
        self._each(lambda sw: [*self._queue_commands(sw), *lossless_commands(self.config, lossless)])
        self.controller.recompute()

    def apply_lossless(self) -> None:
        lossless = self.lossless
        self._check(lossless)
        self._each(lambda sw: lossless_commands(self.config, lossless))

    def _check(self, lossless: set[int]) -> None:
        for sw in self.controller.fabric.switches:
            check_target(self.runtime.target(sw.name), sw.name, self.config, lossless)

    def _queue_commands(self, switch: str) -> list[str]:
        ports = sorted(self.controller.fabric.ports_of(switch))
        return [line for c in self.config.classes for line in class_commands(c, ports)]

    def _each(self, commands) -> None:
        """``commands(switch)`` run on every switch, a thread a switch; errors collected."""
        switches = [sw.name for sw in self.controller.fabric.switches]

        def run(name: str) -> None:
            for line in commands(name):
                self.runtime.command(name, line)

        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="lossless") as pool:
            errors = {name: e for name, f in ((n, pool.submit(run, n)) for n in switches)
                      if (e := f.exception()) is not None}
        if errors:
            raise RuntimeError("traffic classes not applied: " + "; ".join(f"{n}: {e}" for n, e in sorted(errors.items())))
