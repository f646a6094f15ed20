"""`python -m hostagent.traffic send|receive ...`: one traffic process, e.g. in a Mininet host.

send: sends the flows of a JSON list (`hostagent.traffic.flows.WireFlow` objects) from this
host, all starting at --start-at, and prints one JSON line (`hostagent.traffic.sender.Sent`).
Exit status 1 when a flow failed (its record says why), 2 on bad arguments.

receive: prints ``ready`` once its ports are bound, counts until its end (complete, quiet,
deadline or SIGTERM/SIGINT) and prints one JSON line (`hostagent.traffic.receiver.Received`).
Times in both are CLOCK_REALTIME seconds since the epoch.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Sequence

from hostagent.congestion import CcSettings
from hostagent.traffic.flows import ROCEV2_PORT, TCP_PORT, WireFlow
from hostagent.traffic.receiver import Receiver, ReceiverConfig
from hostagent.traffic.sender import Impairments, run_sender


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hostagent.traffic", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("send", help="send this host's flows")
    s.add_argument("--flows", required=True,
                   help="the flows: a JSON list, @FILE holding one, or - to read it from stdin; each object has "
                        "id, protocol (udp|tcp), dst_addr, sport, dport, size (datagrams|bytes) and optionally "
                        "start (s), payload (bytes per datagram), rate_pps")
    s.add_argument("--start-at", type=float, default=None,
                   help="CLOCK_REALTIME seconds since the epoch at which the flows' start offsets count (default: now)")
    s.add_argument("--tcp-timeout", type=float, default=30.0, help="seconds a TCP connect, send or answer may take")
    s.add_argument("--swap-every", type=int, default=0,
                   help="testing: send sequence numbers q+1 before q for every multiple q of K")
    s.add_argument("--drop-every", type=int, default=0, help="testing: skip sequence numbers K-1, 2K-1, ...")
    s.add_argument("--rate-control-port", type=int, default=0,
                   help="take UDP flow rates from rate-control messages on 127.0.0.1:PORT (a host agent's "
                        "DCQCN; see hostagent.traffic.ratecontrol); 0: off")
    s.add_argument("--pause", default=None, metavar="MAP_ID:HOST_ID",
                   help="hold a UDP flow while its class (its priority) is paused by 802.1Qbb PFC, as a NIC "
                        "holds its queue: the host's pause state (hostagent.lossless.HostPause.sender_arg)")

    s.add_argument("--cc", default=None, metavar="JSON",
                   help="run every UDP flow under a host congestion control: "
                        '{"name": "timely"|"swift", "link_bps": B, "base_rtt_s": S} '
                        "(hostagent.congestion.CcSettings); the receivers acknowledge its datagrams")

    r = sub.add_parser("receive", help="count the flows arriving at this host")
    r.add_argument("--udp-port", type=int, action="append", default=None,
                   help=f"UDP port to receive on (repeatable; default {ROCEV2_PORT} when no port is given)")
    r.add_argument("--tcp-port", type=int, action="append", default=None,
                   help=f"TCP port to accept on (repeatable; default {TCP_PORT} when no port is given)")
    r.add_argument("--quiet", type=float, default=2.0, help="end this many seconds after the last packet")
    r.add_argument("--deadline", type=float, default=60.0, help="end after this many seconds in any case")
    r.add_argument("--expect", type=int, default=None,
                   help="flows to expect: end once that many are complete; quiet counts only once all began")
    r.add_argument("--reorder-buffer", action="store_true",
                   help="deliver UDP datagrams in order through a reordering buffer (SRD-style) and report it")
    return parser


def _read_flows(text: str) -> list[WireFlow]:
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    data = json.loads(text)
    if not isinstance(data, list) or not data:
        raise ValueError("--flows must be a non-empty JSON list of flow objects")
    return [WireFlow.from_dict(d) for d in data]


def _send(args: argparse.Namespace) -> int:
    flows = _read_flows(args.flows)
    start_at = time.time() if args.start_at is None else args.start_at
    pause = None
    if args.pause:
        from hostagent.lossless.pause import PauseReader
        pause = PauseReader.from_arg(args.pause)
    sent = run_sender(flows, start_at, impair=Impairments(args.swap_every, args.drop_every),
                      tcp_timeout=args.tcp_timeout, rate_control_port=args.rate_control_port, pause=pause,
                      cc=CcSettings.from_arg(args.cc) if args.cc else None)
    print(json.dumps(sent.to_dict()), flush=True)
    return 1 if any(f.error for f in sent.flows) else 0


def _receive(args: argparse.Namespace) -> int:
    udp, tcp = args.udp_port, args.tcp_port
    if udp is None and tcp is None:
        udp, tcp = [ROCEV2_PORT], [TCP_PORT]
    receiver = Receiver(ReceiverConfig(udp or [], tcp or [], args.quiet, args.deadline, args.expect,
                                       args.reorder_buffer))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: receiver.stop())
    try:
        print("ready", flush=True)
        received = receiver.run()
    finally:
        receiver.close()
    print(json.dumps(received.to_dict()), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _send(args) if args.command == "send" else _receive(args)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
