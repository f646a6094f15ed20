"""Control ports closed to other machines: the lab's nftables table.

BMv2's Thrift server (table writes, queue settings, no authentication) binds every address:
``bm_runtime::start_server`` makes its ``TServerSocket`` from a port alone, and neither
``simple_switch`` nor ``simple_switch_grpc`` has an option for the address. So, before a BMv2
target starts, its Thrift port is put in the set of this table, whose one rule answers any TCP
connection to a port of the set with a reset unless it arrived on the loopback interface (a
connection from this machine to any of its own addresses arrives there)::

    table inet aifabric_control {
        set tcp_ports { type inet_service; elements = { 16001, 16002, ... } }
        chain input {
            type filter hook input priority -10; policy accept;
            iifname != "lo" tcp dport @tcp_ports reject with tcp reset
        }
    }

IPv4 and IPv6 alike (``inet``). The port leaves the set when its target stops, and the table
goes with the last port; `prune()` (run by ``aifabric clean``) drops ports that nothing listens
on any more, after a crash. The table is the lab's own: no other rule or table is touched, and
``nft list table inet aifabric_control`` shows what is closed. Every change rewrites the whole
table in one nft transaction, under a file lock, so two labs on one machine cannot lose each
other's ports and no packet ever sees a half-made table.

softswitch needs none of this: its P4Runtime and run-time control servers listen on 127.0.0.1.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Collection, Iterable, Iterator

from emulation.procs import listening_tcp_ports

TABLE = "aifabric_control"
SET = "tcp_ports"
LOCK_FILE = Path("/run/lock/aifabric-control-ports.lock")


class ControlPortError(RuntimeError):
    """The table could not be read or written; the message says why in one line."""


def _nft_path() -> str | None:
    return shutil.which("nft") or next((p for p in ("/usr/sbin/nft", "/sbin/nft") if os.access(p, os.X_OK)), None)


def _nft() -> str:
    exe = _nft_path()
    if exe is None:
        raise ControlPortError(
            "nft is not installed: BMv2's Thrift server listens on every address (it has no option "
            "for one), and the lab closes its port to other machines with an nftables rule "
            "(apt-get install nftables, or make setup)")
    return exe


def _run(args: list[str], script: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([_nft(), *args], input=script, capture_output=True, text=True, timeout=30, check=False)


@contextmanager
def _locked() -> Iterator[None]:
    lock = LOCK_FILE if LOCK_FILE.parent.is_dir() else Path("/tmp") / LOCK_FILE.name
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def closed() -> set[int]:
    """The TCP ports the table closes to other machines now (read from the kernel)."""
    res = _run(["-j", "list", "set", "inet", TABLE, SET])
    if res.returncode != 0:
        if "No such file or directory" in res.stderr:
            return set()
        raise ControlPortError(f"nft list set inet {TABLE} {SET}: {res.stderr.strip().splitlines()[-1:]}")
    ports: set[int] = set()
    for item in json.loads(res.stdout).get("nftables", []):
        for elem in item.get("set", {}).get("elem", []):
            if isinstance(elem, int):
                ports.add(elem)
            elif isinstance(elem, dict) and "range" in elem:      # never written by us; read all the same
                low, high = elem["range"]
                ports.update(range(int(low), int(high) + 1))
    return ports


def _write(ports: Collection[int]) -> None:
    if not ports:
        script = f"add table inet {TABLE}\ndelete table inet {TABLE}\n"
    else:
        elements = ", ".join(str(p) for p in sorted(ports))
        script = (
            f"add table inet {TABLE}\n"
            f"delete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n"
            f"  set {SET} {{ type inet_service; elements = {{ {elements} }}; }}\n"
            f"  chain input {{\n"
            f"    type filter hook input priority -10; policy accept;\n"
            f'    iifname != "lo" tcp dport @{SET} reject with tcp reset '
            f'comment "aifabric: switch control ports, this machine only"\n'
            f"  }}\n"
            f"}}\n"
        )
    res = _run(["-f", "-"], script)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["(no message)"])[0]
        raise ControlPortError(f"nft could not write table inet {TABLE} (ports {sorted(ports)}): {last}")


def close(ports: Iterable[int]) -> None:
    """Close ``ports`` (TCP) to every interface but loopback; ControlPortError when nft cannot."""
    wanted = {int(p) for p in ports}
    with _locked():
        now = closed()
        if not wanted <= now:
            _write(now | wanted)


def reopen(ports: Iterable[int]) -> None:
    """Take ``ports`` out of the table (deleted with its last port)."""
    unwanted = {int(p) for p in ports}
    if _nft_path() is None:
        return      # nothing can have been closed
    with _locked():
        now = closed()
        if now & unwanted:
            _write(now - unwanted)


def stale(within: Collection[int] | None = None) -> list[int]:
    """Closed ports (of ``within``, default all) on which nothing listens any more: a lab that
    crashed, or a target that was killed, before its port was reopened."""
    if _nft_path() is None:
        return []
    ports = closed()
    if within is not None:
        ports &= set(within)
    listening = set(listening_tcp_ports(ports))
    return sorted(ports - listening)


def prune(within: Collection[int] | None = None) -> list[int]:
    """Reopen the `stale` ports (of ``within``); returns them."""
    gone = stale(within)
    if gone:
        reopen(gone)
    return gone


__all__ = ["ControlPortError", "TABLE", "close", "closed", "prune", "reopen", "stale"]
