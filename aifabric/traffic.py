"""Traffic run from Mininet hosts: all-pairs reachability and simple flow mixes."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable, Sequence

Progress = Callable[[str], None]

# A UDP sender run inside a host namespace with the system Python: ``count`` datagrams on each
# of ``flows`` source ports (RoCEv2 style: destination port 4791, the source port is the flow).
_UDP_FLOWS = r"""
import socket, sys, time
dst, family, flows, count, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
socks = []
for i in range(flows):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind(("", base + i))
    socks.append(s)
payload = bytes(256)
for _ in range(count):
    for s in socks:
        s.sendto(payload, (dst, 4791))
    time.sleep(0.001)
"""


@dataclass
class Reachability:
    family: str
    results: dict[tuple[str, str], bool]

    @property
    def pairs(self) -> int:
        return len(self.results)

    @property
    def reached(self) -> int:
        return sum(self.results.values())

    def failures(self) -> list[tuple[str, str]]:
        return sorted(p for p, ok in self.results.items() if not ok)


def all_pairs_ping(hosts: Sequence, addr_of: Callable[[object], str], family: str = "ipv4",
                   progress: Progress | None = None, attempts: int = 3) -> Reachability:
    """Ping every other host from every host (in parallel per source); a pair counts as
    reached when any of ``attempts`` echo requests is answered."""
    procs = []
    flag = "-6" if family == "ipv6" else "-4"
    for src in hosts:
        targets = " ".join(shlex.quote(addr_of(d)) for d in hosts if d is not src)
        script = (f"for d in {targets}; do (ping {flag} -n -q -c {attempts} -i 0.2 -W 2 $d >/dev/null 2>&1 "
                  f"&& echo ok $d || echo fail $d) & done; wait")
        procs.append((src, src.popen(["bash", "-c", script])))
    by_addr = {addr_of(h): h.name for h in hosts}
    results: dict[tuple[str, str], bool] = {}
    for i, (src, proc) in enumerate(procs, 1):
        out, _ = proc.communicate()
        text = out.decode() if isinstance(out, bytes) else out
        ok = 0
        for line in text.splitlines():
            status, _, addr = line.partition(" ")
            if addr in by_addr:
                results[(src.name, by_addr[addr])] = status == "ok"
                ok += status == "ok"
        if progress:
            progress(f"{family} [{i}/{len(procs)}] {src.name}: {ok}/{len(hosts) - 1} reached")
    for src in hosts:          # a host whose shell printed nothing for a target: unreached
        for dst in hosts:
            if src is not dst:
                results.setdefault((src.name, dst.name), False)
    return Reachability(family, results)


def udp_flows(src, dst_addr: str, flows: int = 64, count: int = 20, base_port: int = 49152,
              ipv6: bool = False) -> int:
    """Send ``count`` datagrams on each of ``flows`` UDP source ports; returns datagrams sent."""
    family = 10 if ipv6 else 2
    src.cmd(f"python3 -c {shlex.quote(_UDP_FLOWS)} {dst_addr} {family} {flows} {count} {base_port}")
    return flows * count


def iperf_tcp(client, server, server_addr: str, seconds: int = 2) -> float:
    """Throughput of one TCP flow in Mbit/s (iperf3), 0 when it failed."""
    srv = server.popen(["iperf3", "-s", "-1", "-p", "5201"])
    try:
        out = client.cmd(f"iperf3 -c {server_addr} -p 5201 -t {seconds} -f m --connect-timeout 3000 2>&1")
    finally:
        srv.terminate()
        srv.wait()
    m = re.findall(r"([\d.]+) Mbits/sec\s+\S*\s*receiver", out)
    return float(m[-1]) if m else 0.0
