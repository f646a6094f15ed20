"""Prometheus collector of the AllReduce reports ranks left in a directory
(`hostagent.collectives.report_files`), read at scrape time; registered beside the fabric's
exporter (`controller.metrics.FabricMetrics(..., collectors=[AllReduceReportCollector(dir)])`).

A run is (algorithm, job id): each rank's latest report counts. Its time is the slowest rank's, so
time, algorithm bandwidth and retransmissions are served only once every rank 0..workers-1 has
reported (a partial run's slowest rank is unknown). ``algorithm`` is what the rank ran: ``ring``,
or ``ps`` for the aggregation protocol, whose sums come from the switches when the controller's
job is in the network (`aifabric_allreduce_job_workers`) and from the parameter server otherwise.

==============================================  =====  ==================================================
aifabric_allreduce_ranks_reported               gauge  ranks with a report (labels ``algorithm``, ``job_id``:
                                                       ``job`` is Prometheus' own target label)
aifabric_allreduce_ranks_failed                 gauge  of which with a wrong result
aifabric_allreduce_run_seconds                  gauge  the slowest rank's time (complete runs)
aifabric_allreduce_run_algbw_bytes_per_second   gauge  tensor bytes / that time
aifabric_allreduce_run_retransmissions          gauge  packets the ranks sent again, summed
aifabric_allreduce_bad_reports                  gauge  1 per file that cannot be used (labels ``file``,
                                                       ``reason``: unreadable|invalid)
==============================================  =====  ==================================================
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hostagent.collectives.report_files import BadReport, RankReport, read_report


def runs(reports: list[RankReport]) -> dict[tuple[str, int], dict[int, RankReport]]:
    """(algorithm, job) -> rank -> report."""
    out: dict[tuple[str, int], dict[int, RankReport]] = defaultdict(dict)
    for r in reports:
        out[(r.algorithm, r.job)][r.rank] = r
    return dict(sorted(out.items()))


def complete(ranks: dict[int, RankReport]) -> bool:
    """Every rank 0..workers-1 of the run reported, all naming the same number of workers."""
    sizes = {r.workers for r in ranks.values()}
    return len(sizes) == 1 and set(ranks) == set(range(sizes.pop()))


class AllReduceReportCollector(Collector):
    """Every ``*.json`` in ``directory`` is one rank's latest report."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def read(self) -> tuple[list[RankReport], dict[str, str]]:
        """The usable reports, and file name -> reason for the others."""
        good, bad = [], {}
        for path in sorted(self.directory.glob("*.json")):
            try:
                good.append(read_report(path))
            except BadReport as err:
                bad[path.name] = str(err).split(":")[0]
        return good, bad

    def collect(self) -> Iterator[Metric]:
        reports, bad = self.read()
        labels = ["algorithm", "job_id"]
        reported = GaugeMetricFamily("aifabric_allreduce_ranks_reported", "Ranks of the AllReduce run with a report", labels=labels)
        failed = GaugeMetricFamily("aifabric_allreduce_ranks_failed", "Ranks whose AllReduce result was wrong", labels=labels)
        seconds = GaugeMetricFamily("aifabric_allreduce_run_seconds", "The slowest rank's AllReduce time", labels=labels)
        algbw = GaugeMetricFamily("aifabric_allreduce_run_algbw_bytes_per_second",
                                  "Algorithm bandwidth: tensor bytes over the slowest rank's time", labels=labels)
        resent = GaugeMetricFamily("aifabric_allreduce_run_retransmissions", "Packets the run's ranks sent again", labels=labels)
        for (algorithm, job), ranks in runs(reports).items():
            key = [algorithm, str(job)]
            reported.add_metric(key, len(ranks))
            failed.add_metric(key, sum(1 for r in ranks.values() if not r.ok))
            if not complete(ranks):
                continue
            slowest = max(r.time_s for r in ranks.values())
            seconds.add_metric(key, slowest)
            if slowest > 0:
                algbw.add_metric(key, max(r.tensor_bytes for r in ranks.values()) / slowest)
            resent.add_metric(key, sum(r.retransmissions for r in ranks.values()))
        unusable = GaugeMetricFamily("aifabric_allreduce_bad_reports", "AllReduce report files that cannot be used",
                                     labels=["file", "reason"])
        for name, reason in bad.items():
            unusable.add_metric([name, reason], 1)
        yield from (reported, failed, seconds, algbw, resent, unusable)
