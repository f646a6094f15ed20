"""What every rank program on a host shares (hostagent.collectives.runner, hostagent.training.dp_rank):
the process group's arguments, the group built from them, and a main that prints one JSON report.

    p = argparse.ArgumentParser(...)
    add_group_args(p, port=47000)            # --rank --peers (or --rendezvous) --port --timeout ...
    ...
    with group_from_args(args) as pg: ...
    raise SystemExit(json_main(p, run))     # run(args) -> dict with "ok"
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Sequence

from hostagent.collectives.aggregation.protocol import AGG_UDP_PORT, DEFAULT_FRAME_VALUES, FRAME_VALUES
from hostagent.collectives.aggregation.worker import JobConfig
from hostagent.collectives.group import ProcessGroup
from hostagent.collectives.reliable import HOST_PATHS, TransportConfig
from hostagent.collectives.rendezvous import rendezvous
from hostagent.stack_dump import dump_stacks_on_term

AGG_TIMEOUT_S = 0.1      # the in-network worker's first resend timeout on links not limited
AGG_MAX_RETRIES = 200


def add_group_args(p: argparse.ArgumentParser, *, port: int, timeout: float = 60.0, silent_after: float = 10.0,
                   window: int = 64, rto: float = 0.05, slots: int = 32) -> None:
    """The group's options with this program's defaults."""
    p.add_argument("--rank", type=int, required=True)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--peers", help="every rank's IP, comma-separated, in rank order")
    where.add_argument("--rendezvous", metavar="HOST:PORT",
                       help="instead of --peers: meet the other ranks at the store on HOST:PORT (rank 0 runs it)")
    p.add_argument("--world-size", type=int, help="with --rendezvous: how many ranks meet")
    p.add_argument("--address", help="with --rendezvous: this rank's IP (default: the one it reaches the store from)")
    p.add_argument("--port", type=int, default=port)
    p.add_argument("--timeout", type=float, default=timeout, help="each call's deadline, seconds")
    p.add_argument("--silent-after", type=float, default=silent_after,
                   help="seconds without a packet (heartbeats included) before a rank is declared dead")
    p.add_argument("--window", type=int, default=window, help="unacknowledged packets per peer")
    p.add_argument("--rto", type=float, default=rto, help="first retransmission timeout, seconds")
    p.add_argument("--rocev2", action="store_true",
                   help="packets RoCEv2-like (UDP 4791, a BTH, ECN-capable), for the host agents' PLB and DCQCN")
    p.add_argument("--rate-control-port", type=int, default=0,
                   help="with --rocev2: where the rates DCQCN sets arrive (127.0.0.1; 0: not paced)")
    p.add_argument("--repath", action="store_true",
                   help="a flow that loses packets moves to another path by itself (another source port; "
                        "the Python host path)")
    p.add_argument("--host-path", choices=HOST_PATHS, default=None,
                   help="the reliable transport's host path: native (C engine), python (the reference) or auto "
                        "(native where gcc builds it); default $AIFABRIC_HOST_PATH, else auto")
    p.add_argument("--aggregator", help="in-network job: the fallback aggregator's IP")
    p.add_argument("--job", type=int, help="in-network job id")
    p.add_argument("--worker-id", type=int, help="in-network: this rank's worker_id on the wire")
    p.add_argument("--slots", type=int, default=slots)
    p.add_argument("--frame-values", type=int, choices=FRAME_VALUES, default=DEFAULT_FRAME_VALUES,
                   help="in-network: values per packet, the job's (JobManager.start's frame_values)")
    p.add_argument("--agg-timeout", type=float, default=AGG_TIMEOUT_S,
                   help="in-network: a chunk's first resend timeout, seconds (doubling per resend)")


def peer_ips(args: argparse.Namespace) -> list[str]:
    """Every rank's IP in rank order; with --rendezvous, found there first (once; --peers is then set)."""
    if args.peers is None:
        if args.world_size is None:
            raise ValueError("--rendezvous needs --world-size")
        peers = rendezvous(args.rendezvous, args.rank, args.world_size, ip=args.address, port=args.port,
                           timeout_s=args.timeout)
        args.peers = ",".join(ip for ip, _ in peers)
    return [ip for ip in args.peers.split(",") if ip]


def job_from_args(args: argparse.Namespace) -> JobConfig | None:
    """This rank's in-network aggregation job, when the lab gave it one (--job)."""
    if args.job is None:
        return None
    ips = peer_ips(args)
    return JobConfig(job_id=args.job, worker_id=args.rank if args.worker_id is None else args.worker_id,
                     num_workers=len(ips), aggregator=(args.aggregator, AGG_UDP_PORT), slots=args.slots,
                     bind=(ips[args.rank], AGG_UDP_PORT), timeout=args.agg_timeout, max_retries=AGG_MAX_RETRIES,
                     frame_values=args.frame_values)


def group_from_args(args: argparse.Namespace, *, groups: list[list[int]] | None = None) -> ProcessGroup:
    transport = TransportConfig(window=args.window, rto_s=args.rto, silent_after_s=args.silent_after,
                                rocev2=args.rocev2, rate_control_port=args.rate_control_port, host_path=args.host_path,
                                repath=args.repath)
    return ProcessGroup(args.rank, [(ip, args.port) for ip in peer_ips(args)], timeout_s=args.timeout, groups=groups,
                        aggregation=job_from_args(args), transport=transport)


def json_main(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], dict],
              argv: Sequence[str] | None = None) -> int:
    """Parse, run, print the report as one JSON line; exit status 1 when it is not ok, or with one
    `error:` line on stderr when the group could not be made (an address, a bad argument)."""
    args = parser.parse_args(argv)
    dump_stacks_on_term()
    try:
        report = run(args)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1
