"""Finding and removing what aifabric's labs leave on the machine: `leftovers()` looks, touching
nothing; `cleanup()` removes.

Every process a lab starts carries the lab's markers in its environment (`emulation.procs`):
the targets (`emulation.p4switch`), and through `MarkedNode` the node shells and whatever runs in
them. `cleanup()` finds a lab's processes by them (also by pid file and by log file under the run
directory), kills them all at once with one deadline, kills every process left in a fabric host's
network namespace (so the namespace goes), deletes the interfaces in one netlink session, and
repeats until `leftovers()` finds nothing. BMv2 Thrift ports closed to other machines
(`emulation.control_ports`) on which nothing listens any more are reopened. OVS is never called.

softswitch's AF_XDP port I/O leaves nothing of its own to find: its XDP programs are attached by
BPF links, which the kernel detaches when the switch process ends however it ends (SIGKILL too),
and its sockets and pinned frames go with the process; an XDP program left on an interface by
something else goes when the interface is deleted, and a switch started on one replaces it
(softswitch/native/xsk.py).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from emulation import control_ports
from emulation.p4switch import BMV2, RUN_DIR, SOFTSWITCH, THRIFT_PORT_BASE
from emulation.procs import Proc, interfaces_in_netns_of, listening_tcp_ports, own_netns, snapshot, stop_processes
from topologies import addressing as ap

# Node names of aifabric's topologies (see topologies.addressing and topologies.ai_fabrics: rail
# r{g}, s{s}g{g}; dual-plane p{p}l{i}, p{p}s{j}, t{i}h{h}; dragonfly g{x}r{r}, g{x}r{r}h{h}).
SWITCH_NAME = rf"(?:p\d+[ea]\d+|c\d+|l\d+|s\d+|r\d+|p\d+[ls]\d+|g\d+r\d+|{ap.TELEMETRY_BRIDGE})"
HOST_NAME = r"(?:p\d+e\d+h\d+|l\d+h\d+|s\d+g\d+|t\d+h\d+|g\d+r\d+h\d+)"
_FABRIC_INTF = re.compile(rf"^{SWITCH_NAME}-eth\d+$|^{HOST_NAME}-eth\d+$")


# Ports a leftover target would still listen on: P4Runtime (the range bootstrap reserves) and
# run-time control.
FABRIC_PORTS = range(ap.GRPC_PORT_BASE, ap.GRPC_PORT_BASE + 1000)
RUNTIME_PORTS = range(THRIFT_PORT_BASE, THRIFT_PORT_BASE + 1000)


@dataclass
class Leftovers:
    """What aifabric left on the machine (nothing when every list is empty)."""

    processes: list[str] = field(default_factory=list)    # "pid argv..."
    namespaces: list[str] = field(default_factory=list)   # "netns INODE (node, ...)"
    interfaces: list[str] = field(default_factory=list)   # root-namespace interfaces
    ports: list[int] = field(default_factory=list)        # listening TCP ports
    closed_ports: list[int] = field(default_factory=list)  # control-port rules with no listener left

    def __bool__(self) -> bool:
        return bool(self.processes or self.namespaces or self.interfaces or self.ports or self.closed_ports)

    def describe(self) -> str:
        """One line naming what is left, or "nothing"."""
        parts = []
        for label, items in (("processes", self.processes), ("network namespaces", self.namespaces),
                             ("interfaces", self.interfaces), ("listening ports", [str(p) for p in self.ports]),
                             (f"ports closed by nft table inet {control_ports.TABLE}",
                              [str(p) for p in self.closed_ports])):
            if items:
                more = f", ... ({len(items) - 6} more)" if len(items) > 6 else ""
                parts.append(f"{len(items)} {label} ({', '.join(items[:6])}{more})")
        return "; ".join(parts) or "nothing"


@dataclass
class CleanupReport:
    killed: list[str] = field(default_factory=list)
    links_deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    remaining: Leftovers = field(default_factory=Leftovers)   # what the last check still found

    def __bool__(self) -> bool:
        """True when something was left or went wrong."""
        return bool(self.remaining or self.errors)

    def describe(self, where: str = "on this machine") -> str:
        """What the cleanup did and found, in sentences, with a table of what it stopped and deleted."""
        if not (self.killed or self.links_deleted or self.errors or self.remaining):
            return f"Nothing of aifabric's was left {where}."
        lines = [f"Stopped {len(self.killed)} processes and deleted {len(self.links_deleted)} interfaces."]
        rows = [("process", what) for what in self.killed] + [("interface", name) for name in self.links_deleted]
        if rows:
            width = max(len(kind) for kind, _ in rows)
            lines += [f"  {kind.ljust(width)}  {what}" for kind, what in rows]
        lines += [f"Error: {e}" for e in self.errors]
        lines.append(f"Still left: {self.remaining.describe()}." if self.remaining else "Nothing is left.")
        return "\n".join(lines)


def _is_aifabric_target(argv: Sequence[str], run_dir: Path) -> bool:
    """A target process whose log file lies under ``run_dir`` (how aifabric starts them)."""
    if not _is_target(argv) or "--device-id" not in argv:
        return False
    for i, arg in enumerate(argv[:-1]):
        if arg == "--log-file" and Path(argv[i + 1]).is_relative_to(run_dir):
            return True
    return False


def _is_target(argv: Sequence[str]) -> bool:
    return any(Path(a).name in (BMV2, SOFTSWITCH) for a in argv[:3])


def _is_fabric_host_shell(argv: Sequence[str]) -> bool:
    """A Mininet node shell (``bash ... mininet:<name>``) of an aifabric node."""
    return re.fullmatch(f"{SWITCH_NAME}|{HOST_NAME}", _node_of_shell(argv)) is not None


def _node_of_shell(argv: Sequence[str]) -> str:
    return next((a[len("mininet:") :] for a in argv if a.startswith("mininet:")), "")


def _node_of_intf(name: str) -> str | None:
    """The node an aifabric-named interface belongs to (``tnet`` for the bridge itself)."""
    if name == ap.TELEMETRY_BRIDGE:
        return name
    return name.rsplit("-eth", 1)[0] if _FABRIC_INTF.match(name) else None


def _target_node(p: Proc, recorded: dict[int, str]) -> str:
    """The switch a target process runs: its marker, its pid file, or its log file's name."""
    if p.node:
        return p.node
    if p.pid in recorded:
        return recorded[p.pid]
    log = next((p.argv[i + 1] for i, a in enumerate(p.argv[:-1]) if a == "--log-file"), "")
    return Path(log).name.split(".")[0]


def _pid_file_targets(run_dir: Path) -> dict[int, str]:
    """Live target processes recorded in ``<run_dir>/pids``."""
    found = {}
    pid_dir = run_dir / "pids"
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.is_dir() else []:
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        found[pid] = pid_file.stem
    return found


@dataclass
class _Survey:
    """One look at the machine: aifabric's processes (targets to SIGTERM, the rest to SIGKILL),
    the fabric hosts' network namespaces and the root-namespace interfaces."""

    targets: dict[int, str] = field(default_factory=dict)
    others: dict[int, str] = field(default_factory=dict)
    namespaces: dict[int, set[str]] = field(default_factory=dict)   # netns inode -> its nodes
    interfaces: list[str] = field(default_factory=list)


def _survey(run_dir: Path, wanted: Callable[[str], bool]) -> _Survey:
    procs = snapshot()
    by_pid = {p.pid: p for p in procs}
    spared, pid = set(), os.getppid()
    while pid > 1 and pid not in spared:     # never this process's own ancestors
        spared.add(pid)
        pid = by_pid[pid].ppid if pid in by_pid else 0
    recorded = _pid_file_targets(run_dir)
    root, lab = own_netns(), str(run_dir)
    survey = _Survey()

    def another_labs(p: Proc) -> bool:
        """Marked by another lab (labs side by side, `aifabric.lab.named_labs`): never ours, nor
        is the namespace it runs in, whatever its interfaces are called."""
        return p.lab is not None and p.lab != lab

    foreign = {p.netns for p in procs if another_labs(p)}

    def ours(p: Proc) -> str | None:
        """The node ``p`` belongs to when it is aifabric's and wanted (else None)."""
        if p.lab == lab and p.node is not None and wanted(p.node):
            return p.node
        node = _node_of_shell(p.argv)
        return node if _is_fabric_host_shell(p.argv) and wanted(node) else None

    checked: set[int] = set()
    for p in procs:
        if p.pid in spared or another_labs(p):
            continue
        if _is_target(p.argv) and (p.pid in recorded or p.lab == lab or _is_aifabric_target(p.argv, run_dir)):
            if wanted(_target_node(p, recorded)):
                survey.targets[p.pid] = p.describe()
            continue
        node = ours(p)
        if node is not None:
            survey.others[p.pid] = p.describe()
            if p.netns and p.netns != root:
                survey.namespaces.setdefault(p.netns, set()).add(node)
        elif p.netns and p.netns not in (root, *foreign) and p.netns not in survey.namespaces and p.netns not in checked:
            checked.add(p.netns)   # a namespace of ours may hold only strays: know it by its interfaces
            nodes = {n for n in map(_node_of_intf, interfaces_in_netns_of(p.pid)) if n and wanted(n)}
            if nodes:
                survey.namespaces[p.netns] = nodes
    for p in procs:        # everything inside a fabric host's namespace goes with it
        if p.netns in survey.namespaces and p.pid not in survey.targets and p.pid not in spared:
            survey.others.setdefault(p.pid, p.describe())
    survey.interfaces = [n for n in _root_links() if (node := _node_of_intf(n)) is not None and wanted(node)]
    return survey


def _root_links() -> list[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return [link.get("ifname") for link in ipr.get_links()]


def _delete_links(names: Iterable[str], report: CleanupReport) -> None:
    """Delete root-namespace interfaces in one netlink session (a veth's peer goes with it)."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    with IPRoute() as ipr:
        for name in names:
            index = ipr.link_lookup(ifname=name)
            if not index:
                continue      # gone already, with its peer or its namespace
            try:
                ipr.link("del", index=index[0])
                report.links_deleted.append(name)
            except NetlinkError as err:
                if err.code != errno.ENODEV:
                    report.errors.append(f"deleting interface {name}: {err}")


def leftovers(run_dir: Path | None = None, *, nodes: Iterable[str] | None = None,
              ports: Iterable[int] | None = None) -> Leftovers:
    """What of aifabric's is on the machine now, touching nothing: target processes and every
    other process of its nodes, network namespaces of fabric hosts, root-namespace interfaces
    with aifabric names, listening TCP ports among ``ports`` (default: the P4Runtime and
    run-time control ranges; none when ``nodes`` narrows the check), and ports that
    `emulation.control_ports` still closes with nothing listening there (of ``ports`` when
    ``nodes`` narrows the check, else any)."""
    run_dir = (run_dir or RUN_DIR).resolve()
    only = set(nodes) if nodes is not None else None
    survey = _survey(run_dir, lambda n: only is None or n in only)
    if ports is None:
        ports = [] if only is not None else [*FABRIC_PORTS, *RUNTIME_PORTS]
    ports = set(ports)
    return Leftovers(
        processes=[*survey.targets.values(), *survey.others.values()],
        namespaces=[f"netns {ino} ({', '.join(sorted(n))})" for ino, n in survey.namespaces.items()],
        interfaces=survey.interfaces,
        ports=listening_tcp_ports(ports),
        closed_ports=control_ports.stale(None if only is None else ports),
    )


def cleanup(run_dir: Path | None = None, *, nodes: Iterable[str] | None = None, timeout: float = 5.0,
            passes: int = 3, ports: Iterable[int] | None = None) -> CleanupReport:
    """Remove what aifabric left behind: target processes (pid files under ``<run_dir>/pids``,
    marked with ``run_dir``, or logging under it) get SIGTERM; shells of aifabric-named Mininet
    nodes, every other process marked with ``run_dir`` and every process in a fabric host's
    network namespace get SIGKILL (an interactive shell ignores SIGTERM), all at once with one
    deadline of ``timeout`` s; then root-namespace interfaces named like aifabric links
    (``p0e0-eth1``, ``c3-eth2``, ..., the bridge ``tnet``) are deleted. Repeats (at most
    ``passes`` times) until nothing is found; ``remaining`` says what the last check found.
    With ``nodes``, only processes (targets included), namespaces and interfaces of those node
    names are touched; ``ports`` go to the final `leftovers` check. Ports closed to other
    machines for a BMv2 target (`emulation.control_ports`) on which nothing listens any more
    are reopened: all of them, or with ``nodes`` those among ``ports``. OVS is never called."""
    run_dir = (run_dir or RUN_DIR).resolve()
    only = set(nodes) if nodes is not None else None
    ports = set(ports) if ports is not None else None

    def wanted(node: str) -> bool:
        return only is None or node in only

    report = CleanupReport()
    for _ in range(max(1, passes)):
        survey = _survey(run_dir, wanted)
        if not (survey.targets or survey.others or survey.interfaces):
            break
        survivors = stop_processes(terminate=survey.targets, kill=survey.others, timeout=timeout)
        report.killed += [what for pid, what in {**survey.targets, **survey.others}.items() if pid not in survivors]
        report.errors += [f"process {pid} survived SIGKILL" for pid in survivors]
        _delete_links(survey.interfaces, report)
    pid_dir = run_dir / "pids"
    for pid_file in pid_dir.glob("*.pid") if pid_dir.is_dir() else []:
        if wanted(pid_file.stem):
            pid_file.unlink(missing_ok=True)
    if only is None or ports is not None:   # BMv2 Thrift ports closed by a target that is gone
        try:
            control_ports.prune(None if only is None else (ports or set()))
        except control_ports.ControlPortError as err:
            report.errors.append(str(err))
    report.remaining = leftovers(run_dir, nodes=only, ports=ports)
    return report


def mininet_cleanup() -> None:
    """Mininet's own ``mn -c`` (mininet.clean.cleanup) with its OVS commands skipped when no OVS
    database is running (they would fail or wait for ovsdb otherwise)."""
    import mininet.clean as clean

    ovs_running = Path("/var/run/openvswitch/db.sock").exists()
    original = clean.sh

    def sh(cmd: str) -> str:
        if cmd.lstrip().startswith("ovs-") and not ovs_running:
            return ""
        return original(cmd)

    clean.sh = sh
    try:
        clean.cleanup()
    finally:
        clean.sh = original


__all__ = [
    "CleanupReport",
    "Leftovers",
    "cleanup",
    "leftovers",
    "mininet_cleanup",
]
