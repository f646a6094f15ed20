"""Prometheus exporter of the fabric's congestion signals, per switch and port.

`FabricMetrics` owns a `prometheus_client.CollectorRegistry` of its own (never the global
default one: several fabrics, tests and exporters can live in one process) and serves it over
HTTP on a chosen address (`start_http`). Its values are read at scrape time from two sources:

* the INT collector (`controller.telemetry.int_collector.IntCollector.snapshot`): per (switch, egress
  port) the latest and peak queue occupancy (packets) and hop latency (microseconds), and the
  collector's own counters (datagrams, reports decoded, malformed per reason, lost);
* a `CounterPoller` thread that reads each switch's P4 counters through the fabric controller
  every ``interval`` seconds: ``FabricEgress.egress_port_counter`` (packets and bytes sent per
  port) and ``FabricEgress.ecn.ecn_marked`` (CE marks per port). From the byte and packet deltas
  it derives the transmit rate and the link utilisation:

  - on a port with a configured queue rate (packets/s: the softswitch/BMv2 ``set_queue_rate``
    that makes a congested link), utilisation = transmitted packets/s / that rate;
  - elsewhere, utilisation = transmitted bits/s / ``nominal_link_bps`` (default 1 Gbit/s,
    NOMINAL_LINK_BPS: veth links have no rate of their own, so the fraction is against a
    nominal datacenter access link; the bytes/s gauge is the measured figure).

Metric names (labels ``switch`` - the switch name from the address plan, or the INT node id
when unknown - and ``port``):

=============================================  =======  =============================================
aifabric_int_queue_occupancy_packets           gauge    latest queue occupancy INT saw at the port
aifabric_int_queue_occupancy_peak_packets      gauge    its peak since the collector's last reset
aifabric_int_hop_latency_microseconds          gauge    latest hop latency at the port
aifabric_int_hop_latency_peak_microseconds     gauge    its peak
aifabric_ecn_marked_packets_total              counter  CE marks (switch counter ecn_marked)
aifabric_port_transmit_packets_total           counter  egress_port_counter packets
aifabric_port_transmit_bytes_total             counter  egress_port_counter bytes
aifabric_port_transmit_bytes_per_second        gauge    byte rate over the last poll interval
aifabric_link_utilisation_ratio                gauge    see above (label ``basis``: queue_rate|nominal)
aifabric_int_report_datagrams_total            counter  datagrams the collector received
aifabric_int_reports_decoded_total             counter  individual reports decoded
aifabric_int_reports_malformed_total           counter  malformed datagrams (label ``reason``)
aifabric_int_reports_lost_total                counter  gaps in report sequence numbers
aifabric_int_path_hop_latency_microseconds     gauge    per hop of the latest INT path of each of the
                                                        MAX_PATH_FLOWS most recently seen flows (labels
                                                        ``flow``, ``hop``, ``switch``, ``ingress_port``,
                                                        ``egress_port``): the hop's latency in that report
=============================================  =======  =============================================

For a controller with failure handling (`controller.failover`), `fabric_metrics` also serves
``aifabric_link_up``, ``aifabric_port_alive``, ``aifabric_failure`` (the localised failed links and
switches) and the reroute figures (`controller.failover.metrics`). It always serves load
balancing's (`controller.load_balance.metrics`: each switch's mode, TE pins and uplinks) and
aggregation's (`controller.aggregation.metrics`: the jobs running and, where the pipeline has
it, each switch's ``agg_ops`` counter, which the poller reads with the port counters).

More sources can be served from the same registry (``collectors``): the host agents' counters
(``aifabric_hostagent_*``, `hostagent.agent.metrics.AgentCollector`).

The exporter spans features (telemetry's INT collector and ECN counter, failure handling, the
core's port counters, the host agents): it stands above them at the top of ``controller/``, and
neither the core nor any feature imports it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Protocol, Sequence

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller import entries as E
from controller.aggregation.entries import AGG_OPS
from controller.aggregation.metrics import AggregationCollector
from controller.failover.handler import running_handler
from controller.failover.metrics import FailureCollector
from controller.load_balance.metrics import LoadBalanceCollector
from controller.telemetry import entries as TE
from controller.telemetry.int_collector import IntCollector

log = logging.getLogger(__name__)

NOMINAL_LINK_BPS = 1_000_000_000
MAX_PATH_FLOWS = 32     # INT paths exported (most recent flows): bounds the series a scrape carries
DEFAULT_POLL_INTERVAL = 1.0


class PortCounterReader(Protocol):
    """What the poller needs from the fabric controller (`FabricController.read_port_counters`):
    port -> object with ``packets`` and ``bytes`` for one counter of one switch."""

    def __call__(self, switch: str, counter: str) -> Mapping[int, object]: ...


@dataclass(frozen=True)
class PortRates:
    """One port's counters and the rates over the last poll interval."""

    tx_packets: int
    tx_bytes: int
    ecn_marked: int
    tx_packets_per_s: float = 0.0
    tx_bytes_per_s: float = 0.0


@dataclass
class CounterPoller:
    """Reads the egress and ECN counters of every switch every ``interval`` seconds (one
    background thread) and keeps the latest values and rates per (switch, port)."""

    read: PortCounterReader
    switches: list[str]
    interval: float = DEFAULT_POLL_INTERVAL
    ecn_counter: str | None = TE.ECN_MARKED  # None: the pipeline has no ECN counter
    indexed: tuple[str, ...] = ()          # more counters kept by index, packets only (agg_ops)
    clock: Callable[[], float] = time.monotonic
    ports: dict[tuple[str, int], PortRates] = field(default_factory=dict)
    cells: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)   # (switch, counter) -> index -> packets
    errors: int = 0
    last_error: str | None = None
    _last: dict[str, tuple[float, dict[int, tuple[int, int]]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def poll_once(self) -> None:
        """Read every switch once (errors are counted per switch, never raised)."""
        for name in self.switches:
            try:
                self._poll_switch(name)
            except Exception as err:  # noqa: BLE001 - a switch that is down must not stop the others
                with self._lock:
                    self.errors += 1
                    self.last_error = f"{name}: {err}"
                log.debug("counter poll of %s failed: %s", name, err)

    def _poll_switch(self, name: str) -> None:
        now = self.clock()
        tx = {port: (int(c.packets), int(c.bytes)) for port, c in self.read(name, E.EGRESS_PORT_COUNTER).items()}  # type: ignore[attr-defined]
        marks = (
            {port: int(c.packets) for port, c in self.read(name, self.ecn_counter).items()}  # type: ignore[attr-defined]
            if self.ecn_counter
            else {}
        )
        more = {counter: {i: int(c.packets) for i, c in self.read(name, counter).items()}  # type: ignore[attr-defined]
                for counter in self.indexed}
        previous = self._last.get(name)
        with self._lock:
            for counter, values in more.items():
                self.cells[(name, counter)] = values
            for port in sorted(set(tx) | set(marks)):
                packets, nbytes = tx.get(port, (0, 0))
                pps = bps = 0.0
                if previous is not None and now > previous[0]:
                    old_packets, old_bytes = previous[1].get(port, (0, 0))
                    elapsed = now - previous[0]
                    pps = max(0, packets - old_packets) / elapsed
                    bps = max(0, nbytes - old_bytes) / elapsed
                self.ports[(name, port)] = PortRates(packets, nbytes, marks.get(port, 0), pps, bps)
            self._last[name] = (now, tx)

    def snapshot(self) -> dict[tuple[str, int], PortRates]:
        with self._lock:
            return dict(self.ports)

    def counter_cells(self, counter: str) -> dict[str, dict[int, int]]:
        """switch -> index -> packets of one of the ``indexed`` counters, as last read."""
        with self._lock:
            return {switch: dict(values) for (switch, c), values in sorted(self.cells.items()) if c == counter}

    def start(self) -> "CounterPoller":
        if self._thread is not None:
            return self
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                started = time.monotonic()
                self.poll_once()
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

        self._thread = threading.Thread(target=loop, name="counter-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


class _FabricCollector(Collector):
    """Builds the metric families from the INT collector and the counter poller at scrape time."""

    def __init__(self, metrics: "FabricMetrics") -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.m
        if m.int_collector is not None:
            yield from self._int_metrics(m.int_collector)
        if m.poller is not None:
            yield from self._counter_metrics(m.poller)

    def _int_metrics(self, collector: IntCollector) -> Iterator[Metric]:
        snap = collector.snapshot()
        labels = ["switch", "port"]
        q = GaugeMetricFamily("aifabric_int_queue_occupancy_packets", "Latest egress queue occupancy seen by INT", labels=labels)
        q_peak = GaugeMetricFamily("aifabric_int_queue_occupancy_peak_packets", "Peak egress queue occupancy seen by INT", labels=labels)
        lat = GaugeMetricFamily("aifabric_int_hop_latency_microseconds", "Latest hop latency seen by INT", labels=labels)
        lat_peak = GaugeMetricFamily("aifabric_int_hop_latency_peak_microseconds", "Peak hop latency seen by INT", labels=labels)
        for (switch_id, port), pt in sorted(snap.ports.items()):
            key = [self.m.switch_name(switch_id), str(port)]
            if pt.queue_occupancy is not None:
                q.add_metric(key, pt.queue_occupancy)
                q_peak.add_metric(key, pt.queue_occupancy_peak or 0)
            if pt.hop_latency_us is not None:
                lat.add_metric(key, pt.hop_latency_us)
                lat_peak.add_metric(key, pt.hop_latency_peak_us or 0)
        yield from (q, q_peak, lat, lat_peak)
        c = snap.counters
        yield CounterMetricFamily("aifabric_int_report_datagrams", "Telemetry report datagrams received", value=c.datagrams)
        yield CounterMetricFamily("aifabric_int_reports_decoded", "Individual telemetry reports decoded", value=c.reports_decoded)
        bad = CounterMetricFamily("aifabric_int_reports_malformed", "Malformed telemetry report datagrams", labels=["reason"])
        for reason, count in sorted(c.malformed.items()):
            bad.add_metric([reason], count)
        yield bad
        yield CounterMetricFamily("aifabric_int_reports_lost", "Reports missing from the sequence numbers", value=c.reports_lost)
        yield self._path_metric(snap.flows.values())

    def _path_metric(self, flows) -> Metric:
        paths = GaugeMetricFamily("aifabric_int_path_hop_latency_microseconds",
                                  "Hop latency along the latest INT path of recently seen flows",
                                  labels=["flow", "hop", "switch", "ingress_port", "egress_port"])
        recent = sorted(flows, key=lambda f: f.last_seen, reverse=True)[:MAX_PATH_FLOWS]
        for flow in sorted(recent, key=lambda f: str(f.flow)):
            for i, hop in enumerate(flow.path):
                if hop.hop_latency_us is None:
                    continue
                switch = self.m.switch_name(hop.switch_id) if hop.switch_id is not None else "?"
                paths.add_metric([str(flow.flow), str(i), switch, str(hop.ingress_port), str(hop.egress_port)],
                                 hop.hop_latency_us)
        return paths

    def _counter_metrics(self, poller: CounterPoller) -> Iterator[Metric]:
        labels = ["switch", "port"]
        marks = CounterMetricFamily("aifabric_ecn_marked_packets", "Packets marked CE at the egress port", labels=labels)
        tx_p = CounterMetricFamily("aifabric_port_transmit_packets", "Packets sent out of the port", labels=labels)
        tx_b = CounterMetricFamily("aifabric_port_transmit_bytes", "Bytes sent out of the port", labels=labels)
        rate = GaugeMetricFamily("aifabric_port_transmit_bytes_per_second", "Bytes/s sent over the last poll interval", labels=labels)
        util = GaugeMetricFamily(
            "aifabric_link_utilisation_ratio",
            "Transmit rate / the port's queue rate (packets) where one is set, else / the nominal link rate (bits)",
            labels=[*labels, "basis"],
        )
        for (switch, port), r in sorted(poller.snapshot().items()):
            key = [switch, str(port)]
            marks.add_metric(key, r.ecn_marked)
            tx_p.add_metric(key, r.tx_packets)
            tx_b.add_metric(key, r.tx_bytes)
            rate.add_metric(key, r.tx_bytes_per_s)
            limit = self.m.queue_rates_pps.get((switch, port))
            if limit:
                util.add_metric([*key, "queue_rate"], r.tx_packets_per_s / limit)
            else:
                util.add_metric([*key, "nominal"], 8 * r.tx_bytes_per_s / self.m.nominal_link_bps)
        yield from (marks, tx_p, tx_b, rate, util)


class FabricMetrics:
    """The exporter: its own registry, an optional INT collector and counter poller, HTTP."""

    def __init__(
        self,
        *,
        int_collector: IntCollector | None = None,
        poller: CounterPoller | None = None,
        switch_names: Mapping[int, str] | None = None,
        queue_rates_pps: Mapping[tuple[str, int], int] | None = None,
        nominal_link_bps: float = NOMINAL_LINK_BPS,
        collectors: Sequence[Collector] = (),
    ) -> None:
        """``collectors``: more metric sources served beside the fabric's (e.g. the host agents',
        `hostagent.agent.metrics.AgentCollector`)."""
        self.int_collector = int_collector
        self.poller = poller
        self.switch_names = dict(switch_names or {})
        self.queue_rates_pps: dict[tuple[str, int], int] = dict(queue_rates_pps or {})
        self.nominal_link_bps = nominal_link_bps
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_FabricCollector(self))
        for extra in collectors:
            self.registry.register(extra)
        self._server = None
        self._thread: threading.Thread | None = None

    def switch_name(self, switch_id: int) -> str:
        return self.switch_names.get(switch_id, str(switch_id))

    def set_queue_rate(self, switch: str, port: int, rate_pps: int) -> None:
        """Tell the exporter about a configured queue rate (0: none) for utilisation."""
        if rate_pps:
            self.queue_rates_pps[(switch, port)] = rate_pps
        else:
            self.queue_rates_pps.pop((switch, port), None)

    def start_http(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Serve /metrics on host:port (0: any free port); returns the bound address.
        OSError names the address when it cannot bind."""
        if self._server is not None:
            return self.address
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            raise OSError(err.errno, f"metrics exporter cannot listen on {host}:{port}: {err.strerror}") from None
        if self.poller is not None:
            self.poller.start()
        return self.address

    @property
    def address(self) -> tuple[str, int]:
        if self._server is None:
            raise RuntimeError("the metrics exporter is not serving (call start_http)")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        if self.poller is not None:
            self.poller.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FabricMetrics":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def fabric_metrics(
    controller: object,
    int_collector: IntCollector | None = None,
    *,
    interval: float = DEFAULT_POLL_INTERVAL,
    queue_rates_pps: Mapping[tuple[str, int], int] | None = None,
    collectors: Sequence[Collector] = (),
) -> FabricMetrics:
    """An exporter wired to a `controller.fabric_controller.FabricController` (counters read
    through its sessions) and an INT collector; switch names from its fabric description. The
    ECN counter is read when the pipeline has it. ``collectors``: see `FabricMetrics`."""
    fabric = controller.fabric  # type: ignore[attr-defined]
    p4info = controller.pipeline.p4info  # type: ignore[attr-defined]
    has_agg_ops = _has_counter(p4info, AGG_OPS)
    poller = CounterPoller(
        read=controller.read_port_counters,  # type: ignore[attr-defined]
        switches=[sw.name for sw in fabric.switches],
        interval=interval,
        ecn_counter=TE.ECN_MARKED if _has_counter(p4info, TE.ECN_MARKED) else None,
        indexed=(AGG_OPS,) if has_agg_ops else (),
    )
    features = [
        FailureCollector(lambda: running_handler(controller)),
        LoadBalanceCollector(controller),
        AggregationCollector(controller, (lambda: poller.counter_cells(AGG_OPS)) if has_agg_ops else None),
    ]
    return FabricMetrics(
        int_collector=int_collector,
        poller=poller,
        switch_names={sw.device_id: sw.name for sw in fabric.switches},
        queue_rates_pps=queue_rates_pps,
        collectors=[*collectors, *features],
    )


def _has_counter(p4info: object, name: str) -> bool:
    try:
        p4info.counter(name)  # type: ignore[attr-defined]
    except KeyError:
        return False
    return True

