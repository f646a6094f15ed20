"""Prometheus families of load balancing (served by `controller.metrics.fabric_metrics`).

Read at scrape time from the controller's state sources (`LbModes`, `TeOverrides`, found with
``controller.state_source``) and its fabric (the uplinks, `controller.load_balance.uplinks`).

================================  =====  ============================================================
aifabric_lb_mode                  gauge  1 for the switch's mode (labels ``switch``, ``mode``): what
                                         `LbModes` set, else the pipeline's default (ecmp), since no
                                         other writer of ``lb_mode`` exists
aifabric_te_pins                  gauge  TE pins in force on the switch (0 without traffic engineering)
aifabric_te_pin                   gauge  1 per pin (labels ``switch``, ``flow`` (src:sport>dst:dport/proto),
                                         ``port``, ``neighbor``)
aifabric_port_uplink              gauge  1 per uplink (labels ``switch``, ``port``, ``neighbor``),
                                         joined in PromQL with the port transmit rates (the
                                         dashboard's uplink spread and imbalance)
================================  =====  ============================================================
"""
from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.load_balance.modes import PIPELINE_DEFAULT_MODE, LbModes
from controller.load_balance.te.overrides import Pin, TeOverrides
from controller.load_balance.uplinks import uplinks


def pin_flow(pin: Pin) -> str:
    return f"{pin.src_ip}:{pin.sport}>{pin.dst_ip}:{pin.dport}/{pin.proto}"


class LoadBalanceCollector(Collector):
    """Modes, pins and uplink spread of the fabric ``controller`` (a `FabricController`) runs."""

    def __init__(self, controller: object) -> None:
        self.controller = controller
        self.uplinks = uplinks(controller.fabric)  # type: ignore[attr-defined]

    def collect(self) -> Iterator[Metric]:
        fabric = self.controller.fabric  # type: ignore[attr-defined]
        switches = [sw.name for sw in fabric.switches]
        modes: LbModes | None = self.controller.state_source(LbModes)  # type: ignore[attr-defined]
        mode = GaugeMetricFamily("aifabric_lb_mode", "Load-balancing mode of the switch (1 for the one in force)",
                                 labels=["switch", "mode"])
        for name in switches:
            mode.add_metric([name, modes.mode(name) if modes else PIPELINE_DEFAULT_MODE], 1)
        yield mode

        overrides: TeOverrides | None = self.controller.state_source(TeOverrides)  # type: ignore[attr-defined]
        pins = overrides.pins if overrides else []
        count = GaugeMetricFamily("aifabric_te_pins", "Traffic-engineering pins in force on the switch", labels=["switch"])
        for name in switches:
            count.add_metric([name], sum(1 for p in pins if p.switch == name))
        each = GaugeMetricFamily("aifabric_te_pin", "A flow pinned to an egress port by traffic engineering",
                                 labels=["switch", "flow", "port", "neighbor"])
        for p in pins:
            each.add_metric([p.switch, pin_flow(p), str(p.port), fabric.ports_of(p.switch).get(p.port, "?")], 1)
        yield from (count, each)

        up = GaugeMetricFamily("aifabric_port_uplink", "The port leads to a switch of a higher tier",
                               labels=["switch", "port", "neighbor"])
        for name, ports in self.uplinks.items():
            for port, peer in ports.items():
                up.add_metric([name, str(port), peer], 1)
        yield up
