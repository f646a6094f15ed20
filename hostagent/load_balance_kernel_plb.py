"""The kernel's own PLB (net/ipv4/tcp_plb.c), the real peer of the host agents' PLB.

Linux repaths a TCP flow itself - a new txhash, so a new IPv6 flow label, which the fabric's ECMP
hashes - after N congested rounds, counted by DCTCP from the ECN echoes; ``net.ipv4.
tcp_plb_enabled=1`` turns it on, per network namespace, with the N, M, K and RTO hold the agents
take too (`hostagent.agent.load_balance_plb.PlbParams`). It runs under DCTCP only and moves IPv6 flows only
(the label is all it changes), so a run needs TCP over IPv6 with DCTCP and ECN in every sending
host: `unavailable()` says why a kernel cannot, `enable()` sets a host up, `rehashes()` reads
how many times the kernel repathed (TcpExt TCPPLBRehash).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Protocol

from hostagent.agent.load_balance_plb import PlbParams
from hostagent.traffic.flows import FlowSpec

SYSCTL_DIR = Path("/proc/sys/net/ipv4")


class Shell(Protocol):
    """A host to run commands in (a Mininet host: ``cmd`` returns the output)."""

    name: str

    def cmd(self, command: str) -> str: ...


def unavailable(sysctl_dir: Path = SYSCTL_DIR) -> str | None:
    """Why this kernel cannot run its PLB, or None when it can."""
    if not (sysctl_dir / "tcp_plb_enabled").exists():
        return "this kernel has no PLB (no net.ipv4.tcp_plb_enabled; Linux 6.2 or later has it)"
    available = (sysctl_dir / "tcp_available_congestion_control").read_text().split()
    if "dctcp" not in available:
        return (f"DCTCP is not available (net.ipv4.tcp_available_congestion_control: {' '.join(available)}) "
                f"and the kernel's PLB runs only under DCTCP")
    return None


def sysctls(params: PlbParams) -> dict[str, str]:
    """What `enable` sets, in order: PLB's own settings first, DCTCP and ECN last."""
    return {
        "net.ipv4.tcp_plb_rehash_rounds": str(params.rehash_rounds),
        "net.ipv4.tcp_plb_idle_rehash_rounds": str(params.idle_rehash_rounds),
        "net.ipv4.tcp_plb_cong_thresh": str(params.cong_thresh),
        "net.ipv4.tcp_plb_suspend_rto_sec": str(round(params.suspend_rto_sec)),   # whole seconds in the kernel
        "net.ipv4.tcp_plb_enabled": "1",
        "net.ipv4.tcp_ecn": "1",
        "net.ipv4.tcp_congestion_control": "dctcp",
    }


def _sysctl(host: Shell, key: str, value: str) -> None:
    out = host.cmd(f"sysctl -q -w {key}={value} 2>&1; echo rc=$?").strip()
    if not out.endswith("rc=0"):
        raise RuntimeError(f"{host.name}: sysctl {key}={value} failed: {out.rsplit('rc=', 1)[0].strip() or out}")


def enable(host: Shell, params: PlbParams) -> None:
    """The kernel's PLB on for new TCP connections of ``host``'s namespace; RuntimeError naming
    the setting that failed."""
    for key, value in sysctls(params).items():
        _sysctl(host, key, value)


def disable(host: Shell) -> None:
    _sysctl(host, "net.ipv4.tcp_plb_enabled", "0")


def rehashes(host: Shell) -> int:
    """Times the kernel repathed a connection in ``host``'s namespace (TcpExt TCPPLBRehash)."""
    lines = [ln.split() for ln in host.cmd("cat /proc/net/netstat").splitlines() if ln.startswith("TcpExt:")]
    if len(lines) != 2:
        raise RuntimeError(f"{host.name}: /proc/net/netstat has no TcpExt table")
    names, values = lines
    if "TCPPLBRehash" not in names:
        raise RuntimeError(f"{host.name}: this kernel counts no TCPPLBRehash in /proc/net/netstat")
    return int(values[names.index("TCPPLBRehash")])


def as_tcp(flows: list[FlowSpec]) -> list[FlowSpec]:
    """The same flows (hosts, ports, start) as TCP streams of the bytes the datagrams carried."""
    return [dataclasses.replace(f, protocol="tcp", size=f.size * f.payload) for f in flows]
