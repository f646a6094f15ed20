"""`python -m hostagent.training.dp_rank`: one data-parallel rank on a host. It reads its shard of
the data file, and every step computes the gradient of its batch, all-reduces it (with its loss
and right answers) over the process group, ring or in the switches, and applies the mean
gradient. Prints one JSON report: per step the global batch's loss and accuracy, test accuracy,
and the time computing, communicating and in all. A failed collective (a rank gone silent, a
timeout) ends the run with the group's error in the report and exit status 1.

    python -m hostagent.training.dp_rank --rank 0 --peers 10.0.0.1,10.0.1.1 --data digits.npz \
        --steps 50 --algo ring
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT
from hostagent.collectives.aggregation.worker import JobConfig
from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.reliable import CollectiveError
from hostagent.training import mlp
from hostagent.training.data import Split
from hostagent.training.step import Config, apply, local, shape_of

GROUP_PORT = 47100


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hostagent.training.dp_rank", description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--peers", required=True, help="every rank's IP, comma-separated, in rank order")
    p.add_argument("--port", type=int, default=GROUP_PORT)
    p.add_argument("--data", required=True, help=".npz with x_train, y_train, x_test, y_test")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--algo", default="ring", help="all_reduce algorithm (ring, in_network, tree, ...)")
    p.add_argument("--hidden", type=int, default=Config.hidden)
    p.add_argument("--batch", type=int, default=Config.batch, help="examples per rank per step")
    p.add_argument("--lr", type=float, default=Config.lr)
    p.add_argument("--seed", type=int, default=Config.seed)
    p.add_argument("--timeout", type=float, default=30.0, help="each all_reduce's deadline, seconds")
    p.add_argument("--silent-after", type=float, default=5.0, help="seconds without a packet before a rank is dead")
    p.add_argument("--aggregator", help="in-network job: the fallback aggregator's IP")
    p.add_argument("--job", type=int, help="in-network job id")
    p.add_argument("--worker-id", type=int, help="in-network: this rank's worker_id on the wire")
    p.add_argument("--slots", type=int, default=8)
    return p


def run(args: argparse.Namespace) -> dict:
    ips = [ip for ip in args.peers.split(",") if ip]
    n = len(ips)
    cfg = Config(hidden=args.hidden, batch=args.batch, lr=args.lr, seed=args.seed)
    split = Split.load(args.data)
    shape = shape_of(split, cfg)
    params = mlp.init(shape, cfg.seed)
    aggregation = None
    if args.job is not None:
        aggregation = JobConfig(job_id=args.job, worker_id=args.rank if args.worker_id is None else args.worker_id,
                                num_workers=n, aggregator=(args.aggregator, AGG_UDP_PORT), slots=args.slots,
                                bind=(ips[args.rank], AGG_UDP_PORT), timeout=0.1, max_retries=200)
    report: dict = {"rank": args.rank, "world": n, "algo": args.algo, "parameters": shape.parameters, "steps": []}
    with ProcessGroup(args.rank, [(ip, args.port) for ip in ips], timeout_s=args.timeout, aggregation=aggregation,
                      silent_after_s=args.silent_after) as pg:
        try:
            pg.barrier()        # every rank up before the first step is timed
            for t in range(args.steps):
                t0 = time.monotonic()
                vector = local(shape, params, split, cfg, args.rank, n, t)
                t1 = time.monotonic()
                summed = pg.all_reduce(vector, algo=args.algo)
                t2 = time.monotonic()
                loss, acc = apply(params, summed, cfg, n)
                t3 = time.monotonic()
                report["steps"].append({"step": t, "loss": loss, "train_acc": acc,
                                        "test_acc": mlp.accuracy(shape, params, split.x_test, split.y_test),
                                        "compute_s": (t1 - t0) + (t3 - t2), "comm_s": t2 - t1, "step_s": t3 - t0})
        except CollectiveError as exc:
            report["error"] = f"{type(exc).__name__}: {exc}"
        report["stats"] = pg.stats()
    report["ok"] = "error" not in report
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = run(args)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
