"""``python -m hostagent.traffic.burst DST FAMILY FLOWS COUNT BASE_PORT INTERVAL DPORT``: a
burst of UDP flows RoCEv2 style, the source port being the flow: ``COUNT`` rounds of one
256-byte datagram on each of ``FLOWS`` source ports from ``BASE_PORT`` up, to ``DST``:``DPORT``
(``FAMILY`` 2 for IPv4, 10 for IPv6), ``INTERVAL`` seconds apart.

`aifabric.lab.traffic.udp_flows` runs it in a host. Standard library only: any Python 3 that
finds this package runs it, the lab's own or a container's ``python3``; a failure ends it with
Python's traceback, whose last line the lab reports.
"""
from __future__ import annotations

import socket
import sys
import time
from typing import Sequence

PAYLOAD_BYTES = 256


def send_burst(dst: str, family: int, flows: int, count: int, base_port: int, interval: float, dport: int) -> None:
    socks = []
    for i in range(flows):
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind(("", base_port + i))
        socks.append(s)
    payload = bytes(PAYLOAD_BYTES)
    for _ in range(count):
        for s in socks:
            s.sendto(payload, (dst, dport))
        time.sleep(interval)


def main(argv: Sequence[str]) -> None:
    dst, family, flows, count, base, interval, dport = argv
    send_burst(dst, int(family), int(flows), int(count), int(base), float(interval), int(dport))


if __name__ == "__main__":
    main(sys.argv[1:])
