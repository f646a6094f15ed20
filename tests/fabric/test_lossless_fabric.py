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
