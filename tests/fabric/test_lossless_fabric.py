"""Lossless Ethernet on a k=4 fat-tree of softswitches whose links are limited in bits: the
scenes of ``aifabric demo lossless`` (aifabric.experiments.lossless_scenes) on one shared lab,
through real PFC frames on real veths, the hosts honouring them in eBPF.

* incast 8 to 1 without PFC loses datagrams, each one a drop a switch counted; with PFC the same
  flows lose none, because the switches paused their neighbours and the hosts instead;
* a deadlock (a failed link and a routing bounce close a loop of two lossless queues) stays stuck
  without the PFC watchdog and is broken by it; with the watchdog on from the start it never
  sticks. The watchdog's time to catch a storm is a benchmark figure (the demo's goals), not
  asserted here.
"""
from __future__ import annotations

import os

import pytest

from hostagent_support import bcc_missing
from teardown_check import assert_torn_down

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet, namespaces)"),
              pytest.mark.skipif(bcc_missing() is not None, reason=str(bcc_missing()))]


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    from aifabric.experiments.demo_lossless import QUEUE_DEPTH
    from aifabric.experiments.lossless_scenes import FRAME, RATE, Scenes, demo_config
    from aifabric.lab.lab import Lab
    from aifabric.lab.links import LinkPlan, limit_links
    from topologies.fabric import fat_tree

    fabric = fat_tree(4)
    with Lab(fabric, target="softswitch", log_dir=tmp_path_factory.mktemp("lossless"),
             lossless=demo_config()) as lab:
        limit_links(lab, LinkPlan(RATE, queue_depth=QUEUE_DEPTH, frame_bytes=FRAME))
        yield Scenes(lab, RATE, say=lambda line: None)
    assert_torn_down(fabric)


def test_incast_drops_without_pfc_and_pauses_instead_with_it(scenes) -> None:
    off = scenes.incast(False)
    assert off.totals["pause_sent"] == 0, off.totals
    assert off.totals["drops"] > 0, f"8 to 1 at line rate lost nothing without PFC: {off.totals}"
    assert off.figures["lost"] == off.totals["drops"], \
        f"datagrams lost {off.figures['lost']}, drops the switches counted {off.totals['drops']}: {off.totals}"

    on = scenes.incast(True)
    assert on.totals["pause_sent"] > 0 and on.totals["pausing_s"] > 0, on.totals
    assert on.figures["lost"] == 0 and on.totals["drops"] == 0 and on.totals["lossless_drops"] == 0, \
        f"the lossless class lost packets: {on.totals}, flows lost {on.figures['lost']}"
    assert all(f["complete"] and f["delivered_bytes"] == f["bytes"] for f in on.flows), on.flows


def test_a_deadlock_sticks_without_the_watchdog_and_is_broken_by_it(scenes) -> None:
    stuck = scenes.deadlock(True, False)
    assert stuck.figures["stuck"], f"the loop moved or held nothing: {stuck.figures}"
    assert stuck.figures["loop_pausing"] == 2, stuck.figures          # both queues of the loop pause each other
    assert stuck.figures["broken_after_watchdog_on_ms"] is not None and stuck.totals["storms"] > 0, \
        (stuck.figures, stuck.totals)

    guarded = scenes.deadlock(True, True)
    assert not guarded.figures["stuck"] and guarded.figures["loop_queued"] == 0, guarded.figures
    assert guarded.totals["storms"] > 0 and guarded.totals["watchdog_drops"] > 0, guarded.totals
    assert guarded.figures["detected_after_ms"] is not None, guarded.figures


def test_a_training_job_sends_in_the_lossless_class_and_honours_its_pauses(scenes, tmp_path) -> None:
    """`aifabric train --lossless`: a data-parallel job's ranks mark their packets with the RoCE
    class's DSCP (their hosts' eBPF counts them in class 3, only ARP in class 0), run on the host path
    that honours PFC, and send nothing while their class is paused (the eBPF egress count of what
    left during a pause stays 0); the switches carried class 3's packets."""
    from aifabric.experiments.lossless_scenes import CLASS
    from aifabric.experiments.train_runner import run_workload
    from aifabric.workloads import Job, Parallelism, Scale, estimate, fit, generate, place, preset
    lab = scenes.lab
    job = Job(preset("tiny"), Parallelism(dp=8))
    workload = generate(job, fit(estimate(generate(job, Scale(1.0))).step_s, 0.5), place(lab.fabric, job.parallelism))
    hosts = list(workload.placement.hosts)

    def host_counts() -> dict[str, dict]:
        return {h: lab.lossless.hosts.counters(lab.lossless.host_ids[h]) for h in hosts}

    before, switches_before = host_counts(), scenes.snapshot()
    run = run_workload(lab, workload, 2, tmp_path / "plan.json", klass=CLASS)
    after, switches_after = host_counts(), scenes.snapshot()
    assert run.ok, run.errors
    assert all(r["host_paths"] == ["python"] for r in run.reports), [r["host_paths"] for r in run.reports]

    def sent(counts: dict, host: str, klass: int, what: str = "tx") -> int:
        c = counts[host].get(klass)
        return 0 if c is None else getattr(c, what)

    in_class = sum(sent(after, h, CLASS) - sent(before, h, CLASS) for h in hosts)
    in_zero = sum(sent(after, h, 0) - sent(before, h, 0) for h in hosts)
    # class 0 carries only what has no DSCP: ARP, a request and a reply per pair of hosts at most
    assert in_class > 100 and in_zero <= 2 * len(hosts) * (len(hosts) - 1), (in_class, in_zero)
    assert sum(sent(after, h, CLASS, "tx_paused") - sent(before, h, CLASS, "tx_paused") for h in hosts) == 0
    assert switches_after["tx_packets"] - switches_before["tx_packets"] >= in_class, (switches_before, switches_after)
    assert "train" not in lab.lossless.classes.jobs, "the job's class stayed lossless after it"
