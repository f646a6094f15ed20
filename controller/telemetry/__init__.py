"""Congestion signals: ECN marking and INT-MD on the switches, telemetry reports to a collector.

* `entries`: the P4Runtime entities of ECN and INT for one switch (`TelemetryConfig`,
  `WatchRule`, `EcnThresholds`);
* `source`: `Telemetry`, the state source that puts them on every switch of a running
  `FabricController` (``Telemetry(controller, TelemetryConfig(...))``);
* `int_report`: Telemetry Report v2.0 / INT-MD v2.1 decoder (pure), `Report`/`FlowKey`/`HopRecord`;
* `int_collector`: `IntCollector`, the UDP server: per-flow paths, per-port queue/latency, counters.

The data plane is p4src/include/control/ecn.p4, int_*.p4 (p4src/README.md, "Congestion
signals"); the exporter that serves these figures is `controller.metrics`.
"""
from controller.telemetry.entries import DEFAULT_ECN, EcnThresholds, TelemetryConfig, WatchRule
from controller.telemetry.source import Telemetry

__all__ = ["DEFAULT_ECN", "EcnThresholds", "Telemetry", "TelemetryConfig", "WatchRule"]
