"""Labs side by side. A lab's switches take the machine's names (``p0e0-eth1``), P4Runtime ports
(127.0.0.1:50000 + device id) and telemetry network, so two labs in one network namespace
collide. A lab given a name (``aifabric --lab NAME ...``, or ``AIFABRIC_LAB_NAME=NAME``) runs in a
network namespace of its own, ``aifabric-NAME``, where all of those are its own; its run
directory (logs, pid files: ``/tmp/aifabric-labs/NAME``) and control socket
(``/run/aifabric/labs/NAME/control.sock``) are its own too. The unnamed lab keeps the machine's
namespace, /tmp/aifabric and /run/aifabric/control.sock, as before.

The command runs itself again inside the lab's namespace (``ip netns exec``), passes its
signals on, waits, and deletes the namespace once nothing runs in it. What the lab serves
listens inside that namespace: ``ip netns exec aifabric-NAME ...`` reaches its switches'
P4Runtime ports; its live page and metrics (``--web``, ``--metrics``) are relayed from the same
address of the machine's namespace by the command outside (aifabric.lab.netns_relay), so a
browser or a Prometheus on the machine reaches them as they would the unnamed lab's. ``aifabric
--lab NAME clean`` cleans that lab (inside its namespace, which it then deletes); ``aifabric
clean`` cleans the unnamed lab and every named one.
The command inside carries the lab's marker (`emulation.procs`), so another lab's cleanup
leaves it, and all it started, alone.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from aifabric.lab.netns_relay import Relay
from emulation.procs import LAB_MARKER, netns_of, snapshot

NETNS_PREFIX = "aifabric-"
NETNS_DIR = Path("/run/netns")            # where `ip netns` keeps named namespaces
RUN_DIRS = Path("/tmp/aifabric-labs")
SOCKET_DIRS = Path("/run/aifabric/labs")
NAME_ENV = "AIFABRIC_LAB_NAME"            # the lab a command acts on, when --lab is not given
INSIDE_ENV = "AIFABRIC_LAB_INSIDE"        # set for the command run again inside the namespace
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class NamedLab:
    name: str

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise ValueError(f"lab name {self.name!r}: lower-case letters, digits, '-' and '_', "
                             f"at most 32, starting with a letter or digit")

    @property
    def netns(self) -> str:
        return NETNS_PREFIX + self.name

    @property
    def run_dir(self) -> Path:
        return RUN_DIRS / self.name

    @property
    def control_socket(self) -> Path:
        return SOCKET_DIRS / self.name / "control.sock"

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of the command inside: the lab's run directory, control socket and marker."""
        env = dict(os.environ if base is None else base)
        env.update({"AIFABRIC_RUN_DIR": str(self.run_dir), "AIFABRIC_CONTROL_SOCKET": str(self.control_socket),
                    LAB_MARKER: str(self.run_dir.resolve()), NAME_ENV: self.name, INSIDE_ENV: self.name})
        return env

    def netns_inode(self) -> int | None:
        try:
            return os.stat(NETNS_DIR / self.netns).st_ino
        except OSError:
            return None

    def has_anything(self) -> bool:
        """Whether something of the lab is there to clean: its namespace, or a process carrying
        its marker (its run directory alone, logs kept, is not)."""
        marker = str(self.run_dir.resolve())
        return self.netns_inode() is not None or any(p.lab == marker for p in snapshot())

    def is_current(self) -> bool:
        """True in the command run again inside this lab's namespace."""
        return os.environ.get(INSIDE_ENV) == self.name and self.netns_inode() == netns_of("self")


def existing() -> list[NamedLab]:
    """The named labs on this machine: a namespace or a run directory of theirs is there."""
    names = {p.name[len(NETNS_PREFIX):] for p in NETNS_DIR.glob(NETNS_PREFIX + "*")} if NETNS_DIR.is_dir() else set()
    names |= {p.name for p in RUN_DIRS.iterdir() if p.is_dir()} if RUN_DIRS.is_dir() else set()
    return [NamedLab(n) for n in sorted(names) if NAME.fullmatch(n)]


def run_inside(lab: NamedLab, argv: Sequence[str], relayed: Sequence[tuple[str, int]] = ()) -> int:
    """Run ``aifabric ARGV`` inside ``lab``'s namespace (made when missing) and return its exit
    status; SIGINT, SIGTERM and SIGHUP are passed on (the command inside tears its lab down on
    them); the namespace goes once nothing runs in it. Each (host, port) of ``relayed`` is
    relayed from the machine's namespace to the lab's while the command runs (OSError, before
    anything starts, when one cannot be listened on here)."""
    _make_netns(lab)
    relays: list[Relay] = []
    try:
        for host, port in relayed:
            relays.append(Relay(host, port, NETNS_DIR / lab.netns).start())
            print(f"lab {lab.name}: {relays[-1].address} of this machine relayed to the lab's namespace",
                  file=sys.stderr)
        proc = subprocess.Popen(["ip", "netns", "exec", lab.netns, sys.executable, "-m", "aifabric.cli", *argv],
                                env=lab.env())
        passed = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        before = {s: signal.signal(s, lambda signum, _frame: proc.send_signal(signum)) for s in passed}
        try:
            status = proc.wait()
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)
    finally:
        for relay in relays:
            relay.close()
            if relay.refused:
                print(f"lab {lab.name}: {relay.refused} connection(s) to {relay.address} closed unanswered: the lab "
                      f"did not serve there then", file=sys.stderr)
        remove_if_idle(lab)
    return status if status >= 0 else 128 - status


def _make_netns(lab: NamedLab) -> None:
    from mininet.util import fixLimits

    # Mininet raises the machine's limits (net.core.rmem_max and the like) when a lab starts,
    # which it cannot do from inside a namespace ("Error setting resource limits"): done here.
    fixLimits()
    if lab.netns_inode() is not None:
        return
    subprocess.run(["ip", "netns", "add", lab.netns], check=True, capture_output=True)
    subprocess.run(["ip", "-n", lab.netns, "link", "set", "lo", "up"], check=True, capture_output=True)


def remove_if_idle(lab: NamedLab) -> bool:
    """Delete ``lab``'s namespace when no process is in it any more; True when it is gone."""
    inode = lab.netns_inode()
    if inode is None:
        return True
    if any(p.netns == inode for p in snapshot()):
        return False
    subprocess.run(["ip", "netns", "delete", lab.netns], check=False, capture_output=True)
    return lab.netns_inode() is None
