"""``hostagent``: the host agent of one (Mininet) host, in the host's network namespace.

    hostagent plb [--round-ms 20] [--rehash-rounds 12] [--idle-rehash-rounds 3] [--cong-thresh 128] ...
    hostagent dcqcn [--line-rate 10M] [--cnp-interval-us ...] ...
    hostagent plb+dcqcn ...
    hostagent params --line-rate 10M          DCQCN's parameters scaled to that line rate, as JSON

It attaches its TC programs, prints ``ready {"iface": ..., "bpf": {"prog": [ids], "map": [ids]}}``
and runs until SIGTERM, SIGINT or SIGHUP, then detaches everything and exits 0. Counters go to
``--stats FILE`` (JSON, `hostagent.agent.stats`). Exit status 1 when it could not start or
detach (the message says why), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Sequence

from hostagent.agent.config import DEFAULT_LINE_RATE_BPS, MODES, add_arguments, from_args, parse_rate
from hostagent.agent.dcqcn import DcqcnParams
from softswitch.signal_stop import STOP_SIGNALS, SignalStop

READY = "ready"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hostagent", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for mode in MODES:
        p = sub.add_parser(mode, help=f"run the agent in mode {mode}")
        p.add_argument("--host", help="the host's name in stats (default: the machine's)")
        add_arguments(p)
    p = sub.add_parser("params", help="print DCQCN's parameters scaled to a line rate")
    p.add_argument("--line-rate", type=parse_rate, default=DEFAULT_LINE_RATE_BPS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "params":
        params = DcqcnParams().scaled(args.line_rate)
        print(json.dumps({**asdict(params), "time_scale": params.time_scale}))
        return 0
    try:
        config = from_args(args.command, args)
    except ValueError as err:
        parser.error(str(err))
    if os.geteuid() != 0:
        print("hostagent: error: must run as root (BPF, TC)", file=sys.stderr)
        return 1
    from hostagent.agent.agent import Agent

    stop = SignalStop(STOP_SIGNALS)
    agent = Agent(config, host=args.host)
    status = 0
    try:
        ids = agent.start()
        print(f"{READY} {json.dumps({'iface': agent.iface, 'bpf': ids})}", flush=True)
        agent.run(stop)
    except Exception as err:            # noqa: BLE001 - said on stderr, status 1
        print(f"hostagent: error: {err}", file=sys.stderr)
        status = 1
    finally:
        try:
            agent.close()
        except Exception as err:        # noqa: BLE001
            print(f"hostagent: error: {err}", file=sys.stderr)
            status = 1
    return status
