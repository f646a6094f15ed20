"""The metrics exporter, read by prometheus_client's parser and scraped by a real Prometheus.

The exporter is fed by an INT collector (hand-made reports, `ingest`) and a counter poller whose
reader returns fixed switch counters, so no fabric is needed. The scrape test starts Debian's
``/usr/bin/prometheus`` (scripts/bootstrap.sh installs it) with a one-second scrape of the
exporter, waits for the target to be up and reads values back through ``/api/v1/query``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.telemetry import entries as TE
from controller.fabric_controller import PortCounter
from controller.telemetry.int_collector import IntCollector
from controller.telemetry.int_report import HopRecord, group_header, individual_report, int_md_stack
from controller.metrics import CounterPoller, FabricMetrics

PROMETHEUS = Path("/usr/bin/prometheus")
SWITCH_NAMES = {1: "p0e0", 3: "p0a0", 14: "p3e1"}


def report(queue_at_sink: int, sequence: int) -> bytes:
    path = [
        HopRecord(switch_id=1, ingress_port=1, egress_port=3, hop_latency_us=20, queue_id=0, queue_occupancy=0, ingress_ts=1, egress_ts=21),
        HopRecord(switch_id=3, ingress_port=1, egress_port=3, hop_latency_us=25, queue_id=0, queue_occupancy=1, ingress_ts=30, egress_ts=55),
        HopRecord(switch_id=14, ingress_port=3, egress_port=2, hop_latency_us=9000, queue_id=0,
                  queue_occupancy=queue_at_sink, ingress_ts=60, egress_ts=9060),
    ]
    inner = bytes.fromhex("4582") + (20 + 8 + 16 + 96).to_bytes(2, "big") + bytes(4) + bytes([64, 17, 0, 0])
    inner += bytes([10, 0, 0, 2, 10, 3, 1, 3]) + (40000).to_bytes(2, "big") + (5001).to_bytes(2, "big")
    inner += (8 + 16 + 96).to_bytes(2, "big") + bytes(2)
    return group_header(14, sequence) + individual_report(inner + int_md_stack(path))


class FakeSwitchCounters:
    """egress_port_counter / ecn_marked of three switches, growing by a fixed step per read."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self, switch: str, counter: str) -> dict[int, PortCounter]:
        if counter == TE.ECN_MARKED:
            return {2: PortCounter(37, 0)} if switch == "p3e1" else {}
        self.reads += 1
        step = self.reads
        return {2: PortCounter(100 * step, 100_000 * step), 3: PortCounter(10, 1000)}


def make_exporter(clock_values: list[float] | None = None) -> FabricMetrics:
    collector = IntCollector(port=0)
    for seq, q in enumerate([5, 40, 12], start=1):
        assert collector.ingest(report(q, seq)) == 1
    collector.ingest(b"\x20\x00")  # truncated
    ticks = iter(clock_values or [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    poller = CounterPoller(read=FakeSwitchCounters(), switches=["p3e1"], clock=lambda: next(ticks))
    poller.poll_once()
    poller.poll_once()
    return FabricMetrics(int_collector=collector, poller=poller, switch_names=SWITCH_NAMES, queue_rates_pps={("p3e1", 2): 200})


def samples(exporter: FabricMetrics) -> dict[tuple[str, tuple], float]:
    text = generate_latest(exporter.registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exporter_values() -> None:
    values = samples(make_exporter())
    sink = (("port", "2"), ("switch", "p3e1"))
    assert values[("aifabric_int_queue_occupancy_packets", sink)] == 12
    assert values[("aifabric_int_queue_occupancy_peak_packets", sink)] == 40
    assert values[("aifabric_int_hop_latency_microseconds", sink)] == 9000
    assert values[("aifabric_int_queue_occupancy_peak_packets", (("port", "3"), ("switch", "p0a0")))] == 1
    assert values[("aifabric_ecn_marked_packets_total", sink)] == 37
    # second poll: 100 more packets and 100000 more bytes in one second on port 2
    assert values[("aifabric_port_transmit_bytes_per_second", sink)] == pytest.approx(100_000)
    assert values[("aifabric_link_utilisation_ratio", tuple(sorted((*sink, ("basis", "queue_rate")))))] == pytest.approx(100 / 200)
    port3 = (("basis", "nominal"), ("port", "3"), ("switch", "p3e1"))
    assert values[("aifabric_link_utilisation_ratio", tuple(sorted(port3)))] == 0.0
    assert values[("aifabric_int_reports_decoded_total", ())] == 3
    assert values[("aifabric_int_reports_malformed_total", (("reason", "truncated"),))] == 1
    # the flow's latest INT path, hop by hop in path order (the switch named from its INT node id)
    path = {(dict(k)["hop"], dict(k)["switch"], dict(k)["egress_port"]): v
            for (name, k), v in values.items() if name == "aifabric_int_path_hop_latency_microseconds"}
    assert path == {("0", "p0e0", "3"): 20, ("1", "p0a0", "3"): 25, ("2", "p3e1", "2"): 9000}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - 127.0.0.1 only
        return json.loads(answer.read())


def _query(base: str, expr: str) -> list[dict]:
    data = _get_json(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert data["status"] == "success", data
    return data["data"]["result"]


@pytest.mark.skipif(not PROMETHEUS.exists(), reason=f"{PROMETHEUS} is not installed (Debian package prometheus)")
def test_real_prometheus_scrapes_the_exporter() -> None:
    exporter = make_exporter()
    host, port = exporter.start_http("127.0.0.1", 0)
    workdir = Path(tempfile.mkdtemp(prefix="aifabric-prom-"))
    prom_port = _free_port()
    base = f"http://127.0.0.1:{prom_port}"
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: aifabric\n    static_configs:\n"
        f"      - targets: ['{host}:{port}']\n"
    )
    log = open(workdir / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        up = []
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"prometheus exited: {(workdir / 'prometheus.log').read_text()[-2000:]}"
            try:
                up = _query(base, 'up{job="aifabric"}')
            except OSError:
                up = []
            if up and up[0]["value"][1] == "1":
                break
            time.sleep(0.5)
        assert up and up[0]["value"][1] == "1", f"target never up: {up}"
        result = []
        while time.monotonic() < deadline:
            result = _query(base, 'aifabric_int_queue_occupancy_peak_packets{switch="p3e1",port="2"}')
            if result:
                break
            time.sleep(0.5)
        assert result, "no sample of aifabric_int_queue_occupancy_peak_packets"
        assert float(result[0]["value"][1]) == 40
        (marks,) = _query(base, 'aifabric_ecn_marked_packets_total{switch="p3e1",port="2"}')
        assert float(marks["value"][1]) == 37
        (bad,) = _query(base, "aifabric_int_reports_malformed_total")
        assert bad["metric"]["reason"] == "truncated" and float(bad["value"][1]) == 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
        exporter.stop()
        shutil.rmtree(workdir, ignore_errors=True)
