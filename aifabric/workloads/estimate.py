"""An analytic estimate of one iteration: every rank's ops timed from their sizes.

Compute takes its ``seconds``. A collective starts when every member is ready (its deps done
and its stream free on that rank) and lasts what `aifabric.workloads.latency` says it costs:
with the link-bound costs (no latency, the default) ``bytes * BUSBW_FACTOR[kind](n) / link rate``
(an ideal ring or pairwise exchange at the link's full rate, nccl-tests' bus bandwidth); with a
calibration's `Costs`, its steps' messages with their latency and framing (the alpha-beta model),
the members ``hops`` apart. A send starts when the sender is ready and lasts one message; its
receive lasts from when the receiver posts it until the transfer's end (nothing, if the data came
before), as a rank measures the time it spends blocked in recv. Streams run side by side as if each had the link to itself: contention between
streams, and between ranks sharing fabric links, is left out, which is what the measurement on
the fabric adds. With ``in_network`` the data-parallel all-reduces are summed in the switches:
each rank's link carries its gradients up once and the sum down once (factor 1 instead of the
ring's 2(n-1)/n).

The result per rank: step time (its last op's end), compute, communication per collective kind
(time the ops take, overlapped or not) and exposed communication (step - compute: time the
compute stream is not busy, waiting for communication or for other stages).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from aifabric.workloads.errors import WorkloadError
from aifabric.workloads.generator import Workload
from aifabric.workloads.latency import Costs, collective_seconds
from aifabric.workloads.ops import Kind, Op, Stream

Hops = Callable[[tuple[int, ...]], int]
"""The most switch hops between two of a group's ranks."""


@dataclass(frozen=True)
class RankEstimate:
    rank: int
    step_s: float
    compute_s: float
    comm_s_by_kind: dict[str, float] = field(default_factory=dict)

    @property
    def exposed_comm_s(self) -> float:
        return self.step_s - self.compute_s


@dataclass(frozen=True)
class Estimate:
    ranks: tuple[RankEstimate, ...]
    link_bytes_per_s: float
    emulated: bool
    start_s: tuple[tuple[float, ...], ...]      # per rank, per op
    end_s: tuple[tuple[float, ...], ...]

    @property
    def step_s(self) -> float:
        return max(r.step_s for r in self.ranks)

    @property
    def slowest(self) -> RankEstimate:
        return max(self.ranks, key=lambda r: r.step_s)

    def to_dict(self) -> dict:
        return {"step_s": self.step_s, "emulated": self.emulated, "link_bytes_per_s": self.link_bytes_per_s,
                "ranks": [{"rank": r.rank, "step_s": r.step_s, "compute_s": r.compute_s,
                           "exposed_comm_s": r.exposed_comm_s, "comm_s_by_kind": r.comm_s_by_kind}
                          for r in self.ranks]}


def estimate(workload: Workload, emulated: bool = False, in_network: bool = False, costs: Costs | None = None,
             hops: Hops | None = None) -> Estimate:
    """Real-scale figures on the real link rate, or (``emulated``) the scaled ones on the emulated
    links; ``in_network``: the data-parallel all-reduces summed in the switches. ``costs``: the
    latency-aware model's constants (None: link-bound), ``hops`` the switch hops within a group
    (None: 0)."""
    rate = workload.scale.emulated_bytes_per_s if emulated else workload.scale.real_bytes_per_s
    costs = costs or Costs.link_bound(rate)
    return _Timeline(workload, costs, emulated, in_network, hops or (lambda group: 0)).run()


def in_switches(op: Op) -> bool:
    """An op the switches sum when the run is in-network: a data-parallel all-reduce."""
    return op.kind is Kind.ALL_REDUCE and op.stream is Stream.DP


class _Timeline:
    def __init__(self, workload: Workload, costs: Costs, emulated: bool, in_network: bool, hops: Hops) -> None:
        self.w, self.costs, self.emulated, self.in_network, self.hops = workload, costs, emulated, in_network, hops
        self.rate = costs.link_bytes_per_s
        n = len(workload.ranks)
        self.start: list[list[float | None]] = [[None] * len(ops) for ops in workload.ranks]
        self.end: list[list[float | None]] = [[None] * len(ops) for ops in workload.ranks]
        self.stream_free: list[dict[str, float]] = [defaultdict(float) for _ in range(n)]
        self.next = [0] * n
        self.waiting: dict[str, dict[int, tuple[Op, float]]] = defaultdict(dict)     # key -> rank -> (op, ready)
        self.sends: dict[str, tuple[float, float]] = {}                              # key -> (start, end)

    def _size(self, op: Op) -> float:
        return op.emulated_bytes if self.emulated else op.bytes

    def _duration(self, op: Op) -> float:
        if op.is_compute:
            return op.emulated_seconds if self.emulated else op.seconds
        hops = self.hops(op.group)
        return collective_seconds(self.costs, op.kind, self._size(op), len(op.group), hops,
                                  self.in_network and in_switches(op), root_hops=(hops + 1) // 2)

    def _ready(self, op: Op) -> float:
        deps = [self.end[op.rank][d] for d in op.deps]
        return max([self.stream_free[op.rank][op.stream.value], *deps])

    def _finish(self, op: Op, start: float, end: float) -> None:
        self.start[op.rank][op.id], self.end[op.rank][op.id] = start, end
        self.stream_free[op.rank][op.stream.value] = end

    def _try(self, op: Op) -> bool:
        """Time ``op`` if it can be timed now; False while it waits for other ranks."""
        ready = self._ready(op)
        if op.is_compute:
            self._finish(op, ready, ready + self._duration(op))
        elif op.kind is Kind.SEND:
            self._finish(op, ready, ready + self._duration(op))
            self.sends[op.key] = (ready, ready + self._duration(op))
        elif op.kind is Kind.RECV:
            if op.key not in self.sends:
                return False
            _, send_end = self.sends[op.key]
            self._finish(op, ready, max(ready, send_end))     # blocked in recv from when it is posted
        else:
            members = self.waiting[op.key]
            members[op.rank] = (op, ready)
            if len(members) < len(op.group):
                return False
            start = max(r for _, r in members.values())
            for member, _ in members.values():
                self._finish(member, start, start + self._duration(member))
                self.next[member.rank] = member.id + 1
            del self.waiting[op.key]
            return True
        self.next[op.rank] = op.id + 1
        return True

    def run(self) -> Estimate:
        ranks = self.w.ranks
        while True:
            progressed = False
            for r, ops in enumerate(ranks):
                while self.next[r] < len(ops) and self.end[r][self.next[r]] is None:
                    if not self._try(ops[self.next[r]]):
                        break
                    progressed = True
                while self.next[r] < len(ops) and self.end[r][self.next[r]] is not None:
                    self.next[r] += 1
            if all(self.next[r] == len(ops) for r, ops in enumerate(ranks)):
                break
            if not progressed:
                stuck = {r: ops[self.next[r]].key for r, ops in enumerate(ranks) if self.next[r] < len(ops)}
                raise WorkloadError(f"estimate: ranks wait on each other for ever: {_first(stuck)}")
        return Estimate(tuple(self._rank(r) for r in range(len(ranks))), self.rate, self.emulated,
                        tuple(tuple(s) for s in self.start), tuple(tuple(e) for e in self.end))

    def _rank(self, r: int) -> RankEstimate:
        ops = self.w.ranks[r]
        comm: dict[str, float] = defaultdict(float)
        compute = 0.0
        for op in ops:
            d = self.end[r][op.id] - self.start[r][op.id]
            if op.is_compute:
                compute += d
            else:
                comm[op.kind.value] += d
        return RankEstimate(r, max(self.end[r], default=0.0), compute, dict(comm))


def _first(stuck: dict[int, str], shown: int = 4) -> str:
    items = list(stuck.items())
    text = ", ".join(f"rank {r} at {key!r}" for r, key in items[:shown])
    return text + (f" and {len(items) - shown} more" if len(items) > shown else "")
