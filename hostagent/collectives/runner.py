"""`python -m hostagent.collectives.runner`: one rank of a process group on a host, running a list
of collective calls on seeded inputs, checking each result against numpy (verify.check) and
timing it; prints one JSON report. The fabric tests and benchmarks/collectives.py start one per host.

    python -m hostagent.collectives.runner --rank 0 --peers 10.0.0.1,10.0.1.1 \
        --calls all_reduce:ring,all_gather:auto --elements 4097 --dtype float32
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Sequence

from hostagent.collectives.arrays import DTYPES
from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.rank_program import add_group_args, group_from_args, json_main, peer_ips
from hostagent.collectives.reliable import CollectiveError
from hostagent.collectives.verify import check, inputs_for

GROUP_PORT = 47000


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hostagent.collectives.runner", description=__doc__.splitlines()[0])
    add_group_args(p, port=GROUP_PORT)
    p.add_argument("--calls", required=True, help="OP:ALGO,... (ops: all_reduce, reduce_scatter, all_gather, "
                   "all_to_all, broadcast, reduce, barrier)")
    p.add_argument("--elements", type=int, nargs="+", required=True, help="buffer lengths, each run with every call")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1, help="timed runs of each call (a barrier before each)")
    p.add_argument("--groups", help="topology groups of ranks, e.g. '0,1;2,3' (default: by /24)")
    p.add_argument("--even-splits", action="store_true",
                   help="all_to_all: ELEMENTS/n to each rank (default: a few, uneven, some empty)")
    return p


def _call(pg: ProcessGroup, op: str, algo: str, x, root: int):
    if op == "all_reduce":
        return pg.all_reduce(x, algo=algo)
    if op == "reduce_scatter":
        return pg.reduce_scatter(x, algo=algo)
    if op == "all_gather":
        return pg.all_gather(x, algo=algo)
    if op == "all_to_all":
        return pg.all_to_all(x, algo=algo)
    if op == "broadcast":
        return pg.broadcast(x, root=root, algo=algo)
    if op == "reduce":
        return pg.reduce(x, root=root, algo=algo)
    if op == "barrier":
        return pg.barrier()
    raise ValueError(f"unknown operation {op!r}")


def run(args: argparse.Namespace) -> dict:
    n = len(peer_ips(args))
    groups = [[int(r) for r in g.split(",")] for g in args.groups.split(";")] if args.groups else None
    calls = [c.split(":") for c in args.calls.split(",")]
    report: dict = {"rank": args.rank, "world": n, "dtype": args.dtype, "calls": []}
    with group_from_args(args, groups=groups) as pg:
        for length in args.elements:
            for op, algo in calls:
                entry = {"op": op, "algo": algo, "elements": length, "bytes": length * DTYPES[args.dtype].itemsize}
                inputs = inputs_for(op, args.seed, n, length, args.dtype, args.even_splits)
                times = []
                try:
                    for _ in range(args.repeat):
                        pg.barrier()
                        t0 = time.monotonic()
                        result = _call(pg, op, algo, inputs[args.rank], args.root)
                        times.append(time.monotonic() - t0)
                    if op != "barrier":
                        v = check(op, algo, result, inputs, args.rank, args.root, args.dtype)
                        entry.update(ok=v.ok, max_error=v.max_error, bound=v.bound)
                    else:
                        entry.update(ok=True)
                    if algo == "auto":
                        entry["chose"] = pg.choices[-1][1]
                except CollectiveError as exc:
                    entry.update(ok=False, error=f"{type(exc).__name__}: {exc}")
                entry.update(time_s=min(times) if times else None, median_s=statistics.median(times) if times else None)
                report["calls"].append(entry)
        report["stats"] = pg.stats()
    report["ok"] = all(c["ok"] for c in report["calls"])
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return json_main(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
