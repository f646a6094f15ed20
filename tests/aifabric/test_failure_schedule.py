"""Failure schedules of ``aifabric train --fail`` without a fabric: the SPEC's parsing and checks
against a fabric, and the placing of events in the ranks' iterations with the time they lost."""
from __future__ import annotations

import time

import pytest

from aifabric.experiments.failure_schedule import (Event, FailureSchedule, PlannedFailure, effective_ratio,
                                                   iteration_spans, locate, random_schedule, time_lost)
from topologies.fabric import fat_tree


def test_specs_parse_into_what_when_and_how_long() -> None:
    f = PlannedFailure.parse("link:c0-p0a0@3+1.5")
    assert (f.kind, f.target, f.at_s, f.duration_s) == ("link", ("c0", "p0a0"), 3.0, 1.5)
    g = PlannedFailure.parse("switch:c1@4s")
    assert (g.kind, g.target, g.at_s, g.duration_s) == ("switch", ("c1",), 4.0, None)
    assert g.describe() == "switch c1 down at 4 s, for good"
    h = PlannedFailure.parse("link:p0e0h0-p0e0@i4+2")
    assert (h.at_s, h.at_iteration, h.duration_s) == (None, 4, 2.0)
    assert h.describe() == "link p0e0h0-p0e0 down at the start of iteration 4, for 2 s"
    r = PlannedFailure.parse("rank:5@i3")
    assert (r.kind, r.target, r.at_iteration, r.duration_s) == ("rank", ("5",), 3, None)
    assert r.describe() == "rank 5 down at the start of iteration 3, for good"


@pytest.mark.parametrize("text, words", [
    ("link:c0-p0a0", "WHAT@WHEN"),
    ("link:c0-p0a0@x3", "WHAT@WHEN"),
    ("port:3@2", "'port' is not one of link, switch, rank, host"),
    ("rank:x@2", "by its number"),
    ("rank:3@2+1", "a lost rank does not come back by itself"),
    ("host:p0e0h0@2+1", "a lost host does not come back by itself"),
    ("link:c0@2", "its two ends"),
    ("link:c0-p0a0@2+0", "above 0 s"),
])
def test_bad_specs_are_named(text, words) -> None:
    with pytest.raises(ValueError, match=words):
        PlannedFailure.parse(text)


@pytest.mark.parametrize("text, words", [
    ("link:c0-x@1", "has no x"),
    ("link:c0-p0e0@1", "no link between c0 and p0e0"),
    ("switch:p0e0h0@1", "is a host, not a switch"),
    ("host:p0e0@1", "is a switch, not a host"),
    ("host:h9@1", "has no h9"),
])
def test_failures_the_fabric_does_not_have_are_named(text, words) -> None:
    with pytest.raises(ValueError, match=words):
        PlannedFailure.parse(text).check(fat_tree(4))


def test_a_rank_the_job_does_not_have_is_named() -> None:
    PlannedFailure.parse("rank:7@1").check(fat_tree(4), world=8)
    with pytest.raises(ValueError, match=r"the job has ranks 0..7"):
        PlannedFailure.parse("rank:8@1").check(fat_tree(4), world=8)


def test_a_host_link_and_a_core_link_are_found_either_way_round() -> None:
    for text in ("link:p0e0h0-p0e0@1", "link:p0e0-p0e0h0@1", "link:p0a0-c0@1"):
        PlannedFailure.parse(text).check(fat_tree(4))


def _reports(steps: list[float], ranks: int = 2, gap: float = 0.1) -> list[dict]:
    """Ranks whose iterations took ``steps`` s, one after the other with ``gap`` s of barrier."""
    t, its = 100.0, []
    for s in steps:
        its.append({"t0": t, "step_s": s})
        t += s + gap
    return [{"iterations": [dict(it, step_s=it["step_s"] - 0.01 * r) for it in its]} for r in range(ranks)]


def test_an_outage_costs_the_iterations_it_overlapped_beyond_the_clean_median() -> None:
    reports = _reports([1.0, 1.0, 3.0, 1.2, 1.0, 1.0])
    spans = iteration_spans(reports)
    assert spans[0] == (100.0, 101.0) and spans[1] == pytest.approx((101.0, 102.1))   # the barrier before it counts
    link = PlannedFailure.parse("link:c0-p0a0@2+2")
    switch = PlannedFailure.parse("switch:c1@9")
    events = [Event(link, True, 102.5), Event(link, False, 105.5), Event(switch, True, 200.0)]
    locate(events, reports)
    assert [e.iteration for e in events] == [2, 3, None]      # the switch failed after the last iteration
    lost = time_lost(events, spans)
    assert lost[link.text]["iterations"] == [2, 3]
    clean = sorted([1.0, 1.1, 1.1, 1.1])
    median = (clean[1] + clean[2]) / 2
    assert lost[link.text]["lost_s"] == pytest.approx((3.1 - median) + (1.3 - median), abs=1e-3)
    assert lost[switch.text]["iterations"] == []
    assert lost[switch.text]["lost_s"] == 0
    wall = spans[-1][1] - spans[0][0]
    assert effective_ratio(lost, spans) == pytest.approx(round(6 * median / wall, 3))


def test_events_of_an_attempt_the_job_restarted_from_are_placed_by_rank_0s_progress() -> None:
    reports = _reports([1.0, 1.0])                 # the last attempt: iterations 3 and 4, from 100 s
    rank = PlannedFailure.parse("rank:1@i3")
    link = PlannedFailure.parse("link:c0-p0a0@i4+1")
    events = [Event(rank, True, 93.5), Event(link, True, 100.5), Event(link, False, 101.5)]
    begun = [(0, 90.0), (1, 91.0), (2, 92.0), (3, 93.0), (2, 98.0)]
    locate(events, reports, first=3, begun=begun)
    assert [e.iteration for e in events] == [3, 3, 4]


def test_a_failure_that_could_not_be_made_costs_nothing() -> None:
    reports = _reports([1.0, 2.0, 1.0])
    f = PlannedFailure.parse("switch:c1@1")
    events = [Event(f, True, 101.5, error="switch c1 is not running")]
    locate(events, reports)
    assert time_lost(events, iteration_spans(reports)) == {}


def test_a_random_schedule_is_the_seeds_and_fails_links_between_switches() -> None:
    fabric = fat_tree(4)
    one = random_schedule(fabric, seed=3, mtbf_s=5, horizon_s=30, outage_s=2)
    assert one == random_schedule(fabric, seed=3, mtbf_s=5, horizon_s=30, outage_s=2)
    assert one != random_schedule(fabric, seed=4, mtbf_s=5, horizon_s=30, outage_s=2)
    hosts = {h.name for h in fabric.hosts}
    for f in one:
        f.check(fabric)
        assert f.kind == "link" and not hosts & set(f.target) and f.duration_s == 2 and 0 <= f.at_s < 30
    assert [f.at_s for f in one] == sorted(f.at_s for f in one)
    assert len(one) >= 1
    rare = random_schedule(fabric, seed=1, mtbf_s=1e6, horizon_s=10)
    assert len(rare) == 1 and rare[0].duration_s is None and rare[0].at_s < 10
    with pytest.raises(ValueError, match="above 0 s"):
        random_schedule(fabric, seed=1, mtbf_s=0, horizon_s=10)


def test_a_random_schedule_kills_ranks_beside_the_same_links() -> None:
    fabric = fat_tree(4)
    links = random_schedule(fabric, seed=2, mtbf_s=5, horizon_s=20, outage_s=1)
    both = random_schedule(fabric, seed=2, mtbf_s=5, horizon_s=20, outage_s=1, ranks=2, world=8)
    assert both[:len(links)] == links
    killed = both[len(links):]
    assert [f.kind for f in killed] == ["rank", "rank"]
    assert all(0 <= int(f.target[0]) < 8 and 0 <= f.at_s <= 20 and f.duration_s is None for f in killed)
    with pytest.raises(ValueError, match="world size"):
        random_schedule(fabric, seed=2, mtbf_s=5, horizon_s=20, ranks=1)


def test_a_random_schedule_loses_hosts_of_the_job_and_may_fail_no_link() -> None:
    fabric = fat_tree(4)
    job = ["p0e0h0", "p0e0h1", "p0e1h0", "p0e1h1"]
    ranks = random_schedule(fabric, seed=2, mtbf_s=None, horizon_s=20, ranks=1, world=4)
    assert [f.kind for f in ranks] == ["rank"]                          # no link at all
    lost = random_schedule(fabric, seed=2, mtbf_s=None, horizon_s=20, ranks=1, world=4, hosts=2, job_hosts=job)
    assert lost[:1] == ranks and [f.kind for f in lost[1:]] == ["host", "host"]
    assert len({f.target[0] for f in lost[1:]}) == 2 and all(f.target[0] in job and 0 <= f.at_s <= 20 and
                                                             f.duration_s is None for f in lost[1:])
    assert lost != random_schedule(fabric, seed=3, mtbf_s=None, horizon_s=20, ranks=1, world=4, hosts=2, job_hosts=job)
    with pytest.raises(ValueError, match="5 host failures need as many hosts of the job"):
        random_schedule(fabric, seed=2, mtbf_s=None, horizon_s=20, hosts=5, job_hosts=job)


def test_train_draws_a_random_schedule_with_its_seed_and_names_a_bad_one() -> None:
    from aifabric.cli import build_parser, train_cli
    train = ["train", "--preset", "tiny", "--dp", "2", "--fail", "random:5@30+2", "--fail", "link:c0-p0a0@i1"]
    args = build_parser().parse_args(train + ["--seed", "3"])
    train_cli.prepare(args)
    drawn = random_schedule(fat_tree(4), seed=3, mtbf_s=5, horizon_s=30, outage_s=2)
    assert args.fail == drawn + [PlannedFailure.parse("link:c0-p0a0@i1")]
    other = build_parser().parse_args(train + ["--seed", "4"])
    train_cli.prepare(other)
    assert other.fail[:-1] != drawn
    for bad, words in (("random:5", "random:MTBF@HORIZON"), ("random:0@30", "above 0 s"),
                       ("random:5@30+0", "above 0 s")):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["train", "--fail", bad])
        with pytest.raises(ValueError, match=words):
            from aifabric.experiments.failure_schedule import parse_failure
            parse_failure(bad)


@pytest.mark.parametrize("flags, words", [
    (["--dp", "16"], r"1 lost host\(s\) need as many spares beside the 16 ranks' hosts; .* has 16 hosts"),
    (["--dp", "15", "--collectives", "in_network"], r"16 hosts"),
    (["--dp", "8", "--lb", "plb"], r"not with --lb plb"),
    (["--dp", "8", "--lossless"], r"not with .* --lossless"),
])
def test_train_refuses_a_lost_host_it_could_not_replace(flags, words) -> None:
    from aifabric.cli import build_parser, train_cli
    train = ["train", "--preset", "tiny", "--fail", "host:p0e0h0@i2", "--restarts", "1"]
    train_cli.prepare(build_parser().parse_args(train + ["--dp", "8"]))         # a spare is there
    with pytest.raises(ValueError, match=words):
        train_cli.prepare(build_parser().parse_args(train + flags))


class _SlowLinks:
    """A lab's `Failures` whose links take their time to go down, as on a busy machine."""

    def __init__(self) -> None:
        from types import SimpleNamespace
        self.lab = SimpleNamespace(fabric=fat_tree(4))
        self.downed: list[tuple[str, str]] = []

    def fail_link(self, a: str, b: str) -> None:
        time.sleep(0.3)
        self.downed.append((a, b))


def test_a_lost_host_is_known_lost_when_its_ranks_die() -> None:
    """The end of a lost host's ranks starts the launcher's restart, which asks which hosts were
    lost to place the ranks elsewhere: the host must be known lost by then, not only once its
    links are down, or the job restarts on it."""
    import subprocess
    failures = _SlowLinks()
    ranks = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    schedule = FailureSchedule(failures, [PlannedFailure.parse("host:p0e0h1@0")], ranks=ranks,
                               hosts=["p0e0h0", "p0e0h1"])
    try:
        schedule.start()
        ranks[1].wait(timeout=10)
        lost_when_it_died = schedule.lost_hosts()
        other_rank_lives = ranks[0].poll() is None
        schedule.stop()
    finally:
        for proc in ranks:
            proc.kill()
            proc.wait()
    assert lost_when_it_died == {"p0e0h1"} and other_rank_lives
    assert failures.downed == [("p0e0h1", "p0e0")] and [e.error for e in schedule.events] == [None]
