"""What of a running lab other machines could reach: its TCP listeners in this machine's network
namespace (read from /proc, as ``ss -ltnp`` shows them) and a probe from "another machine": a
network namespace joined to this one by a veth pair, as a neighbour on a LAN is joined by a
cable, connecting to this machine's address on that link.

Addresses of the link: 10.252.0.1/30 and fd00:252::1/126 here, .2 and ::2 in the namespace.
"""
from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from emulation.procs import snapshot

HERE4, THERE4 = "10.252.0.1", "10.252.0.2"
HERE6, THERE6 = "fd00:252::1", "fd00:252::2"


@dataclass(frozen=True)
class Listener:
    address: str        # as bound: "0.0.0.0", "::", "127.0.0.1", ...
    port: int
    pid: int
    argv: str

    @property
    def wildcard(self) -> bool:
        addr = ipaddress.ip_address(self.address)
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return addr.is_unspecified

    def __str__(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port} (pid {self.pid} {self.argv})"


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    # /proc/net/tcp6: four 32-bit words, each in host (little-endian) order
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


def _listening_inodes() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket in this network namespace."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if len(f) > 9 and f[3] == "0A":
                addr, port = f[1].rsplit(":", 1)
                found[int(f[9])] = (_address(addr), int(port, 16))
    return found


def tcp_listeners(pids: Iterable[int]) -> list[Listener]:
    """The listening TCP sockets (this network namespace) that processes ``pids`` hold."""
    inodes = _listening_inodes()
    argv = {p.pid: " ".join(p.argv[:3])[:100] for p in snapshot()}
    argv.setdefault(os.getpid(), " ".join(sys.argv[:2])[:100])
    out = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    out.add(Listener(*inodes[inode], pid, argv.get(pid, "?")))
    return sorted(out, key=lambda l: (l.port, l.address, l.pid))


def lab_pids(run_dir: Path) -> list[int]:
    """This process (a lab runs its controller in the process that made it) and every process
    carrying the lab's marker (targets, node shells, what runs in them), in this network namespace."""
    me = os.stat("/proc/self/ns/net").st_ino
    lab = str(run_dir.resolve())
    return [os.getpid(), *(p.pid for p in snapshot() if p.lab == lab and p.netns == me)]


@contextmanager
def outside_namespace(tag: str | None = None) -> Iterator[str]:
    """A network namespace standing for another machine, linked to this one (yields its name)."""
    tag = tag or f"xo{os.getpid() % 100000}"
    ns, here, there = tag, f"{tag}h", f"{tag}t"

    def ip(*args: str, check: bool = True) -> None:
        subprocess.run(["ip", *args], check=check, capture_output=True, timeout=30)

    ip("netns", "del", ns, check=False)
    ip("link", "del", here, check=False)
    try:
        ip("netns", "add", ns)
        ip("link", "add", here, "type", "veth", "peer", "name", there)
        ip("link", "set", there, "netns", ns)
        ip("addr", "add", f"{HERE4}/30", "dev", here)
        ip("-6", "addr", "add", f"{HERE6}/126", "dev", here, "nodad")
        ip("link", "set", here, "up")
        ip("-n", ns, "addr", "add", f"{THERE4}/30", "dev", there)
        ip("-n", ns, "-6", "addr", "add", f"{THERE6}/126", "dev", there, "nodad")
        ip("-n", ns, "link", "set", there, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        yield ns
    finally:
        ip("link", "del", here, check=False)
        ip("netns", "del", ns, check=False)


_PROBE = r"""
import json, socket, sys
out = {}
for family, host, port in json.loads(sys.argv[1]):
    s = socket.socket(socket.AF_INET6 if family == 6 else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(float(sys.argv[2]))
    try:
        s.connect((host, port))
        out[f"{family} {port}"] = "accepted"
    except ConnectionRefusedError:
        out[f"{family} {port}"] = "refused"
    except OSError as err:
        out[f"{family} {port}"] = type(err).__name__
    finally:
        s.close()
print(json.dumps(out))
"""


def probe_from(ns: str, ports: Iterable[int], timeout: float = 1.0) -> dict[tuple[int, int], str]:
    """Connect from namespace ``ns`` to this machine's link addresses (IPv4 and IPv6) on every
    port; (family 4|6, port) -> "accepted", "refused", or the error (e.g. "TimeoutError")."""
    targets = [(fam, host, p) for p in sorted(set(ports)) for fam, host in ((4, HERE4), (6, HERE6))]
    res = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", _PROBE, json.dumps(targets), str(timeout)],
                         capture_output=True, text=True, timeout=30 + 2 * timeout * len(targets))
    if res.returncode != 0:
        raise RuntimeError(f"probe from {ns} failed: {res.stderr.strip()}")
    return {(int(k.split()[0]), int(k.split()[1])): v for k, v in json.loads(res.stdout).items()}


@contextmanager
def wildcard_listener() -> Iterator[int]:
    """A TCP listener on every address (IPv6 and IPv4), closed by no rule: a port the probe must
    reach, so a probe that reaches nothing is seen to be broken rather than taken for safety."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", 0))
    s.listen(8)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()
