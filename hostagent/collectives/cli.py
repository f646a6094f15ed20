"""`python -m hostagent.collectives worker|ps|ring ...`: one AllReduce process, e.g. in a Mininet host.

worker and ring build their tensor from (seed, rank, size, dtype), run `--warmup` small
allreduces (so that peers started at different times meet), then the measured one, check the
result against the exact sum of every rank's tensor and print one JSON line. Exit status 1 with
one `error: ...` line on stderr when the allreduce fails or its result is wrong. With
`--report-dir DIR` the report is also left in DIR for the metrics exporter
(`hostagent.collectives.report_files`).
ps serves until SIGTERM/SIGINT (or --duration) and then prints its counters as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Callable, Sequence

import numpy as np

from hostagent.collectives.aggregation.protocol import (
    AGG_UDP_PORT,
    AGG_VALUES,
    DEFAULT_FRAME_VALUES,
    DEFAULT_SLOTS,
    FRAME_VALUES,
    RING_UDP_PORT,
)
from hostagent.collectives.baseline_ring import RingClient, RingConfig, RingError, ring_peers
from hostagent.collectives.ps import JobSpec, ParameterServer
from hostagent.collectives.report_files import write_report
from hostagent.collectives.tensors import DEFAULT_INT_MAX, DTYPES, Check, check_aggregated, check_ring, make_tensors
from hostagent.collectives.transport import TransferStats
from hostagent.collectives.aggregation.worker import AllReduceClient, AllReduceError, JobConfig


def _address(default_port: int) -> Callable[[str], tuple[str, int]]:
    def parse(text: str) -> tuple[str, int]:
        host, sep, port = text.rpartition(":")
        if not sep:
            return text, default_port
        if not port.isdigit():
            raise argparse.ArgumentTypeError(f"{text!r} is not IP or IP:PORT")
        return host, int(port)

    return parse


def _tensor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rank", type=int, required=True, help="this worker's rank (picks its tensor)")
    p.add_argument("--size", type=int, required=True, help="tensor elements")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--int-max", type=int, default=DEFAULT_INT_MAX, help="int32 values in [-M, M]")
    p.add_argument("--timeout", type=float, default=0.1, help="seconds before a packet is sent again")
    p.add_argument("--retries", type=int, default=100, help="retransmissions of one packet before giving up")
    p.add_argument("--warmup", type=int, default=1, help="small allreduces before the measured one")
    p.add_argument("--drop-outgoing", type=float, default=0.0, help="testing: drop this fraction of sent packets")
    p.add_argument("--drop-seed", type=int, default=0, help="seed of the drops (the rank is added)")
    p.add_argument("--report-dir", metavar="DIR",
                   help="also write the report to DIR/<algorithm>-job<job>-rank<rank>.json (for the exporter)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hostagent.collectives", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    w = sub.add_parser("worker", help="allreduce through the job's aggregator (switches or parameter server)")
    w.add_argument("--ps", type=_address(AGG_UDP_PORT), required=True, help="aggregator IP[:PORT]")
    w.add_argument("--job", type=int, required=True, help="job id")
    w.add_argument("--workers", type=int, required=True, help="workers in the job")
    w.add_argument("--worker-id", type=int, help="worker_id on the wire (default: the rank)")
    w.add_argument("--slots", type=int, default=DEFAULT_SLOTS)
    w.add_argument("--frame-values", type=int, choices=FRAME_VALUES, default=DEFAULT_FRAME_VALUES,
                   help="values per packet: the job's (JobManager.start's frame_values)")
    w.add_argument("--bind", type=_address(AGG_UDP_PORT), default=("0.0.0.0", AGG_UDP_PORT), help="local IP[:PORT]")
    _tensor_args(w)

    r = sub.add_parser("ring", help="ring allreduce among --peers")
    r.add_argument("--peers", required=True, help="every rank's IP, comma-separated, in ring order")
    r.add_argument("--port", type=int, default=RING_UDP_PORT)
    r.add_argument("--bind", type=_address(RING_UDP_PORT), help="local IP[:PORT] (default: this rank's peer address)")
    r.add_argument("--job", type=int, default=0)
    r.add_argument("--window", type=int, default=64, help="unacknowledged packets per link")
    r.add_argument("--frame-values", type=int, choices=FRAME_VALUES, default=DEFAULT_FRAME_VALUES,
                   help="values per packet, every rank's the same (the in-network job's frame size, to compare)")
    _tensor_args(r)

    s = sub.add_parser("ps", help="parameter server: the jobs' fallback aggregator")
    s.add_argument("--bind", type=_address(AGG_UDP_PORT), default=("0.0.0.0", AGG_UDP_PORT), help="IP[:PORT]")
    s.add_argument("--job", dest="jobs", action="append", required=True, type=_job,
                   help="JOB:FAN_IN[:SLOTS[:FRAME_VALUES]], repeatable")
    s.add_argument("--duration", type=float, help="stop after this many seconds (default: at SIGTERM/SIGINT)")
    s.add_argument("--drop-outgoing", type=float, default=0.0, help="testing: drop this fraction of sent packets")
    s.add_argument("--drop-seed", type=int, default=0)
    return parser


def _job(text: str) -> JobSpec:
    try:
        return JobSpec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _report(args: argparse.Namespace, algorithm: str, workers: int, check: Check, stats: TransferStats) -> dict:
    tensor_bytes = args.size * DTYPES[args.dtype].itemsize
    return {
        "algorithm": algorithm,
        "job": args.job,
        "rank": args.rank,
        "workers": workers,
        "dtype": args.dtype,
        "elements": args.size,
        "tensor_bytes": tensor_bytes,
        "time_s": stats.elapsed_s,
        "algbw_MBps": tensor_bytes / stats.elapsed_s / 1e6 if stats.elapsed_s > 0 else None,
        "max_abs_error": check.max_abs_error,
        "bound": check.bound,
        "ok": check.ok,
        **{k: v for k, v in stats.as_dict().items() if k != "elapsed_s"},
    }


def _measure(client: AllReduceClient | RingClient, args: argparse.Namespace, workers: int) -> tuple[np.ndarray, list[np.ndarray]]:
    tensors = make_tensors(args.seed, workers, args.size, args.dtype, args.int_max)
    for _ in range(args.warmup):
        client.allreduce(np.zeros(AGG_VALUES, dtype=np.int32))
    return client.allreduce(tensors[args.rank]), tensors


def _common(args: argparse.Namespace) -> dict:
    """The options worker and ring configurations share."""
    return dict(
        job_id=args.job,
        bind=args.bind,
        timeout=args.timeout,
        max_retries=args.retries,
        drop_outgoing=args.drop_outgoing,
        drop_seed=args.drop_seed + args.rank,
    )


def run_worker(args: argparse.Namespace) -> dict:
    config = JobConfig(
        worker_id=args.rank if args.worker_id is None else args.worker_id,
        num_workers=args.workers,
        aggregator=args.ps,
        slots=args.slots,
        frame_values=args.frame_values,
        **_common(args),
    )
    with AllReduceClient(config) as client:
        result, tensors = _measure(client, args, args.workers)
        check = check_aggregated(result, tensors, args.frame_values)
        return {**_report(args, "ps", args.workers, check, client.last_stats), "frame_values": args.frame_values}


def run_ring(args: argparse.Namespace) -> dict:
    peers = ring_peers([ip for ip in args.peers.split(",") if ip], args.port)
    config = RingConfig(rank=args.rank, peers=peers, window=args.window, frame_values=args.frame_values,
                        **_common(args))
    with RingClient(config) as client:
        result, tensors = _measure(client, args, len(peers))
        return _report(args, "ring", len(peers), check_ring(result, tensors), client.last_stats)


def run_ps(args: argparse.Namespace) -> dict:
    with ParameterServer(args.jobs, args.bind, args.drop_outgoing, args.drop_seed) as server:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: server.stop())
        if args.duration is not None:
            timer = threading.Timer(args.duration, server.stop)
            timer.daemon = True
            timer.start()
        jobs = ", ".join(f"{j.job_id} (fan_in {j.fan_in}, {j.slots} slots, {j.frame_values} values a frame)"
                         for j in args.jobs)
        print(f"ps: listening on {server.address[0]}:{server.address[1]}, jobs {jobs}", file=sys.stderr, flush=True)
        server.serve()
        return {"ps": f"{server.address[0]}:{server.address[1]}", **server.snapshot()}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runner = {"worker": run_worker, "ring": run_ring, "ps": run_ps}[args.command]
    try:
        report = runner(args)
    except (AllReduceError, RingError, OverflowError, OSError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report), flush=True)
    if getattr(args, "report_dir", None):
        try:
            write_report(args.report_dir, report)
        except OSError as exc:
            print(f"error: report not written to {args.report_dir}: {exc}", file=sys.stderr)
            return 1
    if report.get("ok") is False:
        print(
            f"error: rank {args.rank}: result differs from the exact sum by {report['max_abs_error']:g} "
            f"(bound {report['bound']:g})",
            file=sys.stderr,
        )
        return 1
    return 0
