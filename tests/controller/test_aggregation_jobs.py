"""`JobManager` on a `FabricController` that writes to no switch (test_lb_aggregation_metrics'
OfflineController): what a job asks of the slot pool for its frame size, the ``agg_jobs`` entries
it puts on its tree's switches, and the requests it refuses."""
from __future__ import annotations

import re
from typing import Iterable

import pytest
from test_lb_aggregation_metrics import OfflineController

from controller.aggregation import JobError, JobManager
from controller.aggregation.entries import AGG_JOBS, AGGREGATE_CHILD, AGGREGATE_ROOT
from controller.p4info import decode
from topologies.fabric import fat_tree

WORKERS = ["p0e0h0", "p0e1h0", "p1e0h1"]     # two pods: edges, aggregation switches and a core


@pytest.fixture
def manager() -> Iterable[JobManager]:
    controller = OfflineController(fat_tree(4))
    yield JobManager(controller)
    controller.close()


def job_entries(manager: JobManager, job_id: int) -> dict[str, tuple[str, dict[str, int]]]:
    """switch -> (action, params by name) of the job's agg_jobs entry, on every switch that has one."""
    p4info = manager.controller.pipeline.p4info
    found = {}
    for sw in manager.controller.fabric.switches:
        for e in manager.entities(sw.name):
            t = e.table_entry
            if e.HasField("table_entry") and t.table_id == p4info.table_id(AGG_JOBS) \
                    and decode(t.match[0].exact.value) == job_id:
                action = p4info.name_of(t.action.action.action_id)
                names = {p.id: p.name for p in p4info.action_info(action).params}
                found[sw.name] = (action, {names[p.param_id]: decode(p.value) for p in t.action.action.params})
    return found


@pytest.mark.parametrize("frame_values", [64, 128, 192, 256, 320])
def test_a_job_takes_a_pool_slot_per_block_of_its_frames_and_installs_its_size(manager, frame_values):
    job = manager.start(WORKERS, "p3e1h1", slots=8, frame_values=frame_values)
    blocks = frame_values // 64
    assert (job.frame_values, job.pool_slots, job.slot_base) == (frame_values, 8 * blocks, 0)
    assert manager.pool.free_slots == 1024 - 8 * blocks
    assert all(job.worker_config(w)["frame_values"] == frame_values for w in WORKERS)
    entries = job_entries(manager, job.job_id)
    assert set(entries) == set(job.tree.nodes) and len(entries) == 6      # 3 edges, 2 aggregation, a core
    for sw, (action, params) in entries.items():
        node = job.tree.nodes[sw]
        assert action == (AGGREGATE_ROOT if node.is_root else AGGREGATE_CHILD)
        assert {k: params[k] for k in ("slot_base", "slot_count", "frame_values", "fan_in")} == \
            {"slot_base": 0, "slot_count": 8, "frame_values": frame_values, "fan_in": node.fan_in}
    other = manager.start(["p2e0h0", "p2e1h1"], "p3e1h1", slots=4, frame_values=320)
    assert other.slot_base == 8 * blocks                          # ranges of pool slots never overlap
    assert {p["frame_values"] for _, p in job_entries(manager, other.job_id).values()} == {320}
    manager.end(job)
    manager.end(other)
    assert manager.pool.free_slots == 1024


def test_the_default_frame_is_switchmls_64_values(manager):
    job = manager.start(WORKERS[:2], "p3e1h1")
    assert (job.frame_values, job.slots, job.pool_slots) == (64, 32, 32)
    assert job.worker_config("p0e0h0")["frame_values"] == 64


def test_frame_values_and_windows_the_pool_cannot_hold_are_refused_naming_them(manager):
    for bad in (0, 32, 100, 384, 64.0, True):
        with pytest.raises(JobError, match=re.escape(f"frame_values={bad!r}: must be a multiple of 64 in 64..320")):
            manager.start(WORKERS, "p3e1h1", frame_values=bad)
    with pytest.raises(JobError, match=re.escape("slots=205: must be in 1..204 (1024 pool slots, 5 a 320-value frame)")):
        manager.start(WORKERS, "p3e1h1", slots=205, frame_values=320)
    assert manager.start(WORKERS, "p3e1h1", slots=204, frame_values=320).pool_slots == 1020
    assert len(manager.jobs) == 1
