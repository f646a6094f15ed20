"""Failures on a running job's fabric at chosen times (``aifabric train --fail SPEC``), each one
logged beside the iteration it hit and what that iteration lost.

A SPEC is ``WHAT@WHEN[+DURATION]``: WHAT fails at WHEN, SECONDS after the first iteration begins or ``iN``
as iteration N begins (rank 0 past its barrier), and comes back DURATION seconds later (without
``+DURATION``: for the rest of the job).

    link:A-B      the link between A and B down (two switches, or a host and its edge switch)
    switch:NAME   switch NAME's target process killed (restored: started again and reconciled)
    rank:N        rank N's process killed, for good (no DURATION): the job goes on only where it
                  restarts from its checkpoint (``aifabric train --restarts``)
    host:NAME     host NAME lost, for good: its ranks' processes killed and its links down; a
                  restart moves its ranks to a spare host (`job_restarts.replace_lost`)

    random:MTBF@HORIZON     links between switches failing at exponential gaps of mean MTBF s
                            within the first HORIZON s, drawn with the run's seed (`random_schedule`)

    link:c0-p0a0@3          a core link down 3 s in, for good
    link:p0e0h0-p0e0@i4+2   rank 0's host link down as iteration 4 begins, for 2 s
    link:p1a0-p1e0@2+1.5    an aggregation link down 2 s in, up again 1.5 s later
    switch:c1@4+3           a core switch killed 4 s in, back 3 s later
    rank:5@i3               rank 5 killed as iteration 3 begins
    host:p1e0h1@i3          the host p1e0h1 lost as iteration 3 begins
    random:5@20+1           a link failure every 5 s on average in the first 20 s, each for 1 s

Links and switches fail through `aifabric.lab.failures.Failures` (interfaces down at both ends, the
process killed), so the fabric finds them as it would a real one: the lab runs failure handling
(heartbeats, data-plane failover, reroute) whenever a schedule is given.
"""
from __future__ import annotations

import random
import re
import signal
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from aifabric.lab.failures import FailureError, Failures
from hostagent.workload_runner import progress as ranks_progress

KINDS = ("link", "switch", "rank", "host")
FOR_GOOD = ("rank", "host")     # failures that do not come back by themselves: a restart recovers them
PROGRESS_POLL_S = 0.01     # how often a failure at an iteration looks at the ranks' progress
_RANDOM = re.compile(r"^random:(?P<mtbf>[0-9.]+)s?@(?P<horizon>[0-9.]+)s?(?:\+(?P<outage>[0-9.]+)s?)?$")
_SPEC = re.compile(r"^(?P<kind>[a-z]+):(?P<what>[^@]+)@(?:i(?P<iteration>[0-9]+)|(?P<at>[0-9.]+)s?)"
                   r"(?:\+(?P<duration>[0-9.]+)s?)?$")


@dataclass(frozen=True)
class PlannedFailure:
    kind: str                      # one of KINDS
    target: tuple[str, ...]        # (a, b) for a link, (name,) for a switch, (number,) for a rank
    at_s: float | None             # after the first iteration begins (None: at_iteration)
    duration_s: float | None       # None: for good
    text: str                      # the SPEC as given
    at_iteration: int | None = None   # as that iteration begins (rank 0 past its barrier)

    @classmethod
    def parse(cls, text: str) -> "PlannedFailure":
        """ValueError naming what is wrong with ``text`` (see the module doc for the form)."""
        m = _SPEC.match(text.strip())
        if m is None:
            raise ValueError(f"--fail {text!r}: WHAT@WHEN[+DURATION], WHAT one of link:A-B, switch:NAME, rank:N, "
                             f"host:NAME, WHEN "
                             f"seconds or iN, iteration N (e.g. link:c0-p0a0@3, switch:c1@i4+3); or "
                             f"random:MTBF@HORIZON[+DURATION] (e.g. random:5@20+1)")
        kind, what = m["kind"], m["what"]
        if kind not in KINDS:
            raise ValueError(f"--fail {text!r}: {kind!r} is not one of {', '.join(KINDS)}")
        target = tuple(what.split("-")) if kind == "link" else (what,)
        if kind == "link" and (len(target) != 2 or not all(target)):
            raise ValueError(f"--fail {text!r}: a link is named by its two ends, A-B")
        try:
            at = float(m["at"]) if m["at"] is not None else None
            duration = float(m["duration"]) if m["duration"] else None
        except ValueError:
            raise ValueError(f"--fail {text!r}: SECONDS and DURATION are numbers") from None
        if duration is not None and duration <= 0:
            raise ValueError(f"--fail {text!r}: a duration must be above 0 s")
        if kind == "rank" and not what.isdigit():
            raise ValueError(f"--fail {text!r}: a rank is named by its number, rank:N")
        if kind in FOR_GOOD and duration is not None:
            raise ValueError(f"--fail {text!r}: a lost {kind} does not come back by itself (no +DURATION); the job "
                             f"restarts from its checkpoint (--restarts)")
        iteration = int(m["iteration"]) if m["iteration"] is not None else None
        return cls(kind, target, at, duration, text, iteration)

    def check(self, fabric, world: int | None = None) -> None:
        """ValueError unless the fabric (and a job of ``world`` ranks, where given) has what this
        failure names."""
        if self.kind == "rank":
            if world is not None and int(self.target[0]) >= world:
                raise ValueError(f"--fail {self.text!r}: the job has ranks 0..{world - 1}")
            return
        names = {s.name for s in fabric.switches} | {h.name for h in fabric.hosts}
        unknown = [n for n in self.target if n not in names]
        if unknown:
            raise ValueError(f"--fail {self.text!r}: {fabric.describe()} has no {', '.join(unknown)}")
        if self.kind == "switch" and self.target[0] not in {s.name for s in fabric.switches}:
            raise ValueError(f"--fail {self.text!r}: {self.target[0]} is a host, not a switch")
        if self.kind == "host" and self.target[0] not in {h.name for h in fabric.hosts}:
            raise ValueError(f"--fail {self.text!r}: {self.target[0]} is a switch, not a host")
        if self.kind == "link" and not _linked(fabric, *self.target):
            raise ValueError(f"--fail {self.text!r}: no link between {self.target[0]} and {self.target[1]}")

    def describe(self) -> str:
        what = f"link {'-'.join(self.target)}" if self.kind == "link" else f"{self.kind} {self.target[0]}"
        span = f"for {self.duration_s:g} s" if self.duration_s is not None else "for good"
        when = f"{self.at_s:g} s" if self.at_s is not None else f"the start of iteration {self.at_iteration}"
        return f"{what} down at {when}, {span}"


@dataclass(frozen=True)
class RandomFailures:
    """``random:MTBF@HORIZON[+OUTAGE]``: a seeded schedule of link failures (`random_schedule`),
    drawn once the fabric and the seed are known (`planned`)."""
    mtbf_s: float
    horizon_s: float
    outage_s: float | None
    text: str

    @classmethod
    def parse(cls, text: str) -> "RandomFailures | None":
        """None where ``text`` is no random schedule; ValueError where it is one, badly written."""
        if not text.strip().startswith("random:"):
            return None
        m = _RANDOM.match(text.strip())
        try:
            mtbf, horizon = float(m["mtbf"]), float(m["horizon"])
            outage = float(m["outage"]) if m["outage"] else None
        except (TypeError, ValueError):
            raise ValueError(f"--fail {text!r}: random:MTBF@HORIZON[+DURATION], seconds each "
                             f"(e.g. random:5@20+1)") from None
        if mtbf <= 0 or horizon <= 0 or (outage is not None and outage <= 0):
            raise ValueError(f"--fail {text!r}: MTBF, HORIZON and DURATION must be above 0 s")
        return cls(mtbf, horizon, outage, text)

    def planned(self, fabric, seed: int) -> list[PlannedFailure]:
        return random_schedule(fabric, seed, self.mtbf_s, self.horizon_s, self.outage_s)


def parse_failure(text: str) -> "PlannedFailure | RandomFailures":
    """A ``--fail`` SPEC: one failure, or a random schedule of them; ValueError naming what is wrong."""
    return RandomFailures.parse(text) or PlannedFailure.parse(text)


def planned_failures(specs, fabric, seed: int, world: int | None = None) -> list[PlannedFailure]:
    """``specs`` (`parse_failure`'s) as the failures they plan on ``fabric``, random schedules
    drawn with ``seed``, each checked against the fabric and a job of ``world`` ranks (ValueError
    naming a missing part)."""
    out: list[PlannedFailure] = []
    for spec in specs:
        out += spec.planned(fabric, seed) if isinstance(spec, RandomFailures) else [spec]
    for failure in out:
        failure.check(fabric, world)
    return out


def random_schedule(fabric, seed: int, mtbf_s: float | None, horizon_s: float,
                    outage_s: float | None = None, ranks: int = 0, world: int = 0,
                    hosts: int = 0, job_hosts: Sequence[str] = ()) -> list[PlannedFailure]:
    """Link failures between switches (every one has another way round in the fabrics here) at
    exponential gaps of mean ``mtbf_s`` within ``horizon_s`` s (None: no link fails), each for
    ``outage_s`` s (None: for good), links drawn uniformly; the same seed gives the same
    schedule. At least one link fails: where the first gap passes the horizon, one failure falls
    at a uniform time within it. Then ``ranks`` of a job's ``world`` killed, then ``hosts`` of
    its ``job_hosts`` lost, at uniform times within the horizon (each drawn after the ones
    before, so those are the same with or without them)."""
    if (mtbf_s is not None and mtbf_s <= 0) or horizon_s <= 0:
        raise ValueError(f"a random schedule needs a mean time between failures and a horizon above 0 s "
                         f"(got {mtbf_s} and {horizon_s:g})")
    rng = random.Random(seed)
    links = sorted((ln.a, ln.b) for ln in fabric.switch_links())
    times: list[float] = []
    if mtbf_s is not None:
        t = rng.expovariate(1 / mtbf_s)
        while t < horizon_s:
            times.append(t)
            t += rng.expovariate(1 / mtbf_s)
        times = times or [rng.uniform(0, horizon_s)]
    out = []
    for at in times:
        a, b = rng.choice(links)
        spec = f"link:{a}-{b}@{at:.2f}" + (f"+{outage_s:g}" if outage_s else "")
        out.append(PlannedFailure.parse(spec))
    if ranks and world < 1:
        raise ValueError(f"{ranks} rank failures need the job's world size")
    for _ in range(ranks):
        rank, at = rng.randrange(world), rng.uniform(0, horizon_s)
        out.append(PlannedFailure.parse(f"rank:{rank}@{at:.2f}"))
    candidates = sorted(set(job_hosts))
    if hosts > len(candidates):
        raise ValueError(f"{hosts} host failures need as many hosts of the job (got {len(candidates)})")
    for name in rng.sample(candidates, hosts):
        out.append(PlannedFailure.parse(f"host:{name}@{rng.uniform(0, horizon_s):.2f}"))
    return out


def _linked(fabric, a: str, b: str) -> bool:
    for name, other in ((a, b), (b, a)):
        if any(s.name == name for s in fabric.switches) and other in fabric.ports_of(name).values():
            return True
    return False


@dataclass
class Event:
    """What happened: a failure (``down``) or its end (``up``), when (monotonic), and where the
    job was then (``iteration``: its index; None: between iterations or after the last)."""
    failure: PlannedFailure
    down: bool
    at: float
    error: str | None = None
    iteration: int | None = None

    def to_dict(self, t0: float) -> dict:
        return {"failure": self.failure.text, "what": "down" if self.down else "up",
                "at_s": round(self.at - t0, 3), "iteration": self.iteration, "error": self.error}


@dataclass
class FailureSchedule:
    """Fires ``planned`` on ``failures``' lab from `start` on, a thread per failure; `stop` ends
    them (what is still due is not fired; the lab's teardown takes what is still down).
    ``progress``: the file rank 0 notes each iteration in as it begins
    (hostagent.workload_runner.progress), for failures at an iteration. ``ranks`` and ``hosts``:
    the job's rank processes now and their hosts, by rank (its launcher sets them at each start),
    for a rank's or a host's failure."""
    failures: Failures
    planned: list[PlannedFailure]
    progress: Path | None = None
    events: list[Event] = field(default_factory=list)
    ranks: list = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    _lost: set[str] = field(default_factory=set)      # hosts lost so far
    t0: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _first_iteration_at: float | None = None    # when the first iteration was seen begun: the seconds' base

    @property
    def needs_progress(self) -> bool:
        return any(f.at_iteration is not None for f in self.planned)

    def start(self, t0: float | None = None) -> "FailureSchedule":
        if self.needs_progress and self.progress is None:
            raise ValueError("a failure at an iteration needs the ranks' progress file")
        self.t0 = time.monotonic() if t0 is None else t0
        for f in self.planned:
            self._threads.append(threading.Thread(target=self._run, args=(f,), name=f"fail {f.text}", daemon=True))
            self._threads[-1].start()
        return self

    def _run(self, f: PlannedFailure) -> None:
        if not self._wait_for(f):
            return
        down = self._fire(f, True)
        if down.error is None and f.duration_s is not None:
            # back its duration after it was made, so an outage lasts that long however late it began
            if not self._stop.wait(max(0.0, down.at + f.duration_s - time.monotonic())):
                self._fire(f, False)

    def _wait_for(self, f: PlannedFailure) -> bool:
        """Until ``f`` is due; False: stopped first. Seconds count from the first iteration's
        start where the ranks' progress is known (their start-up is no part of the job), else
        from `start`'s t0."""
        if not self._wait_iteration(f.at_iteration if f.at_iteration is not None else 0):
            return False
        if f.at_iteration is not None:
            return True
        with self._lock:
            if self.progress is not None and self._first_iteration_at is None:
                self._first_iteration_at = time.monotonic()
                self.t0 = self._first_iteration_at
        return not self._stop.wait(max(0.0, self.t0 + f.at_s - time.monotonic()))

    def _wait_iteration(self, n: int) -> bool:
        """Until iteration ``n`` has begun (at once without a progress file); False: stopped first."""
        while self.progress is not None and not self._stop.is_set():
            if self._iterations_begun() > n:
                return True
            self._stop.wait(PROGRESS_POLL_S)
        return not self._stop.is_set()

    def _iterations_begun(self) -> int:
        return ranks_progress.iterations_begun(self.progress)

    def _fire(self, f: PlannedFailure, down: bool) -> Event:
        event = Event(f, down, time.monotonic())
        try:
            if f.kind == "link":
                (self.failures.fail_link if down else self.failures.restore_link)(*f.target)
            elif f.kind == "rank":
                self._kill_rank(int(f.target[0]))
            elif f.kind == "host":
                self._lose_host(f.target[0])
            else:
                (self.failures.fail_switch if down else self.failures.restore_switch)(f.target[0])
        except (FailureError, OSError, RuntimeError) as err:
            event.error = str(err)
        with self._lock:
            self.events.append(event)
        return event

    def _kill_rank(self, rank: int) -> None:
        with self._lock:
            procs = list(self.ranks)
        if rank >= len(procs) or procs[rank].poll() is not None:
            raise RuntimeError(f"rank {rank} is not running")
        procs[rank].send_signal(signal.SIGKILL)

    def _lose_host(self, name: str) -> None:
        """Its ranks killed first (a host that dies takes its processes with it), then its links down."""
        with self._lock:       # lost before its ranks die: the launcher's restart, which their end starts, asks
            self._lost.add(name)
            on_it = [p for p, h in zip(self.ranks, self.hosts) if h == name]
        for proc in on_it:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for nic in self.failures.lab.fabric.host(name).nics():
            self.failures.fail_link(name, nic.switch)

    def lost_hosts(self) -> set[str]:
        """The hosts lost so far (marked as their failure fires, before their ranks are killed)."""
        with self._lock:
            return set(self._lost)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)
        self.events.sort(key=lambda e: e.at)

    def missed(self) -> list[PlannedFailure]:
        """Failures planned for after the job ended (never fired)."""
        fired = {id(e.failure) for e in self.events if e.down}
        return [f for f in self.planned if id(f) not in fired]


def iteration_spans(reports: list[dict]) -> list[tuple[float, float]]:
    """Each iteration's span, monotonic: from the end of the one before (its barrier included;
    the first: the first rank's start) to its last rank's end, from the ranks' reports."""
    spans: list[tuple[float, float]] = []
    per_rank = [r["iterations"] for r in reports if r and r.get("iterations")]
    for i in range(min((len(its) for its in per_rank), default=0)):
        end = max(its[i]["t0"] + its[i]["step_s"] for its in per_rank)
        start = spans[-1][1] if spans else min(its[i]["t0"] for its in per_rank)
        spans.append((start, end))
    return spans


def locate(events: list[Event], reports: list[dict], first: int = 0,
           begun: list[tuple[int, float]] = ()) -> list[tuple[float, float]]:
    """Sets each event's iteration (the one running when it happened; ``first``: the number of
    the reports' first iteration) and returns the reports' spans. An event before them (an
    attempt the job restarted from) is placed by ``begun``, rank 0's progress entries."""
    spans = iteration_spans(reports)
    for e in events:
        i = next((i for i, (a, b) in enumerate(spans) if a <= e.at <= b), None)
        if i is not None:
            e.iteration = first + i
        elif spans and e.at < spans[0][0]:
            e.iteration = max(((t, n) for n, t in begun if t <= e.at), default=(0, None))[1]
        else:
            e.iteration = None
    return spans


def outages(events: list[Event]) -> dict[str, tuple[float, float | None]]:
    """Each fired failure (its SPEC) -> (down, up) times; up None: down for the rest of the job."""
    out: dict[str, tuple[float, float | None]] = {}
    for e in events:
        if e.error is not None:
            continue
        if e.down:
            out[e.failure.text] = (e.at, None)
        elif e.failure.text in out:
            out[e.failure.text] = (out[e.failure.text][0], e.at)
    return out


def time_lost(events: list[Event], spans: list[tuple[float, float]]) -> dict[str, dict]:
    """Per fired failure: the iterations its outage overlapped (down to up; for good: the one it
    began in) and the time they took beyond the median of the iterations no outage overlapped
    (``lost_s`` None where every iteration was overlapped)."""
    hit: dict[str, list[int]] = {}
    for text, (down, up) in outages(events).items():
        end = down if up is None else up
        hit[text] = [i for i, (a, b) in enumerate(spans) if a <= end and down <= b]
    overlapped = {i for its in hit.values() for i in its}
    clean = [b - a for i, (a, b) in enumerate(spans) if i not in overlapped]
    median = statistics.median(clean) if clean else None
    return {text: {"iterations": its, "clean_median_s": None if median is None else round(median, 3),
                   "lost_s": None if median is None else round(sum(spans[i][1] - spans[i][0] - median for i in its), 3)}
            for text, its in hit.items()}


def clean_median(costs: dict[str, dict], spans: list[tuple[float, float]]) -> float | None:
    """The median time of the iterations no outage in `time_lost`'s ``costs`` overlapped (None: none)."""
    overlapped = {i for c in costs.values() for i in c["iterations"]}
    clean = [b - a for i, (a, b) in enumerate(spans) if i not in overlapped]
    return statistics.median(clean) if clean else None


def effective_ratio(costs: dict[str, dict], spans: list[tuple[float, float]], kept_s: float = 0.0,
                    began: float | None = None) -> float | None:
    """The effective training time ratio of the run, from `time_lost`'s ``costs``: what its
    iterations would have taken at the median of those no outage overlapped, over what they took
    (None: no clean iteration). A job restarted from a checkpoint: ``spans`` are its last
    attempt's, ``kept_s`` what the iterations its earlier attempts kept (not redone) were worth
    at their own attempt's pace (`job_restarts.kept_seconds`; an attempt on a spare host may run
    at another pace), and ``began`` when its first iteration began."""
    clean = clean_median(costs, spans)
    if clean is None:
        return None
    return round((kept_s + len(spans) * clean) / (spans[-1][1] - (spans[0][0] if began is None else began)), 3)
