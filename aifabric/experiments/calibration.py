"""The latency-aware model's constants, measured on the fabric at hand (aifabric.workloads.latency).

`link_costs(plan)` is what the links and the framing alone say: the link's bytes a second, each
data frame's headers and Ethernet overhead and its share of acknowledgements (the collectives'
reliable transport: PAYLOAD bytes a frame, an acknowledgement per ACK_EVERY frames), and the
aggregation frames' own. `calibrate(lab, plan, group)` adds what only a measurement gives. The model counts a call's steps
(a call, ceil(log2 n) header rounds, then 2(n-1) ring steps for all_reduce, n-1 for reduce_scatter,
each step a message of one frame here), so small calls of the group itself (n elements: one per
rank and step; `REPEAT` times each, every rank's median, the slowest rank's of those) give:

* all_reduce:      Ta = call + (L + 2(n-1)) a + Wa
* reduce_scatter:  Tr = call + (L + n - 1) a + Wr

with W the frames' wire time, which the links give (the model without latency), so a message at
the group's distance costs a = (Ta - Wa - Tr + Wr) / (n - 1), and then call. Measured with the
whole group running, a holds what its ranks' CPUs add when they all move at once. Two ranks one
switch apart and two as far apart as the group's farthest (all_reduce, 3 steps each) give the
switch hop: hop = (T_far - T_near) / 3 (h_far - h_near); the message's fixed part is a less the
group's hops. Groups smaller than the whole (a DP x TP x PP workload calls among pairs) have
their own message and call costs (`Costs.by_group`): the group is cut into consecutive groups of
that size, all running at once as the workload's groups do, and the same two calls give them.
`solve` inverts the model exactly; a constant the measurement puts below zero (noise where it is
small) is taken as 0 and said, and the other one of its pair fitted to both calls by least squares.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES, WORKLOAD_SLOTS
from aifabric.experiments.collectives_lab import run_group
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan
from aifabric.workloads.latency import ITEM_BYTES, Costs, collective_seconds
from aifabric.workloads.ops import Kind
from hostagent.collectives.aggregation.protocol import frame_bytes
from hostagent.collectives.reliable import ACK_EVERY, ACK_FRAME_BYTES, DATA_FRAME_BYTES, PAYLOAD

REPEAT = 7


def link_costs(plan: LinkPlan, agg_values: int = LAB_FRAME_VALUES, agg_window: int = WORKLOAD_SLOTS) -> Costs:
    """The links' rate and every frame's overhead, no latency (what `calibrate` then measures);
    in-network frames of ``agg_values`` values."""
    rate = plan.rate
    link_bytes_per_s = plan.bits_per_s / 8
    # a data frame and its share of acknowledgements, in wire bytes at this rate
    data_wire = (rate.seconds(DATA_FRAME_BYTES) + rate.seconds(ACK_FRAME_BYTES) / ACK_EVERY) * link_bytes_per_s
    agg_wire = rate.seconds(frame_bytes(agg_values)) * link_bytes_per_s
    return Costs(link_bytes_per_s, payload_per_frame=PAYLOAD, frame_overhead_bytes=data_wire - PAYLOAD,
                 agg_values_per_frame=agg_values, agg_frame_overhead_bytes=agg_wire - 4 * agg_values,
                 agg_window_frames=agg_window)


@dataclass
class Calibration:
    costs: Costs
    measured_s: dict[str, float] = field(default_factory=dict)     # "near", "far", "group": slowest rank's median
    hops: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        c = self.costs
        text = (f"calibrated: a message {1e3 * c.message_s:.2f} ms, a switch hop {1e3 * c.hop_s:.3f} ms, a call "
                f"{1e3 * c.call_s:.2f} ms")
        text += "".join(f"; in groups of {n}: a message {1e3 * m:.2f} ms, a call {1e3 * k:.2f} ms"
                        for n, m, k in c.by_group)
        text += f" (from small calls: {self._measured()})"
        return text + "".join(f"; {n}" for n in self.notes)

    def _measured(self) -> str:
        where = {"near": "2 ranks, near", "far": "2 ranks, far", "all_reduce": "all_reduce of the group",
                 "reduce_scatter": "reduce_scatter of the group"}
        return ", ".join(f"{where.get(k, k)} {1e3 * v:.1f} ms" for k, v in self.measured_s.items())

    def to_dict(self) -> dict:
        return {"costs": self.costs.to_dict(), "measured_s": self.measured_s, "hops": self.hops, "notes": self.notes}


def switch_hops(lab: Lab, a: str, b: str) -> int:
    import networkx as nx
    return nx.shortest_path_length(lab.fabric.to_graph(), a, b) - 1


def probe_hosts(lab: Lab, group: list[str]) -> tuple[list[str], list[str]]:
    """Two hosts of one edge switch, and the two of ``group`` farthest apart."""
    by_switch: dict[str, list[str]] = {}
    for h in lab.fabric.hosts:
        by_switch.setdefault(h.switch, []).append(h.name)
    near = next((hosts[:2] for hosts in by_switch.values() if len(hosts) >= 2), None)
    if near is None:
        raise ValueError(f"calibration needs two hosts on one switch: {lab.fabric.describe()} has none")
    far = max(((a, b) for i, a in enumerate(group) for b in group[i + 1:]), key=lambda ab: switch_hops(lab, *ab))
    return near, list(far)


def _small_call_seconds(lab: Lab, groups: list[list[str]], op: str, repeat: int) -> float:
    """The slowest rank's median of small ``op`` calls, every group of ``groups`` calling at once."""
    def one(hosts: list[str]):
        return run_group(lab, hosts, f"{op}:ring", [len(hosts)], repeat=repeat, timeout=30.0, deadline_s=120.0)
    with ThreadPoolExecutor(len(groups)) as pool:
        runs = list(pool.map(one, groups))
    for hosts, run in zip(groups, runs):
        if not run.ok:
            raise RuntimeError(f"calibration {op} on {', '.join(hosts)} failed: {'; '.join(run.errors)}")
    return max(r["calls"][0]["median_s"] for run in runs for r in run.reports)


def subgroups(group: list[str], size: int) -> list[list[str]]:
    """``group`` cut into consecutive groups of ``size`` (a last shorter one left out)."""
    return [group[i:i + size] for i in range(0, len(group) - size + 1, size)]


def _most_hops(lab: Lab, groups: list[list[str]]) -> int:
    return max(switch_hops(lab, a, b) for g in groups for i, a in enumerate(g) for b in g[i + 1:])


def calibrate(lab: Lab, plan: LinkPlan, group: list[str], *, sizes: Iterable[int] = (), base: Costs | None = None,
              repeat: int = REPEAT) -> Calibration:
    """``base`` (default `link_costs(plan)`) with the latencies measured on ``lab`` for ``group``,
    and for its groups of each of ``sizes`` (the sizes a workload calls among; see `group_sizes`)."""
    base = base or link_costs(plan)
    near, far = probe_hosts(lab, group)
    hops = {"near": switch_hops(lab, *near), "far": switch_hops(lab, *far), "group": _most_hops(lab, [group])}
    measured = {"near": _small_call_seconds(lab, [near], "all_reduce", repeat),
                "far": _small_call_seconds(lab, [far], "all_reduce", repeat),
                "all_reduce": _small_call_seconds(lab, [group], "all_reduce", repeat),
                "reduce_scatter": _small_call_seconds(lab, [group], "reduce_scatter", repeat)}
    for size in sorted(set(sizes) - {len(group)}):
        parts = subgroups(group, size)
        if size < 2 or not parts:
            raise ValueError(f"calibration: no groups of {size} among {len(group)} ranks")
        hops[f"groups of {size}"] = _most_hops(lab, parts)
        for op in ("all_reduce", "reduce_scatter"):
            measured[f"{op} of {size}"] = _small_call_seconds(lab, parts, op, repeat)
    return solve(base, measured, hops, len(group))


def group_sizes(workload) -> set[int]:
    """The sizes of the groups ``workload``'s ranks call among (a send and its receive: 2)."""
    return {len(op.group) for ops in workload.ranks for op in ops if not op.is_compute and len(op.group) > 1} \
        | ({2} if any(op.kind in (Kind.SEND, Kind.RECV) for ops in workload.ranks for op in ops) else set())


def solve(base: Costs, measured: dict[str, float], hops: dict[str, int], n: int) -> Calibration:
    """The constants from the measurements (see the module doc): the hop from two pairs, a
    message's and a call's fixed costs from the group's two calls, and the same for every smaller
    size measured (``measured["all_reduce of 2"]``, ...)."""
    frames_only = replace(base, message_s=0.0, hop_s=0.0, call_s=0.0)
    notes: list[str] = []

    def wire(op: Kind, members: int) -> float:         # the model's time for the frames alone
        return collective_seconds(frames_only, op, ITEM_BYTES * members, members, 0)

    def fixed(size: int, group_hops: int, all_reduce: float, reduce_scatter: float, of: str) -> tuple[float, float]:
        """A message's fixed cost and a call's in a group of ``size`` whose farthest ranks are
        ``group_hops`` apart: the two calls' times beyond their frames are call + k (message +
        hops x hop), k their messages; solved exactly, or where that puts one below zero, that
        one is 0 and the other the least-squares fit of both calls (noise of small figures)."""
        k_ar = math.ceil(math.log2(size)) + 2 * (size - 1)
        k_rs = k_ar - (size - 1)
        ar = all_reduce - wire(Kind.ALL_REDUCE, size) - k_ar * group_hops * hop
        rs = reduce_scatter - wire(Kind.REDUCE_SCATTER, size) - k_rs * group_hops * hop
        message = (ar - rs) / (size - 1)
        call = ar - k_ar * message
        if call < 0:
            notes.append(f"call_s{of} measured {1e3 * call:.3f} ms, taken as 0 and the message fitted to both calls")
            call, message = 0.0, (k_ar * ar + k_rs * rs) / (k_ar ** 2 + k_rs ** 2)
        if message < 0:
            notes.append(f"message_s{of} measured {1e3 * message:.3f} ms, taken as 0 and the call fitted to both calls")
            message, call = 0.0, max(0.0, (ar + rs) / 2)
        return message, call

    dh = hops["far"] - hops["near"]
    hop = (measured["far"] - measured["near"]) / (3 * dh) if dh else 0.0
    if hop < 0:
        notes.append(f"hop_s measured {1e3 * hop:.3f} ms, taken as 0")
        hop = 0.0
    message, call = fixed(n, hops["group"], measured["all_reduce"], measured["reduce_scatter"], "")
    values = {"hop_s": hop, "message_s": message, "call_s": call}
    by_group = []
    for key in sorted(k for k in measured if k.startswith("all_reduce of ")):
        size = int(key.rsplit(" ", 1)[1])
        by_group.append((size, *fixed(size, hops[f"groups of {size}"], measured[key],
                                      measured[f"reduce_scatter of {size}"], f" of {size}")))
    return Calibration(replace(base, **values, by_group=tuple(by_group)), dict(measured), dict(hops), notes)
