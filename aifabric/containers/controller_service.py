"""``aifabric controller --fabric FILE``: the fabric controller as a long-running service.

It reads a fabric description (`aifabric.lab.description`, written by the fabric side: ``aifabric up
--describe FILE``, the Docker ``fabric`` service) and keeps every switch in it at its desired state
with `controller.fabric_controller.FabricController` and its reconcile loop: a switch that restarts
(its stream breaks, its pipeline cookie is gone) is reconnected, given the pipeline again and
refilled; a controller that restarts finds the switches as they are and writes only the difference.
Beside it run the INT collector (``--int``: ECN and INT installed on every switch, reports received
on the telemetry bridge's address) and the Prometheus exporter (``--metrics HOST:PORT``:
`controller.metrics` plus the controller's own view of each switch, `ControllerStatusCollector`, and
the AllReduce reports ranks leave in ``allreduce/`` beside the description,
`hostagent.collectives.report_metrics`); ``--int-metrics HOST:PORT`` serves the INT collector's
metrics on an exporter of their own instead; ``--web [HOST:]PORT`` serves the live page of the
fabric (`controller.web`: load-balancing modes can be changed there with the token it logs at start;
links belong to the fabric's side and are refused). SIGTERM/SIGINT stop it cleanly.

A description that cannot be read or is not valid ends the command at once with one line
naming the file (exit status 2); switches that cannot be reached are not fatal: the service
keeps trying (0.5 s doubling to 8 s) and says so once per switch.
"""
from __future__ import annotations

import argparse
import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from aifabric.lab.description import DescriptionError, FabricDescription, load
from aifabric.lab.web_page import parse_web_address
from controller.fabric_controller import FabricController, Pipeline
from controller.telemetry.int_collector import IntCollector
from controller.metrics import FabricMetrics, fabric_metrics
from controller.telemetry import Telemetry, TelemetryConfig, WatchRule
from hostagent.collectives.report_files import RUN_SUBDIR
from hostagent.collectives.report_metrics import AllReduceReportCollector
from softswitch.addr import host_port_arg, parse_host_port
from softswitch.signal_stop import STOP_SIGNALS, SignalStop

log = logging.getLogger("aifabric.controller")

RECONCILE_INTERVAL_S = 1.0
FULL_CHECK_INTERVAL_S = 10.0      # every switch re-read this often even when nothing broke


@dataclass(frozen=True)
class ServiceOptions:
    fabric_file: Path
    metrics: tuple[str, int] | None = None      # where the exporter listens
    int_metrics: tuple[str, int] | None = None  # where the INT collector's own exporter listens
    int_enabled: bool = False                   # ECN + INT on every TCP/UDP flow, and the collector
    p4_build: Path | None = None                # overrides the description's pipeline files
    web: tuple[str, int] | None = None          # where the live page listens


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fabric", required=True, metavar="FILE",
                   help="fabric description (JSON, or YAML with PyYAML) written by the fabric side")
    p.add_argument("--metrics", metavar="HOST:PORT", type=host_port_arg,
                   help="serve Prometheus metrics there (switch counters, INT, the controller's view)")
    p.add_argument("--int-metrics", metavar="HOST:PORT", type=host_port_arg,
                   help="with --int: serve the INT collector's metrics there, apart from --metrics")
    p.add_argument("--int", action="store_true",
                   help="install ECN marking and INT on every TCP/UDP flow and receive the reports "
                        "(the fabric needs its telemetry network: `aifabric up --int`)")
    p.add_argument("--p4-build", metavar="DIR",
                   help="where fabric.json and fabric.p4info.txtpb are (default: the description's "
                        "pipeline files, else the committed build)")
    p.add_argument("--web", metavar="[HOST:]PORT", type=_web_arg,
                   help="serve the live page of the fabric there (127.0.0.1 when only a port is given)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every reconcile")


def options(args: argparse.Namespace) -> ServiceOptions:
    return ServiceOptions(
        fabric_file=Path(args.fabric),
        metrics=parse_host_port(args.metrics) if args.metrics else None,
        int_metrics=parse_host_port(args.int_metrics) if args.int_metrics else None,
        int_enabled=args.int,
        p4_build=Path(args.p4_build) if args.p4_build else None,
        web=parse_web_address(args.web) if args.web else None,
    )


def _web_arg(text: str) -> str:
    try:
        parse_web_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def pipeline_for(desc: FabricDescription, p4_build: Path | None) -> Pipeline:
    """``--p4-build`` when given, else the description's pipeline files when they are on this
    machine (a fabric elsewhere may name paths only it has), else the committed build."""
    if p4_build is not None:
        return Pipeline.from_build_dir(p4_build)
    files = desc.pipeline
    if files is not None and Path(files.p4info).is_file() and Path(files.device_config).is_file():
        return Pipeline.from_files(files.p4info, files.device_config)
    return Pipeline.from_build_dir()


class ControllerStatusCollector(Collector):
    """The controller's view of each switch, for Prometheus (label ``switch``)."""

    def __init__(self, controller: FabricController) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Metric]:
        labels = ["switch"]
        connected = GaugeMetricFamily("aifabric_controller_switch_connected",
                                      "1 while the controller has a live P4Runtime session with the switch", labels=labels)
        in_sync = GaugeMetricFamily("aifabric_controller_switch_in_sync",
                                    "1 when the switch holds the controller's desired state", labels=labels)
        connects = CounterMetricFamily("aifabric_controller_switch_connects",
                                       "Sessions the controller opened to the switch", labels=labels)
        pushes = CounterMetricFamily("aifabric_controller_pipeline_pushes",
                                     "Times the controller pushed the pipeline to the switch", labels=labels)
        reconciles = CounterMetricFamily("aifabric_controller_reconciles",
                                         "Reconcile attempts on the switch", labels=labels)
        for name, st in sorted(self.controller.status().items()):
            connected.add_metric([name], float(st.connected))
            in_sync.add_metric([name], float(st.in_sync))
            connects.add_metric([name], st.connects)
            pushes.add_metric([name], st.pipeline_pushes)
            reconciles.add_metric([name], st.reconciles)
        yield from (connected, in_sync, connects, pushes, reconciles)


class ControllerService:
    """A FabricController with its reconcile loop, INT collector and exporter, started and
    stopped together."""

    def __init__(self, desc: FabricDescription, pipeline: Pipeline, opts: ServiceOptions) -> None:
        self.desc = desc
        self.opts = opts
        telemetry = TelemetryConfig(watchlist=(WatchRule(),)) if opts.int_enabled else None
        self.controller = FabricController(desc.to_fabric(), pipeline)
        if telemetry is not None:
            Telemetry(self.controller, telemetry)
        self.collector: IntCollector | None = None
        if telemetry is not None:
            self.collector = IntCollector(telemetry.collector_ip, telemetry.collector_port)
        self.exporters: list[FabricMetrics] = []
        self.page = None

    def start(self) -> None:
        """Collector and exporter first (a fabric that is slow to answer must not keep
        Prometheus waiting), then one reconcile of every switch, then the loop."""
        if self.collector is not None:
            self.collector.start()
        apart = self.collector is not None and self.opts.int_metrics is not None
        if self.opts.metrics is not None:
            reports = AllReduceReportCollector(self.opts.fabric_file.parent / RUN_SUBDIR)
            self._serve(fabric_metrics(self.controller, None if apart else self.collector,
                                       collectors=[ControllerStatusCollector(self.controller), reports]),
                        self.opts.metrics)
        if apart:
            names = {sw.device_id: sw.name for sw in self.controller.fabric.switches}
            self._serve(FabricMetrics(int_collector=self.collector, switch_names=names), self.opts.int_metrics)
        if self.opts.web is not None:
            from controller.web.changes import ControllerChanges
            from controller.web.server import page_for

            self.page = page_for(self.controller, host=self.opts.web[0], port=self.opts.web[1],
                                 int_collector=self.collector, changes=ControllerChanges(self.controller))
            self.page.start()
            log.warning("%s", self.page.announce())
        results = self.controller.reconcile()
        failed = {n: r for n, r in results.items() if isinstance(r, BaseException)}
        for name, err in sorted(failed.items()):
            log.warning("%s: not yet in sync, retrying: %s", name, str(err).splitlines()[0])
        log.warning("%d of %d switches in sync", len(results) - len(failed), len(results))
        self.controller.start_reconcile_loop(RECONCILE_INTERVAL_S, FULL_CHECK_INTERVAL_S)

    def _serve(self, exporter: FabricMetrics, where: tuple[str, int]) -> None:
        host, port = exporter.start_http(*where)
        self.exporters.append(exporter)
        log.warning("metrics on http://%s:%d/metrics", host, port)

    def stop(self) -> None:
        if self.page is not None:
            self.page.stop()
        for exporter in self.exporters:
            exporter.stop()
        self.controller.close()
        if self.collector is not None:
            self.collector.stop()


def run(opts: ServiceOptions, stop: SignalStop) -> int:
    """Serve until ``stop`` is set; DescriptionError (one line naming the file) for a bad description."""
    desc = load(opts.fabric_file)
    pipeline = pipeline_for(desc, opts.p4_build)
    service = ControllerService(desc, pipeline, opts)
    log.warning("controlling %d switches of %s (%s)", len(desc.switches), opts.fabric_file,
                service.controller.fabric.describe())
    def end_connects() -> None:     # a stop asked for while connects wait on silent switches ends them
        stop.wait()
        service.controller.abort_connects()

    threading.Thread(target=end_connects, name="stop-connects", daemon=True).start()
    try:
        service.start()
        stop.wait()
    finally:
        service.stop()
    log.warning("stopped")
    return 0


def main(args: argparse.Namespace) -> int:
    """The ``aifabric controller`` command."""
    # A handler of its own: Mininet (imported with the aifabric command) makes every logger created
    # after it a MininetLogger with a handler that drops newlines; each line came out three times.
    logging.setLoggerClass(logging.Logger)
    for name, existing in list(logging.root.manager.loggerDict.items()):
        if isinstance(existing, logging.Logger) and name.split(".")[0] in ("aifabric", "controller"):
            existing.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    for name in ("aifabric", "controller"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO if args.verbose else logging.WARNING)
        logger.propagate = False
    stop = SignalStop(STOP_SIGNALS)
    try:
        return run(options(args), stop)
    except DescriptionError as err:
        print(f"aifabric controller: error: fabric description {err}", file=sys.stderr)
    except (OSError, ValueError) as err:
        print(f"aifabric controller: error: {err}", file=sys.stderr)
    return 2
