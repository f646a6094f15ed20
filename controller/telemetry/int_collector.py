"""INT collector: a UDP server that decodes telemetry reports and keeps what they say.

`IntCollector` binds a UDP socket (default port 32766 on every address; the INT demo binds the
telemetry bridge's address, topologies.addressing.TELEMETRY_COLLECTOR_IP) and decodes every
datagram in one receiving thread with `controller.telemetry.int_report.decode_reports`. It keeps:

* per flow (`FlowKey`): the latest path (hops in path order), how many reports, how many
  different paths were seen, and per hop (switch, ingress, egress) the count, mean and max of
  hop latency and queue occupancy; the last ``history`` reports of the flow (for plots);
* per (switch id, egress port): the latest and peak queue occupancy and hop latency;
* counters: datagrams, reports decoded, malformed reports per reason, reports lost (gaps in the
  group header's sequence numbers per node and hw_id).

A malformed datagram is counted under its `Reason` and dropped; nothing a sender puts on the
wire stops the collector. `snapshot()` returns immutable copies for the demo, the metrics
exporter and tests; `ingest(payload)` is the same path without a socket (tests, benchmarks).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from controller.telemetry.int_report import (
    DEFAULT_INT_DSCP_BIT,
    SEQUENCE_BITS,
    FlowKey,
    HopRecord,
    MalformedReport,
    Reason,
    Report,
    decode_reports,
)
from topologies.addressing import TELEMETRY_COLLECTOR_PORT

log = logging.getLogger(__name__)

DEFAULT_COLLECTOR_PORT = TELEMETRY_COLLECTOR_PORT   # the telemetry network's (topologies.addressing)
DEFAULT_HISTORY = 4096
MAX_DATAGRAM = 65535
DECODER_ERROR = "decoder_error"  # a reason of our own: the decoder itself failed (a bug)
_SEQUENCE_MOD = 1 << SEQUENCE_BITS


@dataclass(frozen=True)
class HopStats:
    """Aggregates of one hop of one flow over the reports seen since the last reset."""

    switch_id: int | None
    ingress_port: int | None
    egress_port: int | None
    samples: int
    latency_mean_us: float | None
    latency_max_us: int | None
    queue_mean: float | None
    queue_max: int | None
    queue_last: int | None


@dataclass(frozen=True)
class FlowSummary:
    flow: FlowKey
    reports: int
    first_seen: float  # collector clock (time.monotonic by default)
    last_seen: float
    path: tuple[HopRecord, ...]  # of the latest report
    paths_seen: int  # distinct sequences of (switch, ingress, egress)
    hops: tuple[HopStats, ...]  # the latest path's hops first, in path order, then older ones

    @property
    def hop_count(self) -> int:
        return len(self.path)


@dataclass(frozen=True)
class PortTelemetry:
    """What INT said about one egress port of one switch."""

    switch_id: int
    port: int
    samples: int
    queue_occupancy: int | None  # latest
    queue_occupancy_peak: int | None
    hop_latency_us: int | None  # latest
    hop_latency_peak_us: int | None
    updated: float


@dataclass(frozen=True)
class CollectorCounters:
    datagrams: int = 0
    reports_decoded: int = 0
    malformed: dict[str, int] = field(default_factory=dict)  # reason -> datagrams
    reports_lost: int = 0  # sequence number gaps
    bytes_received: int = 0

    @property
    def malformed_total(self) -> int:
        return sum(self.malformed.values())


@dataclass(frozen=True)
class CollectorSnapshot:
    counters: CollectorCounters
    flows: dict[FlowKey, FlowSummary]
    ports: dict[tuple[int, int], PortTelemetry]
    taken: float


# --- mutable accumulators (only touched under the collector's lock) -------------------------


class _HopAcc:
    __slots__ = ("key", "samples", "lat_n", "lat_sum", "lat_max", "q_n", "q_sum", "q_max", "q_last")

    def __init__(self, key: tuple[int | None, int | None, int | None]) -> None:
        self.key = key
        self.samples = 0
        self.lat_n = self.q_n = 0
        self.lat_sum = self.q_sum = 0
        self.lat_max: int | None = None
        self.q_max: int | None = None
        self.q_last: int | None = None

    def add(self, hop: HopRecord) -> None:
        self.samples += 1
        lat = hop.hop_latency_us
        if lat is not None:
            self.lat_n += 1
            self.lat_sum += lat
            self.lat_max = lat if self.lat_max is None or lat > self.lat_max else self.lat_max
        occ = hop.queue_occupancy
        if occ is not None:
            self.q_n += 1
            self.q_sum += occ
            self.q_max = occ if self.q_max is None or occ > self.q_max else self.q_max
        self.q_last = occ

    def frozen(self) -> HopStats:
        return HopStats(
            switch_id=self.key[0],
            ingress_port=self.key[1],
            egress_port=self.key[2],
            samples=self.samples,
            latency_mean_us=self.lat_sum / self.lat_n if self.lat_n else None,
            latency_max_us=self.lat_max,
            queue_mean=self.q_sum / self.q_n if self.q_n else None,
            queue_max=self.q_max,
            queue_last=self.q_last,
        )


class _FlowAcc:
    __slots__ = ("flow", "reports", "first_seen", "last_seen", "path", "paths", "hops", "history")

    def __init__(self, flow: FlowKey, now: float, history: int) -> None:
        self.flow = flow
        self.reports = 0
        self.first_seen = self.last_seen = now
        self.path: tuple[HopRecord, ...] = ()
        self.paths: set[tuple] = set()
        self.hops: dict[tuple, _HopAcc] = {}
        self.history: deque[tuple[float, Report]] = deque(maxlen=history)

    def add(self, report: Report, now: float) -> None:
        self.reports += 1
        self.last_seen = now
        self.path = report.path
        keys = tuple((h.switch_id, h.ingress_port, h.egress_port) for h in report.path)
        self.paths.add(keys)
        for key, hop in zip(keys, report.path):
            acc = self.hops.get(key)
            if acc is None:
                acc = self.hops[key] = _HopAcc(key)
            acc.add(hop)
        self.history.append((now, report))

    def frozen(self) -> FlowSummary:
        latest = [(h.switch_id, h.ingress_port, h.egress_port) for h in self.path]
        seen = set(latest)
        order = latest + [k for k in self.hops if k not in seen]
        return FlowSummary(
            flow=self.flow,
            reports=self.reports,
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            path=self.path,
            paths_seen=len(self.paths),
            hops=tuple(self.hops[k].frozen() for k in order if k in self.hops),
        )


class _PortAcc:
    __slots__ = ("switch_id", "port", "samples", "q", "q_peak", "lat", "lat_peak", "updated")

    def __init__(self, switch_id: int, port: int) -> None:
        self.switch_id, self.port = switch_id, port
        self.samples = 0
        self.q: int | None = None
        self.q_peak: int | None = None
        self.lat: int | None = None
        self.lat_peak: int | None = None
        self.updated = 0.0

    def add(self, hop: HopRecord, now: float) -> None:
        self.samples += 1
        self.updated = now
        if hop.queue_occupancy is not None:
            self.q = hop.queue_occupancy
            self.q_peak = self.q if self.q_peak is None or self.q > self.q_peak else self.q_peak
        if hop.hop_latency_us is not None:
            self.lat = hop.hop_latency_us
            self.lat_peak = self.lat if self.lat_peak is None or self.lat > self.lat_peak else self.lat_peak

    def frozen(self) -> PortTelemetry:
        return PortTelemetry(self.switch_id, self.port, self.samples, self.q, self.q_peak, self.lat, self.lat_peak, self.updated)


# --- the collector --------------------------------------------------------------------------


class IntCollector:
    """Decodes telemetry reports from a UDP socket (one receiving thread) and aggregates them."""

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = DEFAULT_COLLECTOR_PORT,
        *,
        history: int = DEFAULT_HISTORY,
        int_dscp_bit: int = DEFAULT_INT_DSCP_BIT,
        receive_buffer: int = 4 << 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.port = port
        self.history_size = history
        self.int_dscp_bit = int_dscp_bit
        self.receive_buffer = receive_buffer
        self.clock = clock
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._datagrams = 0
        self._decoded = 0
        self._bytes = 0
        self._lost = 0
        self._malformed: dict[str, int] = {}
        self._last_malformed: str | None = None
        self._sequences: dict[tuple[int, int], int] = {}
        self._flows: dict[FlowKey, _FlowAcc] = {}
        self._ports: dict[tuple[int, int], _PortAcc] = {}
        self._last_report = 0.0

    # --- life cycle ------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the socket is bound to (the real port when 0 was asked for)."""
        if self._sock is None:
            return self.host, self.port
        host, port = self._sock.getsockname()[:2]
        return host, port

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "IntCollector":
        """Bind the socket and start the receiving thread; OSError names the address."""
        if self.running:
            return self
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            sock.bind((self.host, self.port))
        except OSError as err:
            sock.close()
            raise OSError(err.errno, f"INT collector cannot bind UDP {self.host}:{self.port}: {err.strerror}") from None
        sock.settimeout(0.2)  # lets the thread notice stop() without a wake-up datagram
        self._sock = sock
        self._stop.clear()
        self._thread = threading.Thread(target=self._receive_loop, name=f"int-collector-{self.port}", daemon=True)
        self._thread.start()
        log.info("INT collector listening on UDP %s:%d", *self.address)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "IntCollector":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _receive_loop(self) -> None:
        sock = self._sock
        assert sock is not None
        buf = bytearray(MAX_DATAGRAM)
        view = memoryview(buf)
        while not self._stop.is_set():
            try:
                n = sock.recv_into(buf)
            except socket.timeout:
                continue
            except OSError as err:
                if not self._stop.is_set():
                    log.warning("INT collector socket error: %s", err)
                return
            self.ingest(view[:n])

    # --- decoding and accounting -----------------------------------------------------------

    def ingest(self, payload: bytes | bytearray | memoryview) -> int:
        """Decode one datagram and account for it; returns the number of reports it held
        (0 when malformed). Never raises."""
        try:
            reports = decode_reports(payload, int_dscp_bit=self.int_dscp_bit)
            reason = None
        except MalformedReport as err:
            reports, reason, detail = [], err.reason, str(err)
        except Exception as err:  # noqa: BLE001 - counted, never fatal
            reports, reason, detail = [], DECODER_ERROR, f"{type(err).__name__}: {err}"
        now = self.clock()
        with self._changed:
            self._datagrams += 1
            self._bytes += len(payload)
            if reason is not None:
                self._malformed[reason] = self._malformed.get(reason, 0) + 1
                self._last_malformed = detail
                self._changed.notify_all()
                return 0
            for report in reports:
                self._account(report, now)
            self._decoded += len(reports)
            self._last_report = now
            self._changed.notify_all()
        return len(reports)

    def _account(self, report: Report, now: float) -> None:
        seq_key = (report.node_id, report.hw_id)
        last = self._sequences.get(seq_key)
        if last is not None:
            gap = (report.sequence - last - 1) % _SEQUENCE_MOD
            if gap < _SEQUENCE_MOD // 2:  # larger "gaps" are reordering or a restarted switch
                self._lost += gap
        self._sequences[seq_key] = report.sequence
        if report.flow is not None:
            acc = self._flows.get(report.flow)
            if acc is None:
                acc = self._flows[report.flow] = _FlowAcc(report.flow, now, self.history_size)
            acc.add(report, now)
        for hop in report.path:
            if hop.switch_id is None or hop.egress_port is None:
                continue
            key = (hop.switch_id, hop.egress_port)
            port = self._ports.get(key)
            if port is None:
                port = self._ports[key] = _PortAcc(*key)
            port.add(hop, now)

    # --- queries ---------------------------------------------------------------------------

    def counters(self) -> CollectorCounters:
        with self._lock:
            return CollectorCounters(self._datagrams, self._decoded, dict(self._malformed), self._lost, self._bytes)

    @property
    def last_malformed(self) -> str | None:
        """The message of the latest malformed datagram (what was wrong with it)."""
        return self._last_malformed

    def snapshot(self) -> CollectorSnapshot:
        with self._lock:
            return CollectorSnapshot(
                counters=CollectorCounters(self._datagrams, self._decoded, dict(self._malformed), self._lost, self._bytes),
                flows={k: acc.frozen() for k, acc in self._flows.items()},
                ports={k: acc.frozen() for k, acc in self._ports.items()},
                taken=self.clock(),
            )

    def flow(self, key: FlowKey) -> FlowSummary | None:
        with self._lock:
            acc = self._flows.get(key)
            return acc.frozen() if acc is not None else None

    def flows(self) -> list[FlowKey]:
        with self._lock:
            return list(self._flows)

    def history(self, key: FlowKey) -> list[tuple[float, Report]]:
        """The latest reports of a flow, oldest first, with the time each was received."""
        with self._lock:
            acc = self._flows.get(key)
            return list(acc.history) if acc is not None else []

    def reset_flows(self, keys: Iterable[FlowKey] | None = None) -> None:
        """Forget flows (all by default) and the per-port values; counters are kept."""
        with self._lock:
            if keys is None:
                self._flows.clear()
            else:
                for k in keys:
                    self._flows.pop(k, None)
            self._ports.clear()

    def wait_for_reports(self, count: int, timeout: float, flow: FlowKey | None = None) -> bool:
        """Wait until ``count`` reports were decoded (of ``flow``, when given); False on timeout."""

        def enough() -> bool:
            if flow is None:
                return self._decoded >= count
            acc = self._flows.get(flow)
            return acc is not None and acc.reports >= count

        with self._changed:
            return self._changed.wait_for(enough, timeout)

    def wait_quiet(self, quiet: float = 0.5, timeout: float = 10.0) -> bool:
        """Wait until no report arrived for ``quiet`` seconds; False when reports kept coming."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = self.clock() - self._last_report if self._last_report else quiet
            if idle >= quiet:
                return True
            time.sleep(min(quiet - idle, max(0.0, deadline - time.monotonic())) or 0.01)
        return False


__all__ = [
    "IntCollector",
    "CollectorSnapshot",
    "CollectorCounters",
    "FlowSummary",
    "HopStats",
    "PortTelemetry",
    "DEFAULT_COLLECTOR_PORT",
    "DECODER_ERROR",
    "Reason",
]
