"""A rank's iteration split the way SimAI and ASTRA-sim report it: compute (the union of its
compute intervals), exposed communication (communication intervals not covered by compute) and
idle (neither: between ops, which a rank whose every wait is a collective or a receive should
hardly have). step = compute + exposed + idle by construction; `split` measures each from intervals."""
from __future__ import annotations


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def _minus(intervals: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Length of ``intervals`` (a union) outside ``cover`` (a union)."""
    total = 0.0
    for a, b in intervals:
        left = b - a
        for c, d in cover:
            left -= max(0.0, min(b, d) - max(a, c))
        total += left
    return total


def split(ops: list[dict], start: float, end: float) -> dict:
    """ops: {"kind", "start", "end"} of one iteration; start/end: the iteration's bounds."""
    compute = _union([(o["start"], o["end"]) for o in ops if o["kind"] == "compute"])
    comm = _union([(o["start"], o["end"]) for o in ops if o["kind"] != "compute"])   # a recv's wait too
    step = end - start
    c = _length(compute)
    exposed = _minus(comm, compute)
    by_kind: dict[str, float] = {}
    for o in ops:
        if o["kind"] != "compute":
            by_kind[o["kind"]] = by_kind.get(o["kind"], 0.0) + o["end"] - o["start"]
    return {"step_s": step, "compute_s": c, "exposed_comm_s": exposed, "idle_s": step - c - exposed,
            "comm_by_kind_s": by_kind}
