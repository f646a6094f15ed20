"""The traffic classes' and PFC's figures of every switch, polled through run-time control, for
Prometheus, the live page (paused links) and the demo's picture of pauses over time.

`ClassPoller` reads each softswitch's ``classes`` (softswitch/ctl.py: every port's classes, their
counters and PFC figures) every ``interval`` seconds in a thread, keeps the latest and, with
``history``, every poll (time, switch -> port -> classes). `LosslessCollector` serves the latest
(labels ``switch``, ``port``, ``class``):

==============================================  =======  ==================================================
aifabric_class_transmit_packets_total           counter  packets the class's queue sent
aifabric_class_transmit_bytes_total             counter  bytes it sent
aifabric_class_drops_total                      counter  packets its full queue refused
aifabric_class_lossless_drops_total             counter  a lossless class's packets lost at this ingress port
                                                         (headroom or queue too small: a bug)
aifabric_class_watchdog_drops_total             counter  packets the PFC watchdog dropped
aifabric_class_queue_packets                    gauge    packets in the class's queue
aifabric_pfc_pause_frames_sent_total            counter  PAUSE frames sent out of the port (XOFF, refreshes)
aifabric_pfc_xon_frames_sent_total              counter  XON frames sent
aifabric_pfc_pause_frames_received_total        counter  PAUSE frames that came in (quanta > 0)
aifabric_pfc_xon_frames_received_total          counter  XON frames that came in
aifabric_pfc_paused_seconds_total               counter  time the port's queue of the class was paused
aifabric_pfc_pausing_seconds_total              counter  time the port held its neighbour paused
aifabric_pfc_paused                             gauge    1 while the queue is paused
aifabric_pfc_buffer_bytes                       gauge    the port's ingress buffer of the class
aifabric_pfc_buffer_peak_bytes                  gauge    its peak
aifabric_pfc_storms_total                       counter  storms the watchdog caught on the queue
aifabric_pfc_restores_total                     counter  storms it ended
aifabric_pfc_storm                              gauge    1 during a storm
aifabric_mac_control_malformed_total            counter  malformed MAC control frames that came in (``reason``)
==============================================  =======  ==================================================
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.lossless.target import RuntimeControl

log = logging.getLogger(__name__)
Classes = dict[int, dict[int, dict]]          # port -> class -> figures (softswitch-ctl's, one class)
US = 1e-6


@dataclass
class ClassPoller:
    """Polls the softswitches' ``classes`` (see the module docstring)."""
    runtime: RuntimeControl
    switches: list[str]
    interval: float = 0.5
    history: bool = False
    clock: Callable[[], float] = time.monotonic
    latest: dict[str, Classes] = field(default_factory=dict)
    malformed: dict[str, dict[int, dict[str, int]]] = field(default_factory=dict)
    polls: list[tuple[float, dict[str, Classes]]] = field(default_factory=list)
    errors: int = 0
    last_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def poll_once(self) -> None:
        now, got, bad = self.clock(), {}, {}
        for name in self.switches:
            if self.runtime.target(name) != "softswitch":
                continue
            try:
                view = json.loads(self.runtime.command(name, "classes"))
            except Exception as err:      # noqa: BLE001 - a switch down must not stop the others
                with self._lock:
                    self.errors += 1
                    self.last_error = f"{name}: {err}"
                continue
            got[name] = {int(p): {c["priority"]: c for c in v["classes"]} for p, v in view["ports"].items()}
            bad[name] = {int(p): v["malformed"] for p, v in view["ports"].items() if v["malformed"]}
        with self._lock:
            self.latest.update(got)
            self.malformed.update(bad)
            if self.history:
                self.polls.append((now, got))

    def snapshot(self) -> dict[str, Classes]:
        with self._lock:
            return dict(self.latest)

    def start(self) -> "ClassPoller":
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="class-poller", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


def paused_ports(snapshot: dict[str, Classes]) -> dict[tuple[str, int], dict]:
    """(switch, port) -> {"paused": classes its queue is paused in (it may not send them),
    "pausing": classes it holds its neighbour paused in}, for the ports with either."""
    out = {}
    for switch, ports in snapshot.items():
        for port, classes in ports.items():
            paused = sorted(c for c, f in classes.items() if f.get("paused"))
            pausing = sorted(c for c, f in classes.items() if f.get("pausing"))
            if paused or pausing:
                out[(switch, port)] = {"paused": paused, "pausing": pausing}
    return out


# (metric, help, kind, figure, scale)
FAMILIES = (
    ("aifabric_class_transmit_packets", "Packets the class's queue sent", "counter", "tx_packets", 1),
    ("aifabric_class_transmit_bytes", "Bytes the class's queue sent", "counter", "tx_bytes", 1),
    ("aifabric_class_drops", "Packets the class's full queue refused", "counter", "drops", 1),
    ("aifabric_class_lossless_drops", "Lossless-class packets lost at this ingress port", "counter", "lossless_drops", 1),
    ("aifabric_class_watchdog_drops", "Packets the PFC watchdog dropped", "counter", "watchdog_drops", 1),
    ("aifabric_class_queue_packets", "Packets in the class's queue", "gauge", "occupancy", 1),
    ("aifabric_pfc_pause_frames_sent", "PFC PAUSE frames sent out of the port", "counter", "pause_sent", 1),
    ("aifabric_pfc_xon_frames_sent", "PFC XON frames sent out of the port", "counter", "xon_sent", 1),
    ("aifabric_pfc_pause_frames_received", "PFC PAUSE frames received on the port", "counter", "pause_received", 1),
    ("aifabric_pfc_xon_frames_received", "PFC XON frames received on the port", "counter", "xon_received", 1),
    ("aifabric_pfc_paused_seconds", "Time the port's queue of the class was paused", "counter", "paused_us", US),
    ("aifabric_pfc_pausing_seconds", "Time the port held its neighbour paused", "counter", "pausing_us", US),
    ("aifabric_pfc_paused", "1 while the port's queue of the class is paused", "gauge", "paused", 1),
    ("aifabric_pfc_buffer_bytes", "The port's ingress buffer of the class", "gauge", "buffer_bytes", 1),
    ("aifabric_pfc_buffer_peak_bytes", "Peak of the port's ingress buffer of the class", "gauge", "buffer_peak", 1),
    ("aifabric_pfc_storms", "PFC storms the watchdog caught on the queue", "counter", "storms", 1),
    ("aifabric_pfc_restores", "PFC storms the watchdog ended", "counter", "restores", 1),
    ("aifabric_pfc_storm", "1 while the watchdog holds the queue in a storm", "gauge", "storm", 1),
)


class LosslessCollector(Collector):
    """The poller's latest figures as metric families (served beside controller.metrics')."""

    def __init__(self, poller: ClassPoller) -> None:
        self.poller = poller

    def collect(self) -> Iterator[Metric]:
        snap = self.poller.snapshot()
        labels = ["switch", "port", "class"]
        for name, doc, kind, figure, scale in FAMILIES:
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, doc, labels=labels)
            for switch, ports in sorted(snap.items()):
                for port, classes in sorted(ports.items()):
                    for prio, f in sorted(classes.items()):
                        if figure in f and f[figure] is not None:
                            family.add_metric([switch, str(port), str(prio)], float(f[figure]) * scale)
            yield family
        bad = CounterMetricFamily("aifabric_mac_control_malformed", "Malformed MAC control frames that came in",
                                  labels=["switch", "port", "reason"])
        with self.poller._lock:
            malformed = {s: dict(p) for s, p in self.poller.malformed.items()}
        for switch, ports in sorted(malformed.items()):
            for port, reasons in sorted(ports.items()):
                for reason, n in sorted(reasons.items()):
                    bad.add_metric([switch, str(port), reason], n)
        yield bad
