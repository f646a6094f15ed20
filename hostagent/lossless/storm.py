"""``python -m hostagent.lossless.storm``: a host that never drains, as a broken NIC or a stuck
receiver: it sends PFC PAUSE frames (one class, full quanta; the frame softswitch.pfc builds) out
of its interface every interval, for a time."""
from __future__ import annotations

import argparse
import socket
import sys
import time

from softswitch.pfc import MAX_QUANTA, class_frame


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hostagent.lossless.storm", description=__doc__.splitlines()[0])
    p.add_argument("--iface", required=True, help="the host's interface")
    p.add_argument("--priority", type=int, default=3, help="the class paused (default %(default)s)")
    p.add_argument("--quanta", type=int, default=MAX_QUANTA, help="quanta a frame asks (default %(default)s)")
    p.add_argument("--interval", type=float, default=0.02, help="seconds between frames (default %(default)s)")
    p.add_argument("--seconds", type=float, default=5.0, help="how long (default %(default)s)")
    args = p.parse_args(argv)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    with open(f"/sys/class/net/{args.iface}/address") as f:
        source = bytes.fromhex(f.read().strip().replace(":", ""))
    frame = class_frame(source, args.priority, args.quanta)
    sent, end = 0, time.monotonic() + args.seconds
    while time.monotonic() < end:
        s.send(frame)
        sent += 1
        time.sleep(args.interval)
    print(f"{sent} PAUSE frames of class {args.priority} sent", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
