"""A paced UDP flow and a receiver that checks it, for the lab's demos and benchmarks
(`aifabric.lab.traffic` starts them in hosts)::

    python -m hostagent.traffic.paced send DST SPORT DPORT RATE_PPS COUNT TOS SIZE
    python -u -m hostagent.traffic.paced receive PORT QUIET LIMIT V6

send: ``COUNT`` datagrams of ``SIZE`` bytes at ``RATE_PPS`` a second from source port
``SPORT``, IP TOS (IPv6 traffic class) ``TOS`` (2 = ECT(0)); each payload is a 4-byte sequence
number and bytes derived from it, so the receiver can check every datagram arrived unchanged.
Prints ``{"sent", "bytes", "seconds"}``.

receive: prints ``ready`` once bound to UDP ``PORT`` (IPv6 when ``V6`` is 1), then counts
datagrams and payload bytes per source ``address:port``, those whose ECN field says CE, and
those whose payload is not what the sender sent; stops ``QUIET`` s after the last datagram or
after ``LIMIT`` s, and prints ``{source: {"packets", "bytes", "ce", "corrupt"}}``.

Standard library only: any Python 3 that finds this package runs it, the lab's own or a
container's ``python3``; a failure ends it with Python's traceback.
"""
from __future__ import annotations

import json
import socket
import struct
import sys
import time
from typing import Sequence

SEQ = struct.Struct("!I")


def pattern(seq: int, n: int) -> bytes:
    """The ``n`` payload bytes after datagram ``seq``'s sequence number."""
    return bytes((seq + i) & 0xFF for i in range(n))


def send(dst: str, sport: int, dport: int, rate: int, count: int, tos: int, size: int) -> dict:
    family = socket.AF_INET6 if ":" in dst else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP if family == socket.AF_INET else socket.IPPROTO_IPV6,
                 socket.IP_TOS if family == socket.AF_INET else socket.IPV6_TCLASS, tos)
    s.bind(("", sport))
    sent = nbytes = 0
    start = time.monotonic()
    for seq in range(count):
        payload = SEQ.pack(seq) + pattern(seq, size - 4)
        delay = start + seq / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        nbytes += s.sendto(payload, (dst, dport))
        sent += 1
    return {"sent": sent, "bytes": nbytes, "seconds": time.monotonic() - start}


def receive(port: int, quiet: float, limit: float, v6: bool) -> dict:
    family = socket.AF_INET6 if v6 else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    if v6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    else:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("", port))
    print("ready", flush=True)
    flows: dict[str, dict[str, int]] = {}
    start = time.monotonic()
    last = None
    while True:
        now = time.monotonic()
        if now - start > limit or (last is not None and now - last > quiet):
            break
        s.settimeout(0.1)
        try:
            data, anc, _, addr = s.recvmsg(65535, socket.CMSG_SPACE(4))
        except socket.timeout:
            continue
        last = time.monotonic()
        tos = anc[0][2][0] if anc else 0
        f = flows.setdefault(f"{addr[0]}:{addr[1]}", {"packets": 0, "bytes": 0, "ce": 0, "corrupt": 0})
        f["packets"] += 1
        f["bytes"] += len(data)
        f["ce"] += (tos & 3) == 3
        if len(data) >= 4:
            seq = SEQ.unpack(data[:4])[0]
            if data[4:] != pattern(seq, len(data) - 4):
                f["corrupt"] += 1
    return flows


def main(argv: Sequence[str]) -> None:
    command, *args = argv
    if command == "send":
        dst, *numbers = args
        result = send(dst, *map(int, numbers))
    elif command == "receive":
        port, quiet, limit, v6 = args
        result = receive(int(port), float(quiet), float(limit), v6 == "1")
    else:
        raise SystemExit(f"usage: python -m hostagent.traffic.paced send|receive ...: not {command!r}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
