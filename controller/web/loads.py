"""Each link direction's load: its rate from the switches' port counters, against the link's rate.

A direction out of a switch is measured by that switch's ``egress_port_counter`` at the sending
port; a direction out of a host (which has no P4 counter) by the receiving switch's
``ingress_port_counter`` at its port. Both are read every ``interval`` seconds by
`controller.metrics.CounterPoller` (one per counter), which keeps the rates over the last
interval.

The link's rate (`LinkRates`) is the queue rate set on the sending port (packets/s: the
softswitch/BMv2 ``set_queue_rate`` that makes a link the bottleneck) where one is known, else a
nominal bit rate (1 Gbit/s as the exporter's ``aifabric_link_utilisation_ratio``: veths have no
rate of their own). ``basis`` says which.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from controller import entries as E
from controller.fabric_controller import PortCounter
from controller.metrics import DEFAULT_POLL_INTERVAL, NOMINAL_LINK_BPS, CounterPoller, PortRates
from controller.web.topology import Direction


@dataclass
class LinkRates:
    """The rate of each sending port: ``queue_pps[(node, port)]`` where set, else ``nominal_bps``."""

    queue_pps: dict[tuple[str, int], float] = field(default_factory=dict)
    nominal_bps: float = NOMINAL_LINK_BPS

    def set_queue_rate(self, node: str, port: int, rate_pps: float) -> None:
        if rate_pps:
            self.queue_pps[(node, port)] = rate_pps
        else:
            self.queue_pps.pop((node, port), None)


def direction_loads(dirs: list[Direction], switches: set[str], egress: Mapping[tuple[str, int], PortRates],
                    ingress: Mapping[tuple[str, int], PortRates], rates: LinkRates) -> dict[str, dict]:
    """direction id -> packets/s, bytes/s, utilisation and its basis; a direction with no
    counter read yet is left out (unknown, never shown as idle)."""
    out: dict[str, dict] = {}
    for d in dirs:
        r = egress.get((d.src, d.port)) if d.src in switches else ingress.get((d.dst, d.dst_port))
        if r is None:
            continue
        limit = rates.queue_pps.get((d.src, d.port))
        if limit:
            util, basis = r.tx_packets_per_s / limit, "queue_rate"
        else:
            util, basis = 8 * r.tx_bytes_per_s / rates.nominal_bps, "nominal"
        out[d.id] = {"pps": round(r.tx_packets_per_s, 1), "bps": round(8 * r.tx_bytes_per_s),
                     "util": round(util, 4), "basis": basis}
    return out


def every_port(read: Callable[[str, str], Mapping[int, object]], ports: Mapping[str, Iterable[int]],
               counter: str) -> Callable[[str, str], dict[int, object]]:
    """``read`` of ``counter`` with a zero cell for every port of the switch it left out
    (`FabricController.read_port_counters` returns non-zero cells only): a port read and found
    unused is idle, whereas a switch that could not be read stays unknown."""
    def read_all(switch: str, _counter: str) -> dict[int, object]:
        cells = dict(read(switch, counter))
        return {port: cells.get(port, PortCounter(0, 0)) for port in sorted(set(ports[switch]) | set(cells))}
    return read_all


class LinkLoads:
    """The two counter pollers of a controller's switches (started and stopped together)."""

    def __init__(self, read: Callable[[str, str], Mapping[int, object]], ports: Mapping[str, Iterable[int]],
                 rates: LinkRates | None = None, interval: float = DEFAULT_POLL_INTERVAL) -> None:
        """``read(switch, counter)``: `FabricController.read_port_counters`; ``ports``: each
        switch's ports (`Fabric.ports_of`)."""
        self.rates = rates or LinkRates()
        switches = sorted(ports)
        self.egress = CounterPoller(read=every_port(read, ports, E.EGRESS_PORT_COUNTER), switches=switches,
                                    interval=interval, ecn_counter=None)
        self.ingress = CounterPoller(read=every_port(read, ports, E.INGRESS_PORT_COUNTER), switches=switches,
                                     interval=interval, ecn_counter=None)

    def start(self) -> "LinkLoads":
        self.egress.start()
        self.ingress.start()
        return self

    def stop(self) -> None:
        self.egress.stop()
        self.ingress.stop()

    @property
    def errors(self) -> dict[str, object]:
        """Failed reads per counter, with the last one's text (a dead switch is not fatal)."""
        return {name: {"count": p.errors, "last": p.last_error}
                for name, p in (("egress_port_counter", self.egress), ("ingress_port_counter", self.ingress))}

    def loads(self, dirs: list[Direction], switches: set[str]) -> dict[str, dict]:
        return direction_loads(dirs, switches, self.egress.snapshot(), self.ingress.snapshot(), self.rates)
