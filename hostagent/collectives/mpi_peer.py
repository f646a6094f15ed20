"""`python -m hostagent.collectives.mpi_peer`: Open MPI's collectives (through mpi4py) on the same
seeded inputs, checks and timing as our runner, so an established MPI stands in the same table.

Started by mpirun, one process per host (aifabric.experiments.mpi_lab launches it across the
fabric's hosts). For each operation and length every rank runs the call `repeat` times, a barrier before
each, checks its result against numpy (verify.check, the same bounds as ours) and keeps its median
time; rank 0 gathers every rank's report and prints them as one JSON line,
{"ranks": [report per rank]}, each report shaped like the runner's.

    mpirun ... python -m hostagent.collectives.mpi_peer --ops all_reduce all_gather --elements 1024 32768

Operations: all_reduce (MPI_Allreduce, sum), all_gather (MPI_Allgather), reduce_scatter
(MPI_Reduce_scatter, rank i's block as np.array_split cuts it, like ours) and all_to_all
(MPI_Alltoall, ELEMENTS // n to each rank). float32 and int32 (MPI has no bfloat16).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Sequence

import numpy as np

from hostagent.collectives.links import split_bounds
from hostagent.collectives.verify import check, inputs_for

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
ALGO = "mpi"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hostagent.collectives.mpi_peer", description=__doc__.splitlines()[0])
    p.add_argument("--ops", choices=OPS, nargs="+", required=True, help="each run with every length")
    p.add_argument("--elements", type=int, nargs="+", required=True, help="buffer lengths, as the runner takes them")
    p.add_argument("--dtype", choices=("float32", "int32"), default="float32")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=1, help="timed runs of each call (a barrier before each)")
    return p


def call(comm, op: str, mine, n: int):
    """One MPI collective on this rank's input (for all_to_all: its list of equal parts)."""
    from mpi4py import MPI

    if op == "all_reduce":
        out = np.empty_like(mine)
        comm.Allreduce(mine, out, op=MPI.SUM)
        return out
    if op == "all_gather":
        out = np.empty(mine.size * n, dtype=mine.dtype)
        comm.Allgather(mine, out)
        return out
    if op == "reduce_scatter":
        bounds = split_bounds(mine.size, n)
        counts = [bounds[i + 1] - bounds[i] for i in range(n)]
        out = np.empty(counts[comm.Get_rank()], dtype=mine.dtype)
        comm.Reduce_scatter(mine, out, recvcounts=counts, op=MPI.SUM)
        return out
    if op == "all_to_all":
        send = np.concatenate(mine)
        out = np.empty_like(send)
        comm.Alltoall(send, out)
        return np.split(out, n)
    raise ValueError(f"unknown operation {op!r}")


def run(args: argparse.Namespace, comm) -> dict:
    rank, n = comm.Get_rank(), comm.Get_size()
    report: dict = {"rank": rank, "world": n, "dtype": args.dtype, "calls": []}
    for op in args.ops:
        # Open MPI connects TCP peers at their first message: one small untimed call opens them
        call(comm, op, inputs_for(op, args.seed, n, n, args.dtype, even=True)[rank], n)
        for length in args.elements:
            entry = {"op": op, "algo": ALGO, "elements": length, "bytes": length * np.dtype(args.dtype).itemsize}
            inputs = inputs_for(op, args.seed, n, length, args.dtype, even=True)
            times = []
            for _ in range(args.repeat):
                comm.Barrier()
                t0 = time.monotonic()
                result = call(comm, op, inputs[rank], n)
                times.append(time.monotonic() - t0)
            v = check(op, ALGO, result, inputs, rank, 0, args.dtype)
            entry.update(ok=v.ok, max_error=v.max_error, bound=v.bound, time_s=min(times),
                         median_s=statistics.median(times))
            report["calls"].append(entry)
    report["ok"] = all(c["ok"] for c in report["calls"])
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    report = run(args, comm)
    reports = comm.gather(report, root=0)
    if comm.Get_rank() == 0:
        library = MPI.Get_library_version().rstrip("\x00").splitlines()[0]
        print(json.dumps({"ranks": reports, "library": library}), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
