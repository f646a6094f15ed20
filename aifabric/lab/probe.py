"""A steady stream of numbered UDP probes and its receiver, for failover measurements.

    python -m aifabric.lab.probe recv --port 7000 --seconds 8 --out FILE
    python -m aifabric.lab.probe send --dst 10.3.1.2 --port 7000 --sport 40000 --rate 1000 --seconds 6 --out FILE

Run inside Mininet hosts. Every probe carries its sequence number and its send time; the
receiver records, per probe, (sequence, send time, arrival time), all in nanoseconds of
CLOCK_MONOTONIC, which every network namespace of the machine shares: the benchmark lines
them up with the injector's timestamps (`aifabric.lab.failures.FailureEvent`). The sender paces to
absolute deadlines (a late probe does not shift the ones after it) and writes how many it sent
and how late it ran at worst. Both write one JSON object to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from dataclasses import dataclass

HEADER = struct.Struct("!IQ")       # sequence number, send time (ns, CLOCK_MONOTONIC)


@dataclass(frozen=True)
class Arrival:
    seq: int
    sent_ns: int
    arrived_ns: int


def receive(port: int, seconds: float) -> list[Arrival]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    out: list[Arrival] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        now = time.monotonic_ns()
        if len(data) >= HEADER.size:
            seq, sent = HEADER.unpack_from(data)
            out.append(Arrival(seq, sent, now))
    return out


def send(dst: str, port: int, sport: int, rate: float, seconds: float, payload: int) -> dict:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", sport))
    pad = b"\0" * max(0, payload - HEADER.size)
    count = int(rate * seconds)
    interval = 1e9 / rate
    start = time.monotonic_ns()
    late = 0
    errors = 0
    for seq in range(count):
        due = start + int(seq * interval)
        now = time.monotonic_ns()
        if due > now:
            time.sleep((due - now) / 1e9)
        else:
            late = max(late, now - due)
        try:
            sock.sendto(HEADER.pack(seq, time.monotonic_ns()) + pad, (dst, port))
        except OSError:         # no route / buffer full: the probe is lost, like on the wire
            errors += 1
    return {"sent": count, "start_ns": start, "rate": rate, "worst_late_ms": late / 1e6, "send_errors": errors}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="aifabric.lab.probe", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--sport", type=int, required=True)
    s.add_argument("--rate", type=float, required=True)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--payload", type=int, default=64)
    s.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "recv":
        arrivals = receive(args.port, args.seconds)
        result: dict = {"arrivals": [[a.seq, a.sent_ns, a.arrived_ns] for a in arrivals]}
    else:
        result = send(args.dst, args.port, args.sport, args.rate, args.seconds, args.payload)
    with open(args.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
