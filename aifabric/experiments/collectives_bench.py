"""Collectives measured the way nccl-tests measures them, on a fabric with rate-limited links.

For each operation, algorithm and message size S (bytes, a sweep of powers of two) the ranks run
the call `repeat` times after a barrier each; a call's time is the slowest rank's median. As in
nccl-tests (doc/PERFORMANCE.md): algbw = S / time, with S the buffer of all_reduce, broadcast and
reduce, the whole input of reduce_scatter, the whole output of all_gather and each rank's send
buffer of all_to_all; busbw = algbw x factor, the factor being 2(n-1)/n for all_reduce, (n-1)/n for
reduce_scatter, all_gather and all_to_all, 1 for broadcast and reduce, so that busbw compares with
what one link carries whatever the operation.

The link bound: every link direction carries the plan's bits/s (aifabric.lab.links.limit_links).
Our data packets carry PAYLOAD bytes in a frame of PAYLOAD + header + UDP/IP/Ethernet bytes, which
costs the link its wire size (with Ethernet's FCS, preamble and gap), and a host's uplink also
carries one acknowledgement per ACK_EVERY packets it receives (as many as it sends, in these
algorithms), so busbw can reach bits/s / 8 x PAYLOAD / (wire(data frame) + wire(ack frame) /
ACK_EVERY) at most.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from aifabric.experiments.aggregation_job import LAB_FRAME_VALUES
from aifabric.experiments.collectives_lab import run_group
from aifabric.experiments.mpi_lab import run_mpi
from aifabric.lab.cpu_meter import cpu_times
from aifabric.lab.lab import Lab
from aifabric.lab.links import LinkPlan, LinkRate
from controller.aggregation import JobManager
from hostagent.collectives.aggregation.protocol import frame_bytes
from hostagent.collectives.reliable import ACK_EVERY, PAYLOAD
from hostagent.collectives.reliable import ACK_FRAME_BYTES as ACK_FRAME
from hostagent.collectives.reliable import DATA_FRAME_BYTES as DATA_FRAME
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
ALGORITHMS = {
    "all_reduce": ("ring", "tree", "halving_doubling", "hierarchical"),
    "reduce_scatter": ("ring", "halving_doubling"),
    "all_gather": ("ring", "halving_doubling"),
    "all_to_all": ("pairwise",),
    "broadcast": ("ring", "tree"),
    "reduce": ("ring", "tree"),
}
ITEMSIZE = 4  # float32
SMALL_BYTES = 8 << 10  # tree vs ring is judged at every all_reduce size below this
MPI_OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")  # what mpi_peer runs


def in_network_ceiling(plan: LinkPlan, n: int, frame_values: int = LAB_FRAME_VALUES) -> float:
    """The most in-network all_reduce's algbw can be over the ring's on these links: each rank
    sends the buffer once in frames of ``frame_values`` values, where the ring sends 2(n-1)/n of
    it in PAYLOAD-byte frames at link_bound_Bps."""
    in_network_Bps = plan.rate.payload_bytes_per_s(frame_bytes(frame_values), frame_values * ITEMSIZE)
    ring_algbw = link_bound_Bps(plan) / BUS_FACTOR["all_reduce"](n)
    return in_network_Bps / ring_algbw


def link_bound_Bps(plan: LinkPlan) -> float:
    """The busbw (bytes/s of payload) a host uplink limited by ``plan`` allows our packets."""
    per_data_frame = plan.rate.seconds(DATA_FRAME) + plan.rate.seconds(ACK_FRAME) / ACK_EVERY
    return PAYLOAD / per_data_frame


SWEEP_WINDOW = 64
"""Packets in flight per peer in the sweep: the library's default (32 before)."""
SHARED_FLOWS = 2
"""Flows of one group ECMP may put on one link of the fabric, whose windows queue there at once: the
first timeout covers them. Ring all_reduce of 512 KiB among 8 at 4 Mbit/s (steps of 47 frames),
a window of 32 and one window's time: 1 and 2,010 packets resent in two runs, 0.58 and 0.48 of the
link bound; a window of 64 and one window's time: 117 resent, 0.84; two windows' time: none, 0.89
(256 KiB: 0.87)."""


def min_rto_s(plan: LinkPlan, window: int) -> float:
    """The ranks' first retransmission timeout: the time a full window takes through one link.
    Shorter, a sender's own queue (and the acknowledgements queued behind the receiver's data)
    outgrow the RTT estimate: in the first sweep, at 50 ms, most resends were of packets that had
    arrived (duplicates = retransmissions) and ring all_reduce fell to 0.2 of the bound at 128 KiB."""
    return max(0.05, plan.rate.seconds(DATA_FRAME, window))


def elements_for(op: str, size: int, n: int) -> int:
    """Per-rank buffer elements of a call whose nccl-tests size is `size` bytes."""
    if op == "all_gather":
        return max(1, size // (ITEMSIZE * n))
    return max(1, size // ITEMSIZE)


@dataclass
class Point:
    op: str
    algo: str
    size: int
    n: int
    time_s: float | None
    ok: bool
    chose: str | None = None
    error: str = ""

    @property
    def algbw(self) -> float | None:
        return self.size / self.time_s if self.ok and self.time_s else None

    @property
    def busbw(self) -> float | None:
        return self.algbw * BUS_FACTOR[self.op](self.n) if self.algbw is not None else None


@dataclass
class Sweep:
    points: list[Point] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cpu_busy: float = 0.0
    agg_ops: dict = field(default_factory=dict)


def _collect(sweep: Sweep, run, n: int, sizes_by_elements: dict[tuple[str, int], int]) -> None:
    sweep.errors.extend(run.errors)
    if len(run.reports) != n:
        return
    for i, first in enumerate(run.reports[0]["calls"]):
        per_rank = [r["calls"][i] for r in run.reports]
        ok = all(c["ok"] for c in per_rank)
        times = [c["median_s"] for c in per_rank if c.get("median_s") is not None]
        size = sizes_by_elements[(first["op"], first["elements"])]
        sweep.points.append(Point(first["op"], first["algo"], size, n, max(times) if ok and times else None, ok,
                                  first.get("chose"), "; ".join(c.get("error", "") for c in per_rank if not c["ok"])))


def measure(lab: Lab, hosts: list[str], ops: list[str], sizes: list[int], *, plan: LinkPlan, repeat: int = 3,
            manager: JobManager | None = None, server: str | None = None, timeout: float = 300.0,
            window: int = SWEEP_WINDOW, auto: bool = True, with_mpi: bool = False) -> Sweep:
    """Every operation's algorithms (and auto's choice) over `sizes` (bytes) among `hosts`; with
    `manager` and `server`, in-network all_reduce too; `with_mpi`, Open MPI's collectives on the
    same hosts (algorithm "mpi")."""
    n, sweep = len(hosts), Sweep()
    cpu0 = cpu_times()
    for op in ops:
        algos = list(ALGORITHMS[op]) + (["auto"] if auto else [])
        calls = ",".join(f"{op}:{a}" for a in algos)
        lengths = {elements_for(op, s, n): s for s in sizes}
        run = run_group(lab, hosts, calls, list(lengths), repeat=repeat, timeout=timeout, window=window,
                        even_splits=True, extra_args=["--rto", f"{min_rto_s(plan, SHARED_FLOWS * window):.3f}"])
        _collect(sweep, run, n, {(op, e): s for e, s in lengths.items()})
    if with_mpi:
        for op in [o for o in ops if o in MPI_OPS]:
            lengths = {elements_for(op, s, n): s for s in sizes}
            run = run_mpi(lab, hosts, [op], list(lengths), repeat=repeat, deadline_s=60 + 10 * len(lengths) * (repeat + 1))
            _collect(sweep, run, n, {(op, e): s for e, s in lengths.items()})
            if not run.reports:
                sweep.errors.append("mpi: no report, the other operations not tried")
                break
    if manager is not None and "all_reduce" in ops:
        lengths = {elements_for("all_reduce", s, n): s for s in sizes}
        run = run_group(lab, hosts, "all_reduce:in_network", list(lengths), repeat=repeat, timeout=timeout,
                        manager=manager, server=server)
        sweep.agg_ops = run.agg_ops
        _collect(sweep, run, n, {("all_reduce", e): s for e, s in lengths.items()})
    cpu1 = cpu_times()
    total, idle = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    sweep.cpu_busy = 1 - idle / total if total else 0.0
    return sweep


def rows(sweep: Sweep, bound_Bps: float) -> list[tuple]:
    out = []
    for p in sorted(sweep.points, key=lambda p: (list(BUS_FACTOR).index(p.op), p.size)):  # stable: algorithms as run
        if p.ok and p.time_s:
            out.append((p.op, p.algo + (f" ({p.chose})" if p.chose else ""), p.size, f"{p.time_s * 1e3:.1f}",
                        f"{p.algbw / 1e3:.1f}", f"{p.busbw / 1e3:.1f}", f"{p.busbw / bound_Bps:.2f}"))
        else:
            out.append((p.op, p.algo, p.size, "FAILED", "-", "-", p.error[:60]))
    return out


HEADERS = ("operation", "algorithm", "size (B)", "time (ms)", "algbw (kB/s)", "busbw (kB/s)", "busbw / link bound")


def summary(sweep: Sweep, plan: LinkPlan, n: int, target: str) -> dict:
    bound = link_bound_Bps(plan)
    return {
        "ranks": n, "target": target, "links": plan.describe(), "link_bound_busbw_Bps": bound,
        "cpu_busy": round(sweep.cpu_busy, 3), "agg_ops": sweep.agg_ops, "errors": sweep.errors,
        "points": [{"op": p.op, "algo": p.algo, "chose": p.chose, "size_bytes": p.size, "ok": p.ok,
                    "time_s": p.time_s, "algbw_Bps": p.algbw, "busbw_Bps": p.busbw,
                    "fraction_of_bound": p.busbw / bound if p.busbw else None, "error": p.error}
                   for p in sweep.points],
    }


def goals(sweep: Sweep, bound: float, plan: LinkPlan) -> list[str]:
    """The issue's benchmark goals, each with the figures it was judged on."""
    def best(op: str, algo: str, size: int | None = None) -> Point | None:
        pts = [p for p in sweep.points if p.op == op and p.algo == algo and p.ok and (size is None or p.size == size)]
        return max(pts, key=lambda p: p.size) if pts else None
    lines = []
    largest = max((p.size for p in sweep.points), default=0)
    ring = best("all_reduce", "ring", largest)
    if ring:
        lines.append(f"ring all_reduce busbw at {largest} B: {ring.busbw / bound:.2f} of the link bound (goal >= 0.9)")
    inn = best("all_reduce", "in_network", largest)
    if ring and inn:
        lines.append(f"in-network / ring algbw at {largest} B, {ring.n} ranks: {inn.algbw / ring.algbw:.2f}x (goal >= 1.7x; "
                     f"the links allow at most {in_network_ceiling(plan, ring.n):.2f}x)")
    mpi = best("all_reduce", "mpi", largest)
    if ring and mpi:
        lines.append(f"ring / Open MPI all_reduce at {largest} B: {ring.time_s * 1e3:.1f} ms vs {mpi.time_s * 1e3:.1f} ms, "
                     f"busbw {ring.busbw / bound:.2f} vs {mpi.busbw / bound:.2f} of our bound (goal: ring at least as fast)")
    for size in sorted({p.size for p in sweep.points if p.op == "all_reduce" and p.size < SMALL_BYTES}):
        tree, ring_s = best("all_reduce", "tree", size), best("all_reduce", "ring", size)
        if tree and ring_s:
            lines.append(f"tree vs ring all_reduce at {size} B: {tree.time_s * 1e3:.1f} ms vs {ring_s.time_s * 1e3:.1f} ms "
                         f"(goal: tree faster)")
    return lines


def draw(path, sweep: Sweep, bound: float) -> None:
    from aifabric.lab import report
    plt = report.pyplot()
    ops = sorted({p.op for p in sweep.points}, key=list(BUS_FACTOR).index)
    fig, axes = plt.subplots(1, len(ops), figsize=(4 * len(ops), 3.6), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for algo in sorted({p.algo for p in sweep.points if p.op == op}):
            pts = sorted((p.size, p.busbw) for p in sweep.points if p.op == op and p.algo == algo and p.busbw)
            if pts:
                ax.plot([s for s, _ in pts], [b / 1e3 for _, b in pts], marker="o", label=algo)
        ax.axhline(bound / 1e3, color="grey", linestyle="--", label="link bound")
        ax.set_xscale("log", base=2)
        ax.set_title(op)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (kB/s)")
        ax.legend(fontsize=7)
    report.save_figure(fig, path)


DEFAULT_RATE = LinkRate.parse("5M")


def run(*, ranks: int = 8, sizes: list[int] | None = None, ops: list[str] | None = None,
        rate: LinkRate = DEFAULT_RATE,
        repeat: int = 3, target: str = "softswitch", in_network: bool = True, with_mpi: bool = False,
        json_path: str = "out/collectives.json", png_path: str = "out/collectives.png") -> int:
    """The whole sweep on a k=4 fat-tree: table and goals printed, JSON and plot written."""
    from pathlib import Path

    from aifabric.experiments.allreduce_lab import spread_workers
    from aifabric.lab import report
    from aifabric.lab.links import limit_links
    from topologies.fabric import fat_tree

    sizes = sizes or [1 << k for k in range(12, 19)]
    ops = ops or list(BUS_FACTOR)
    fabric = fat_tree(4)
    plan = LinkPlan(rate)
    bound = link_bound_Bps(plan)
    with Lab(fabric, target=target, progress=report.progress) as lab:
        limit_links(lab, plan)
        hosts, server = spread_workers(fabric, ranks)
        manager = JobManager(lab.controller) if in_network else None
        sweep = measure(lab, hosts, ops, sizes, plan=plan, repeat=repeat, manager=manager, server=server,
                        with_mpi=with_mpi)
    print(report.table(HEADERS, rows(sweep, bound),
                       title=f"\nCollectives, {ranks} ranks on a k=4 fat-tree ({target}), links {plan.describe()};"
                             f" link bound busbw {bound / 1e3:.1f} kB/s; CPU busy {100 * sweep.cpu_busy:.0f}%"))
    for line in goals(sweep, bound, plan):
        print(line)
    for e in sweep.errors:
        print(f"error: {e}")
    report.write_json(json_path, summary(sweep, plan, ranks, target))
    draw(Path(png_path), sweep, bound)
    print(f"\nJSON: {Path(json_path).resolve()}\npicture: {Path(png_path).resolve()}")
    return 0 if not sweep.errors and all(p.ok for p in sweep.points) else 1


def add_arguments(ap) -> None:
    """The sweep's options, shared by benchmarks/collectives.py and `aifabric bench collectives`."""
    from aifabric.lab.links import rate_arg

    ap.add_argument("--ranks", type=int, default=8, help="ranks, spread over racks and pods (default %(default)s)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1 << k for k in range(12, 19)], metavar="BYTES",
                    help="message sizes as nccl-tests counts them (default 4 KiB .. 256 KiB, powers of two)")
    ap.add_argument("--ops", nargs="+", default=list(BUS_FACTOR), choices=list(BUS_FACTOR), metavar="OP",
                    help=f"operations (default all: {', '.join(BUS_FACTOR)})")
    ap.add_argument("--rate", type=rate_arg, default=DEFAULT_RATE,
                    help="link rate per direction: Mbit/s, or with a unit (2.5M, 500k, 1000pps); default %(default)s")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls of each point, their median kept (default 3)")
    ap.add_argument("--no-in-network", action="store_true", help="leave out all_reduce in the switches")
    ap.add_argument("--with-mpi", action="store_true",
                    help="Open MPI's MPI_Allreduce, MPI_Reduce_scatter, MPI_Allgather, MPI_Alltoall on the same hosts "
                         "and links (algorithm 'mpi'; needs openmpi-bin and mpi4py)")
    ap.add_argument("--json", default="out/collectives.json", help="the figures as JSON (default %(default)s)")
    ap.add_argument("--png", default="out/collectives.png", help="busbw against size (default %(default)s)")


def run_args(a) -> int:
    return run(ranks=a.ranks, sizes=a.sizes, ops=a.ops, rate=a.rate, repeat=a.repeat, target=a.target,
               in_network=not a.no_in_network, with_mpi=a.with_mpi, json_path=a.json, png_path=a.png)
