"""What a workload amounts to: ops per rank by kind, bytes per collective kind, and the analytic
step time, real-scale and emulated (`aifabric workload show` prints it)."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from aifabric.workloads.estimate import Estimate, estimate
from aifabric.workloads.generator import Workload


@dataclass(frozen=True)
class KindTotals:
    ops: int                        # over all ranks
    bytes_max_rank: int             # the busiest rank's bytes of this kind
    emulated_bytes_max_rank: int
    bytes_all_ranks: int


@dataclass(frozen=True)
class Summary:
    workload: Workload
    op_counts: tuple[dict[str, int], ...]       # per rank: kind -> ops
    kinds: dict[str, KindTotals]
    real: Estimate
    emulated: Estimate

    def to_dict(self) -> dict:
        return {
            **self.workload.job.to_dict(),
            "scale": self.workload.scale.to_dict(),
            "placement": self.workload.placement.to_dict() if self.workload.placement else None,
            "op_counts": list(self.op_counts),
            "kinds": {k: vars(t) for k, t in self.kinds.items()},
            "estimate": {"real": self.real.to_dict(), "emulated": self.emulated.to_dict()},
        }


def summarise(workload: Workload) -> Summary:
    counts = tuple(dict(Counter(op.kind.value for op in ops)) for ops in workload.ranks)
    per_rank: dict[str, list[tuple[int, int]]] = defaultdict(lambda: [(0, 0)] * len(workload.ranks))
    ops_of: Counter[str] = Counter()
    for r, ops in enumerate(workload.ranks):
        for op in ops:
            if op.is_compute:
                continue
            real, emu = per_rank[op.kind.value][r]
            per_rank[op.kind.value][r] = (real + op.bytes, emu + op.emulated_bytes)
            ops_of[op.kind.value] += 1
    kinds = {kind: KindTotals(ops_of[kind], max(b for b, _ in sizes), max(e for _, e in sizes),
                              sum(b for b, _ in sizes))
             for kind, sizes in sorted(per_rank.items())}
    return Summary(workload, counts, kinds, estimate(workload), estimate(workload, emulated=True))
