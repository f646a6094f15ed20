"""ECN and INT on a running `controller.fabric_controller.FabricController`: a state source.

    telemetry = Telemetry(controller, TelemetryConfig(watchlist=(WatchRule.flow(...),)))
    telemetry.set_watchlist([...])     # the monitored flows, at run time
    telemetry.remove()                 # the entries go at the next reconcile

Every switch's desired state gets ECN thresholds, the INT watchlist, sink ports, int/report
configuration and the report clone session (`controller.telemetry.entries`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable

from p4.v1 import p4runtime_pb2

from controller.reconcile import owner_key
from controller.telemetry.entries import TelemetryConfig, WatchRule, owned_defaults, owned_tables, telemetry_entities

if TYPE_CHECKING:
    from controller.fabric_controller import FabricController


class Telemetry:
    """The ECN and INT entities of ``config`` on every switch, reconciled like routes."""

    def __init__(self, controller: FabricController, config: TelemetryConfig | None = None) -> None:
        self.controller = controller
        self.config = config or TelemetryConfig()
        controller.add_state_source(self)

    def owned(self, switch: str) -> set[tuple]:
        p4info = self.controller.pipeline.p4info
        owns = {("table", p4info.table_id(t)) for t in owned_tables(self.config)}
        owns |= {("default", p4info.table_id(t)) for t in owned_defaults(self.config)}
        return owns | {owner_key(e) for e in self._entities(switch).pre}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        found = self._entities(switch)
        return [*found.pre, *found.tables, *found.defaults]

    def _entities(self, switch: str):
        return telemetry_entities(self.controller.pipeline.p4info, self.controller.fabric, switch, self.config)

    def set_watchlist(self, rules: Iterable[WatchRule]) -> None:
        """Monitor these flows with INT (replacing the watchlist)."""
        self.config = replace(self.config, watchlist=tuple(rules))
        self.controller.recompute()

    def remove(self) -> None:
        """Install no more ECN and INT entities (deleted at the next reconcile)."""
        self.controller.remove_state_source(self)
