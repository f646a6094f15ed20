"""Prometheus families of failure handling (served by `controller.metrics.fabric_metrics`).

===========================  =====  =========================================================
aifabric_link_up             gauge  1 while the switch-switch link (labels ``a``, ``b``) has both
                                    ends alive, 0 once either end's heartbeats stopped
aifabric_port_alive          gauge  per monitored port (labels ``switch``, ``port``, ``neighbor``)
aifabric_failure             gauge  1 per localised failure (labels ``kind``: link|switch, ``name``)
aifabric_reroutes_total      counter routes recomputed after a failure or a repair
aifabric_reroute_seconds     gauge  duration of the last reroute
aifabric_heartbeats_held_back_total  counter  heartbeats not queued: a round was still waiting to
                                    be sent (the controller too busy to send them on time)
===========================  =====  =========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from controller.failover.handler import FailureHandler


class FailureCollector(Collector):
    """Reads the handler ``source()`` returns at scrape time (nothing while it is None)."""

    def __init__(self, source: Callable[[], FailureHandler | None]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        handler = self.source()
        if handler is None:
            return
        dead = handler.dead_ports()
        up = GaugeMetricFamily("aifabric_link_up", "Switch-switch link alive in both directions (heartbeats)",
                               labels=["a", "b"])
        alive = GaugeMetricFamily("aifabric_port_alive", "Port hears its neighbour's heartbeats",
                                  labels=["switch", "port", "neighbor"])
        for link in handler.links:
            a, b = link.ends()
            up.add_metric([link.a, link.b], 0 if a in dead or b in dead else 1)
            alive.add_metric([link.a, str(link.a_port), link.b], 0 if a in dead else 1)
            alive.add_metric([link.b, str(link.b_port), link.a], 0 if b in dead else 1)
        failure = GaugeMetricFamily("aifabric_failure", "Failed link or switch, as localised from heartbeats",
                                    labels=["kind", "name"])
        for f in handler.failures():
            failure.add_metric([f.kind, f.name], 1)
        reroutes = list(handler.reroutes)
        yield from (up, alive, failure)
        yield CounterMetricFamily("aifabric_reroutes", "Route recomputations after failures and repairs",
                                  value=len(reroutes))
        yield CounterMetricFamily("aifabric_heartbeats_held_back", "Heartbeats not queued behind a round "
                                  "still waiting to be sent", value=handler.heartbeats_held_back)
        if reroutes:
            yield GaugeMetricFamily("aifabric_reroute_seconds", "Duration of the last reroute",
                                    value=reroutes[-1].seconds)
