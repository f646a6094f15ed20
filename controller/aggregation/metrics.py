"""Prometheus families of in-network aggregation (served by `controller.metrics.fabric_metrics`).

What the controller sees of AllReduce jobs: the jobs its `JobManager` runs (found with
``controller.state_source``; none when no manager is registered) and every switch's
``agg_ops`` counter (aggregation packets by outcome, `controller.aggregation.entries.OUTCOMES`),
which the exporter's counter poller reads (``agg_ops``: switch -> {outcome index: packets}).
The chunks a job completed are the ``completed`` outcomes at its root; the retransmissions the
switches saw are the ``dup_*`` outcomes. Time and algorithm bandwidth are the workers' figures:
they reach the exporter as report files (`hostagent.collectives.report_metrics`).

=================================  =======  ==========================================================
aifabric_allreduce_jobs_running    gauge    jobs the controller's manager has on the fabric
aifabric_allreduce_job_workers     gauge    per running job (labels ``job_id``, ``in_network``: 1|0,
                                            ``root``: the tree's root switch, empty off the network)
aifabric_allreduce_tree_fan_in     gauge    per switch of a running job's tree (labels ``job_id``,
                                            ``switch``, ``parent``: empty at the root): its children
aifabric_agg_ops_total             counter  aggregation packets by outcome (labels ``switch``, ``outcome``),
                                            every outcome of every switch polled, zeros included
=================================  =======  ==========================================================
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.aggregation.entries import OUTCOMES
from controller.aggregation.manager import JobManager

AggOpsSource = Callable[[], Mapping[str, Mapping[int, int]]]


class AggregationCollector(Collector):
    """Jobs and switch aggregation counters of the fabric ``controller`` runs."""

    def __init__(self, controller: object, agg_ops: AggOpsSource | None = None) -> None:
        self.controller = controller
        self.agg_ops = agg_ops

    def collect(self) -> Iterator[Metric]:
        manager: JobManager | None = self.controller.state_source(JobManager)  # type: ignore[attr-defined]
        jobs = manager.running() if manager is not None else []
        yield GaugeMetricFamily("aifabric_allreduce_jobs_running", "AllReduce jobs on the fabric", value=len(jobs))
        workers = GaugeMetricFamily("aifabric_allreduce_job_workers", "Workers of a running AllReduce job",
                                    labels=["job_id", "in_network", "root"])
        fan_in = GaugeMetricFamily("aifabric_allreduce_tree_fan_in", "Children a switch of a job's tree adds up",
                                   labels=["job_id", "switch", "parent"])
        for job in jobs:
            workers.add_metric([str(job.job_id), str(int(job.in_network)), job.tree.root if job.tree else ""],
                               len(job.workers))
            for name, node in sorted(job.tree.nodes.items()) if job.tree else ():
                fan_in.add_metric([str(job.job_id), name, node.parent or ""], node.fan_in)
        yield from (workers, fan_in)
        if self.agg_ops is not None:
            ops = CounterMetricFamily("aifabric_agg_ops", "Aggregation packets by outcome at the switch",
                                      labels=["switch", "outcome"])
            for switch, cells in sorted(self.agg_ops().items()):
                for index, outcome in enumerate(OUTCOMES):
                    ops.add_metric([switch, outcome], cells.get(index, 0))
            yield ops
