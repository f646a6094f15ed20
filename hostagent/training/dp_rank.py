"""`python -m hostagent.training.dp_rank`: one data-parallel rank on a host. It reads its shard of
the data file, and every step computes the gradient of its batch, all-reduces it (with its loss
and right answers) over the process group, ring or in the switches, and applies the mean
gradient. Prints one JSON report: per step the global batch's loss and accuracy, test accuracy,
and the time computing, communicating and in all. A failed collective (a rank gone silent, a
timeout) ends the run with the group's error in the report and exit status 1.

With ``--checkpoint PATH --checkpoint-every N`` rank 0 saves the parameters every N steps
(hostagent.training.checkpoint), and every rank started again with the same PATH goes on from
the last one saved: the launcher restarts a job that lost a rank. ``--exit-at-step S`` makes the
rank end at step S without a word, as a crashed host would (failure injection).

    python -m hostagent.training.dp_rank --rank 0 --peers 10.0.0.1,10.0.1.1 --data digits.npz \
        --steps 50 --algo ring
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Sequence

from hostagent.collectives.rank_program import add_group_args, group_from_args, json_main, peer_ips
from hostagent.collectives.reliable import CollectiveError
from hostagent.training import mlp
from hostagent.training.checkpoint import Checkpoint
from hostagent.training.data import Split
from hostagent.training.step import Config, apply, local, shape_of

GROUP_PORT = 47100


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hostagent.training.dp_rank", description=__doc__.splitlines()[0])
    add_group_args(p, port=GROUP_PORT, timeout=30.0, silent_after=5.0, rto=0.03, slots=8)
    p.add_argument("--data", required=True, help=".npz with x_train, y_train, x_test, y_test")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--algo", default="ring", help="all_reduce algorithm (ring, in_network, tree, ...)")
    p.add_argument("--hidden", type=int, default=Config.hidden)
    p.add_argument("--batch", type=int, default=Config.batch, help="examples per rank per step")
    p.add_argument("--lr", type=float, default=Config.lr)
    p.add_argument("--seed", type=int, default=Config.seed)
    p.add_argument("--checkpoint", help="the job's checkpoint file: resumed from when it exists, saved by rank 0")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N", help="save every N steps (0: never)")
    p.add_argument("--exit-at-step", type=int, metavar="S", help="end this rank's process at step S (failure injection)")
    return p


def run(args: argparse.Namespace) -> dict:
    n = len(peer_ips(args))
    cfg = Config(hidden=args.hidden, batch=args.batch, lr=args.lr, seed=args.seed)
    split = Split.load(args.data)
    shape = shape_of(split, cfg)
    params = mlp.init(shape, cfg.seed)
    resumed = Checkpoint.load(args.checkpoint, shape.parameters, cfg.seed) if args.checkpoint else None
    first = 0
    if resumed is not None:
        params, first = resumed.params, resumed.next_step
    report: dict = {"rank": args.rank, "world": n, "algo": args.algo, "parameters": shape.parameters,
                    "first_step": first, "steps": []}
    with group_from_args(args) as pg:
        try:
            pg.barrier()        # every rank up before the first step is timed
            for t in range(first, args.steps):
                if t == args.exit_at_step:
                    os._exit(137)                   # no report, no goodbye to the group: a crash
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
                if args.rank == 0 and args.checkpoint and args.checkpoint_every and (t + 1) % args.checkpoint_every == 0:
                    Checkpoint(params, t + 1, cfg.seed).save(args.checkpoint)
        except CollectiveError as exc:
            report["error"] = f"{type(exc).__name__}: {exc}"
        report["stats"] = pg.stats()
    report["ok"] = "error" not in report
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return json_main(build_parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
