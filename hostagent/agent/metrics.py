"""Prometheus collector of the host agents' counters, read at scrape time from the JSON stats
files they write (`hostagent.agent.stats`) in one directory: registered beside the fabric's
exporter (`controller.metrics.FabricMetrics(..., collectors=[AgentCollector(dir)])`), it costs
the agents nothing between scrapes and survives an agent's restart (the file is replaced).

Labels: ``host`` (and ``flow``, `FlowKey.describe`, for per-flow values).

======================================================  =======  ===========================================
aifabric_hostagent_up                                   gauge    1 while the agent runs (0 after it stopped)
aifabric_hostagent_plb_rounds_total                     counter  PLB rounds with deliveries, all flows
aifabric_hostagent_plb_congested_rounds_total           counter  of which congested (CE fraction >= K)
aifabric_hostagent_plb_repaths_total                    counter  new flow labels / source ports given
aifabric_hostagent_rtos_total                           counter  TCP retransmission timeouts seen
aifabric_hostagent_cnps_sent_total                      counter  CNPs this host sent as a receiver
aifabric_hostagent_cnps_received_total                  counter  CNPs for the flows it sends
aifabric_hostagent_rate_updates_total                   counter  rates sent to the traffic sender
aifabric_hostagent_flow_ce_fraction                     gauge    the flow's last round's CE fraction
aifabric_hostagent_flow_repaths                         gauge    repaths of a flow still tracked
aifabric_hostagent_flow_rate_bits_per_second            gauge    DCQCN rate of a flow (after its first CNP)
aifabric_hostagent_flow_alpha                           gauge    DCQCN alpha of a flow
======================================================  =======  ===========================================
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hostagent.agent.stats import AgentStats

_TOTALS = (("plb_rounds", "rounds", "PLB rounds with deliveries"),
           ("plb_congested_rounds", "congested_rounds", "PLB rounds at or above the CE threshold"),
           ("plb_repaths", "repaths", "Repaths (new flow label / source port)"),
           ("rtos", "rtos", "TCP retransmission timeouts seen"),
           ("cnps_sent", "cnps_sent", "CNPs sent (notification point)"),
           ("cnps_received", "cnps_received", "CNPs received (reaction point)"),
           ("rate_updates", "rate_updates", "DCQCN rates sent to the traffic sender"))


class AgentCollector(Collector):
    """Every ``*.json`` in ``directory`` is one agent's stats."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)

    def read(self) -> list[AgentStats]:
        out = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                out.append(AgentStats.read(path))
            except ValueError:
                continue            # being replaced, or not an agent's: next scrape
        return out

    def collect(self) -> Iterator[Metric]:
        agents = self.read()
        up = GaugeMetricFamily("aifabric_hostagent_up", "1 while the host agent runs", labels=["host", "mode"])
        totals = {name: CounterMetricFamily(f"aifabric_hostagent_{name}", doc, labels=["host"])
                  for name, _, doc in _TOTALS}
        flow_labels = ["host", "flow"]
        ce = GaugeMetricFamily("aifabric_hostagent_flow_ce_fraction", "CE fraction of the flow's last PLB round",
                               labels=flow_labels)
        repaths = GaugeMetricFamily("aifabric_hostagent_flow_repaths", "Repaths of a tracked flow", labels=flow_labels)
        rate = GaugeMetricFamily("aifabric_hostagent_flow_rate_bits_per_second", "DCQCN rate of the flow",
                                 labels=flow_labels)
        alpha = GaugeMetricFamily("aifabric_hostagent_flow_alpha", "DCQCN alpha of the flow", labels=flow_labels)
        for a in agents:
            up.add_metric([a.host, a.mode], 0 if a.stopped else 1)
            for name, attr, _ in _TOTALS:
                totals[name].add_metric([a.host], getattr(a.totals, attr))
            for f in a.sent:
                key = [a.host, f.flow]
                repaths.add_metric(key, f.repaths)
                if f.ce_fraction is not None:
                    ce.add_metric(key, f.ce_fraction)
                if f.rate_bps is not None:
                    rate.add_metric(key, f.rate_bps)
                if f.alpha is not None:
                    alpha.add_metric(key, f.alpha)
        yield up
        yield from totals.values()
        yield from (ce, repaths, rate, alpha)
