"""AllReduce reports reach the exporter: real ring AllReduces (ranks as threads on loopback, the
`python -m hostagent.collectives` entry point) leave their reports with --report-dir, and the
collector serves the run's figures as Prometheus text, read back with prometheus_client's parser.
Every rank drops 5% of what it sends (the collectives' own testing knob), so ranks retransmit."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hostagent.collectives import cli
from hostagent.collectives.report_metrics import AllReduceReportCollector
from loopback_ranks import fresh_net, run_parallel

RANKS = 3
ELEMENTS = 2048


def ring_run(report_dir: Path, job: int = 7) -> list[dict]:
    """One ring AllReduce of RANKS ranks; what every rank printed, by rank."""
    net = fresh_net()
    peers = ",".join(f"{net}{i + 1}" for i in range(RANKS))
    argv = lambda r: ["ring", "--peers", peers, "--rank", str(r), "--size", str(ELEMENTS), "--job", str(job),  # noqa: E731
                      "--timeout", "0.05", "--drop-outgoing", "0.05", "--report-dir", str(report_dir)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        codes = run_parallel([lambda r=r: cli.main(argv(r)) for r in range(RANKS)])
    assert codes == [0] * RANKS, (codes, err.getvalue())
    printed = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return sorted(printed, key=lambda r: r["rank"])


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """The reports of one run (run once: each test works on a copy)."""
    where = tmp_path_factory.mktemp("reports")
    return where, ring_run(where)


@pytest.fixture
def reports(one_run, tmp_path: Path) -> tuple[Path, list[dict]]:
    where, printed = one_run
    shutil.copytree(where, tmp_path / "reports")
    return tmp_path / "reports", printed


def scrape(directory: Path) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(AllReduceReportCollector(directory))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


RUN = (("algorithm", "ring"), ("job_id", "7"))


def test_a_ring_run_reports_its_slowest_time_bandwidth_and_retransmissions(reports) -> None:
    tmp_path, printed = reports
    assert len(printed) == RANKS and all(r["ok"] for r in printed)
    # the dropped packets (--drop-outgoing) were sent again by more than one rank: a sum is a sum
    assert sum(1 for r in printed if r["retransmissions"]) >= 2, printed
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"ring-job7-rank{r}.json" for r in range(RANKS)]
    values = scrape(tmp_path)
    slowest = max(r["time_s"] for r in printed)
    assert values[("aifabric_allreduce_ranks_reported", RUN)] == RANKS
    assert values[("aifabric_allreduce_ranks_failed", RUN)] == 0
    assert values[("aifabric_allreduce_run_seconds", RUN)] == pytest.approx(slowest)
    assert values[("aifabric_allreduce_run_algbw_bytes_per_second", RUN)] == pytest.approx(4 * ELEMENTS / slowest)
    assert values[("aifabric_allreduce_run_retransmissions", RUN)] == sum(r["retransmissions"] for r in printed)


def test_a_partial_run_and_a_bad_file_are_told_apart(reports) -> None:
    tmp_path, _ = reports
    (tmp_path / "ring-job7-rank1.json").unlink()          # one rank's report missing: time unknown
    (tmp_path / "ring-job9-rank0.json").write_text('{"algorithm": "ring"}')
    (tmp_path / "torn.json").write_text("{")
    values = scrape(tmp_path)
    assert values[("aifabric_allreduce_ranks_reported", RUN)] == RANKS - 1
    assert not [k for k in values if k[0].startswith("aifabric_allreduce_run_")]
    bad = {dict(k)["file"]: dict(k)["reason"] for (name, k) in values if name == "aifabric_allreduce_bad_reports"}
    assert bad == {"ring-job9-rank0.json": "invalid", "torn.json": "unreadable"}


def test_a_rank_with_a_wrong_result_is_counted(reports) -> None:
    tmp_path, _ = reports
    path = tmp_path / "ring-job7-rank2.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "ok": False}))
    assert scrape(tmp_path)[("aifabric_allreduce_ranks_failed", RUN)] == 1
