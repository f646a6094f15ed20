"""Traffic run from Mininet hosts: all-pairs reachability and simple flow mixes."""
from __future__ import annotations

import json
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from aifabric.lab.report import Failed, Measured
from hostagent.traffic.flows import ROCEV2_PORT
from hostagent.traffic.helper_procs import json_result as _json_result
from hostagent.traffic.helper_procs import stop

Progress = Callable[[str], None]

PACED = "hostagent.traffic.paced"      # the paced sender and its receiver

@dataclass
class Reachability:
    family: str
    results: dict[tuple[str, str], bool]
    retried: int = 0            # pairs lost while all hosts pinged, pinged again alone
    # pairs whose first echo request went unanswered (answered by a later one, or never): on a
    # loss-free fabric each is a lost packet, which the retries would otherwise hide
    needed_retry: list[tuple[str, str]] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return len(self.results)

    @property
    def reached(self) -> int:
        return sum(self.results.values())

    def failures(self) -> list[tuple[str, str]]:
        return sorted(p for p, ok in self.results.items() if not ok)


def all_pairs_ping(hosts: Sequence, addr_of: Callable[[object], str], family: str = "ipv4",
                   progress: Progress | None = None, attempts: int = 3, wait_s: int = 2) -> Reachability:
    """Ping every other host from every host; a pair counts as reached when any of
    ``attempts`` echo requests is answered.

    Paced by the fabric itself: the sources run in parallel, but each sends one echo request
    at a time and waits for its answer (or ``wait_s``, whole seconds) before the next, so at
    most one request per host is in flight and a slow but correct target is never flooded; a
    lossy one still loses pairs."""
    procs = []
    flag = "-6" if family == "ipv6" else "-4"
    for src in hosts:
        targets = " ".join(shlex.quote(addr_of(d)) for d in hosts if d is not src)
        script = (f"for d in {targets}; do r=fail; for i in $(seq {attempts}); do "
                  f"if ping {flag} -n -q -c 1 -W {int(wait_s)} $d >/dev/null 2>&1; then r=ok; break; fi; done; "
                  f"echo $r $i $d; done")
        procs.append((src, src.popen(["bash", "-c", script])))
    by_addr = {addr_of(h): h.name for h in hosts}
    results: dict[tuple[str, str], bool] = {}
    needed_retry: list[tuple[str, str]] = []
    for i, (src, proc) in enumerate(procs, 1):
        out, _ = proc.communicate()
        text = out.decode() if isinstance(out, bytes) else out
        ok = 0
        for line in text.splitlines():
            status, tries, addr = (line.split(" ", 2) + ["", ""])[:3]
            if addr in by_addr:
                results[(src.name, by_addr[addr])] = status == "ok"
                ok += status == "ok"
                if status != "ok" or tries != "1":
                    needed_retry.append((src.name, by_addr[addr]))
        if progress:
            progress(f"{family} [{i}/{len(procs)}] {src.name}: {ok}/{len(hosts) - 1} reached")
    for src in hosts:          # a host whose shell printed nothing for a target: unreached
        for dst in hosts:
            if src is not dst:
                results.setdefault((src.name, dst.name), False)
    # A pair lost while every host was pinging is tried once more on its own, and counted.
    by_name = {h.name: h for h in hosts}
    retried = [pair for pair, ok in results.items() if not ok]
    for a, b in retried:
        out = by_name[a].cmd(f"ping {flag} -n -q -c {attempts} -i 0.2 -W {int(wait_s)} {shlex.quote(addr_of(by_name[b]))}")
        received = re.search(r"(\d+) received", out)
        results[(a, b)] = bool(received) and int(received.group(1)) > 0
    if retried and progress:
        progress(f"{family}: {len(retried)} pair(s) lost in the burst, tried again one by one: "
                 f"{sum(results[p] for p in retried)} reached")
    # a pair the shell printed nothing for was tried again too
    return Reachability(family, results, retried=len(retried), needed_retry=sorted(set(needed_retry) | set(retried)))


def udp_flows(src, dst_addr: str, flows: int = 64, count: int = 20, base_port: int = 49152,
              ipv6: bool = False, interval: float = 0.02, python: str = sys.executable) -> Measured[int]:
    """Send ``count`` rounds of one datagram on each of ``flows`` UDP source ports, ``interval``
    seconds apart (a burst of ``flows`` datagrams each: gentle enough for BMv2's debug build;
    `hostagent.traffic.burst`, run by ``python``); returns datagrams sent, or `Failed` with the
    sender's last words."""
    family = 10 if ipv6 else 2
    proc = src.popen([python, "-m", "hostagent.traffic.burst", dst_addr,
                      *map(str, (family, flows, count, base_port, interval, ROCEV2_PORT))])
    out, err = _output(proc)
    if proc.returncode != 0:
        return Failed(f"UDP sender on {src.name}: {_last_line(err or out, proc)}")
    return flows * count


IPERF_PORT = 5201


def iperf_tcp(client, server, server_addr: str, seconds: int = 2, port: int = IPERF_PORT) -> Measured[float]:
    """Throughput of one TCP flow in Mbit/s as iperf3's receiver counted it, or `Failed` with
    iperf3's reason. The client starts once the server listens (on a busy machine it may take
    a while to)."""
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(port)])
    try:
        failed = _wait_tcp_listening(server, srv, port, "iperf3 server")
        if failed is not None:
            return failed
        return iperf_client(client, server_addr, port, seconds)
    finally:
        stop(srv)


def iperf_client(client, server_addr: str, port: int = IPERF_PORT, seconds: int = 2) -> Measured[float]:
    """Run the iperf3 client in ``client`` against a server at ``server_addr``:``port``: the
    receiver's Mbit/s, or `Failed` with iperf3's reason."""
    proc = client.popen(["iperf3", "-c", server_addr, "-p", str(port), "-t", str(seconds), "-J",
                         "--connect-timeout", "3000"])
    out, err = _output(proc)
    try:
        data = json.loads(out)
    except ValueError:
        return Failed(f"iperf3: {_last_line(err or out, proc)}")
    return iperf_mbps(data)


def iperf_mbps(data: dict) -> Measured[float]:
    """The receiver's Mbit/s from iperf3's JSON report (``-J``), or why there is none (iperf3
    reports its own failures in the JSON, exit status 0)."""
    if data.get("error"):
        return Failed(f"iperf3: {data['error']}")
    bps = data.get("end", {}).get("sum_received", {}).get("bits_per_second")
    if bps is None:
        return Failed("iperf3: its report has no receiver throughput")
    return round(bps / 1e6, 1)


def _wait_tcp_listening(host, proc, port: int, what: str, timeout: float = 10.0) -> Failed | None:
    """None once something listens on TCP ``port`` in ``host``; `Failed` when ``proc`` exited
    first (with what it wrote) or nothing listened within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = _output(proc)
            said = "; ".join(line.strip() for line in (err.strip() or out.strip()).splitlines())[-300:]
            return Failed(f"{what}: {said or f'exited with status {proc.returncode}'}")
        if _listening(host.cmd("cat /proc/net/tcp /proc/net/tcp6"), port):
            return None
        time.sleep(0.05)
    return Failed(f"{what} on {host.name} was not listening on port {port} after {timeout:g} s")


def _output(proc) -> tuple[str, str]:
    """A helper process's standard output and error as text (waits for it to finish)."""
    out, err = proc.communicate()
    return tuple(b.decode(errors="replace") if isinstance(b, bytes) else (b or "") for b in (out, err))


def _last_line(text: str, proc) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else f"no output, exit status {proc.returncode}"


def _listening(proc_net_tcp: str, port: int) -> bool:
    """Whether /proc/net/tcp{,6} lines show a socket in LISTEN (state 0A) on local ``port``."""
    suffix = f":{port:04X}"
    for line in proc_net_tcp.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[1].endswith(suffix) and fields[3] == "0A":
            return True
    return False


@dataclass
class SentFlow:
    sent: int
    bytes: int
    seconds: float


@dataclass
class ReceivedFlow:
    packets: int
    bytes: int
    ce: int
    corrupt: int


def start_paced_sender(host, dst_addr: str, sport: int, dport: int, rate_pps: float, count: int,
                       tos: int = 2, size: int = 200, python: str = sys.executable):
    """Start a paced UDP sender in ``host``'s namespace (`hostagent.traffic.paced`: ``count``
    datagrams at ``rate_pps`` from ``sport``, IP TOS ``tos``, 2 = ECT(0), payloads the receiver
    checks); returns the Popen."""
    return host.popen([python, "-m", PACED, "send", dst_addr, str(sport), str(dport), str(int(rate_pps)),
                       str(count), str(tos), str(size)])


def sender_result(proc) -> SentFlow:
    data = _json_result(proc, "UDP sender")
    return SentFlow(data["sent"], data["bytes"], data["seconds"])


def start_receiver(host, port: int, quiet: float = 2.0, limit: float = 60.0, ipv6: bool = False,
                   python: str = sys.executable):
    """Start the UDP receiver in ``host``'s namespace (`hostagent.traffic.paced`: datagrams,
    bytes, CE marks and corrupt payloads per source, until ``quiet`` s without one or ``limit``
    s); returns once it is bound."""
    proc = host.popen([python, "-u", "-m", PACED, "receive", str(port), str(quiet), str(limit), "1" if ipv6 else "0"])
    line = proc.stdout.readline()
    if not line.startswith(b"ready"):
        proc.kill()
        raise RuntimeError(f"UDP receiver on {host.name}:{port} did not start: {proc.stderr.read().decode()[-500:]}")
    return proc


def receiver_result(proc) -> dict[str, ReceivedFlow]:
    """Per source ``addr:port``: what the receiver got (waits for it to finish)."""
    return {k: ReceivedFlow(**v) for k, v in _json_result(proc, "UDP receiver").items()}
