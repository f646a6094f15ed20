"""`aifabric bench resilience` without a fabric: each recovery's failure handling at bring-up, the
medians over seeds (a job that failed is a result, counted, never a median), and the table
naming why a recovery has no figure."""
from __future__ import annotations

import argparse

import pytest

from aifabric.experiments.resilience_bench import (RECOVERIES, RESTARTS, add_arguments, job_settings, lab_settings,
                                                   recovery_arg, render, summarise)


def test_each_recovery_brings_the_fabric_up_with_its_own_failure_handling() -> None:
    none, failover, reroute, both, repath, restart, every = (lab_settings(r, "softswitch") for r in RECOVERIES)
    assert none == repath == restart == {}
    assert failover["failover"].link_interval_ms and failover["failover_reroute"] is False
    assert reroute["failover"].link_interval_ms is None and "failover_reroute" not in reroute
    assert both["failover"].link_interval_ms and "failover_reroute" not in both
    assert every["failover"].link_interval_ms and "failover_reroute" not in every


def test_a_recovery_asks_the_job_to_repath_or_restart_and_a_bad_one_is_named() -> None:
    assert job_settings("failover+reroute", 2) == {"repath": False}
    assert job_settings("repath", 2) == {"repath": True}
    assert job_settings("restart+failover", 3) == {"repath": False, "restarts": RESTARTS, "checkpoint_every": 3}
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert p.parse_args(["--recoveries", "none", "reroute+restart"]).recoveries == ["none", "reroute+restart"]
    for bad in ("restart+restart", "failover+none", "spray"):
        with pytest.raises(SystemExit):
            p.parse_args(["--recoveries", bad])
        with pytest.raises(argparse.ArgumentTypeError, match="parts of failover, reroute, repath, restart"):
            recovery_arg(bad)


def _run(recovery, seed, ok, **figures):
    row = {"recovery": recovery, "seed": seed, "ok": ok, "errors": [] if ok else [f"rank 0: PeerSilent ({seed})"]}
    return row | figures


def test_medians_are_over_the_jobs_that_finished_and_failures_are_named() -> None:
    fig = dict(clean_iteration_s=2.0, resent=10, reroutes=1, restarts=0, cpu_busy=0.8)
    runs = [_run("none", 1, False), _run("none", 2, False),
            _run("reroute", 1, True, time_lost_s=1.0, effective_ratio=0.97, **fig),
            _run("reroute", 2, True, time_lost_s=3.0, effective_ratio=0.91, **fig),
            _run("reroute", 3, False)]
    none, reroute = summarise(runs, ["none", "reroute"])
    assert (none["runs"], none["finished"], none["time_lost_s"]) == (2, 0, None)
    assert (reroute["runs"], reroute["finished"]) == (3, 2)
    assert reroute["time_lost_s"] == 2.0 and reroute["effective_ratio"] == 0.94
    args = add_arguments(p := argparse.ArgumentParser()) or p.parse_args([])
    table = render([none, reroute], args, [1, 2, 3])
    assert "rank 0: PeerSilent (1)" in table and "0/2" in table and "2/3" in table
