"""Failure injection on a running `aifabric.lab.lab.Lab`: links down and up, switches killed and
restarted.

    failures = Failures(lab)
    failures.fail_link("p0a0", "c0")      # both ends of the link administratively down
    failures.restore_link("p0a0", "c0")
    failures.fail_switch("p0a0")          # the target process (softswitch / simple_switch_grpc) SIGKILLed
    failures.restore_switch("p0a0")       # started again with the same command line, queue settings
                                          # applied again, pipeline and state pushed by the controller

A link goes down as Mininet's ``configLinkStatus`` takes it down (both interfaces of the veth
pair), but through netlink and ``nsenter`` rather than the nodes' shells: the Mininet CLI of
``aifabric up`` may be using those shells from another thread at the same time. A killed switch
keeps its interfaces (as a crashed switch keeps its cables): its neighbours see no carrier loss,
only silence. Restoring it reconciles it at once (`FabricController.reconcile`: a new session,
the pipeline pushed again since the new process has none, every table written again) instead of
waiting for the reconcile loop's backoff.

Nothing here tells the controller about a failure: detecting it is the failover module's job.
``inform_controller=True`` makes the injector an oracle (the controller's topology model is told
the moment the link or switch fails, and the affected switches reconciled at once): controller
reroute measured without any detection delay, for experiments without heartbeats.

Every injection is a `FailureEvent` with its start and end on ``time.monotonic`` (the clock
every host namespace shares, so receivers' timestamps line up) and on the wall clock. Unknown
names and links raise `FailureError` naming them.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from topologies.fabric import Link

if TYPE_CHECKING:
    from aifabric.lab.lab import Lab

NAME = re.compile(r"^[A-Za-z0-9_]{1,32}$")    # node names of aifabric's topologies (and a bound)
ACTIONS = ("fail_link", "restore_link", "fail_switch", "restore_switch")


class FailureError(ValueError):
    """An injection that cannot be done; the message names the node or link."""


@dataclass(frozen=True)
class FailureEvent:
    """One injection: what, when it started and when it had taken effect."""

    action: str                 # one of ACTIONS
    target: str                 # "p0a0-c0" (a link) or "p0a0" (a switch)
    start: float                # time.monotonic() when the injection began
    end: float                  # ... when it had taken effect (link state set, process dead / programmed)
    wall: float                 # time.time() at ``start``
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


class Failures:
    """Injects failures into ``lab`` and records them (``events``); thread-safe."""

    def __init__(self, lab: "Lab", *, inform_controller: bool = False, restart_timeout: float = 60.0) -> None:
        self.lab = lab
        self.inform_controller = inform_controller
        self.restart_timeout = restart_timeout
        self.events: list[FailureEvent] = []
        self.down_links: set[frozenset[str]] = set()
        self.down_switches: set[str] = set()
        self._lock = threading.Lock()

    # --- names ---------------------------------------------------------------------------------

    def _check_name(self, name: str) -> str:
        if not isinstance(name, str) or not NAME.match(name):
            raise FailureError(f"bad node name {name!r}: letters, digits and _ only, at most 32")
        return name

    def switch_name(self, name: str) -> str:
        """``name`` when it is a switch of the fabric; FailureError naming it otherwise."""
        self._check_name(name)
        if name not in {s.name for s in self.lab.fabric.switches}:
            hosts = {h.name for h in self.lab.fabric.hosts}
            what = "a host, not a switch" if name in hosts else "no such switch"
            raise FailureError(f"unknown switch {name!r} ({what} in {self.lab.fabric.describe()})")
        return name

    def link(self, a: str, b: str) -> Link:
        """The fabric's link between ``a`` and ``b``; FailureError naming what is wrong."""
        nodes = {s.name for s in self.lab.fabric.switches} | {h.name for h in self.lab.fabric.hosts}
        for name in (a, b):
            self._check_name(name)
            if name not in nodes:
                raise FailureError(f"unknown node {name!r} in {self.lab.fabric.describe()}")
        for ln in self.lab.fabric.links:
            if {ln.a, ln.b} == {a, b}:
                return ln
        raise FailureError(f"no link between {a} and {b} in {self.lab.fabric.describe()}")

    # --- links ---------------------------------------------------------------------------------

    def fail_link(self, a: str, b: str) -> FailureEvent:
        """Both interfaces of the link a-b down."""
        return self._set_link(a, b, up=False)

    def restore_link(self, a: str, b: str) -> FailureEvent:
        """Both interfaces of the link a-b up again."""
        return self._set_link(a, b, up=True)

    def _set_link(self, a: str, b: str, *, up: bool) -> FailureEvent:
        ln = self.link(a, b)
        with self._lock:
            start, wall = time.monotonic(), time.time()
            how = self.link_mode(ln)
            first_set = None
            for node, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
                ifname = f"{node}-eth{port}"
                if not _is_switch(self.lab, node):
                    issued = set_interface(self._netns_pid(node), ifname, up)
                    if up:
                        self._readdress(node)
                elif how == "down" or self.lab.switch(node).target_kind != "bmv2":
                    # a softswitch end goes down even where its BMv2 peer's end drops: its AF_XDP
                    # sends go past the interface's queueing discipline, which would not hold them
                    issued = set_interface(None, ifname, up)
                elif not self._is_switch_link(ln):
                    continue        # the host end's going down is carrier loss here, which BMv2 survives
                else:
                    issued = set_blackhole(ifname, not up)
                first_set = first_set or issued
            end = time.monotonic()
            pair = frozenset((ln.a, ln.b))
            (self.down_links.discard if up else self.down_links.add)(pair)
            # first_end: when the change of the first end was issued; the link is cut (or back)
            # from then on at the earliest
            detail = {"interfaces": [f"{ln.a}-eth{ln.a_port}", f"{ln.b}-eth{ln.b_port}"], "how": how,
                      "first_end": first_set or end}
            if self.inform_controller and self._is_switch_link(ln):
                detail["controller_s"] = self._tell_controller([(ln.a, ln.b)], up)
            return self._record("restore_link" if up else "fail_link", f"{ln.a}-{ln.b}", start, end, wall, detail)

    def link_mode(self, ln: Link) -> str:
        """How link ``ln`` fails: ``down`` (both interfaces administratively down, as Mininet's
        ``link A B down``) or, when an end is a BMv2 switch, ``drop``: BMv2 stops processing
        packets on *all* its ports once one of its own interfaces goes down, until a packet
        arrives on it again (p4lang/behavioral-model#1215), which would make a link failure a
        switch failure. There, BMv2 ends drop everything they send (a root ``pfifo`` of limit
        0), and a host end or a softswitch end still goes down (the BMv2 switch only loses
        carrier, which it survives; softswitch's AF_XDP sends would pass a qdisc by)."""
        ends = [n for n in (ln.a, ln.b) if _is_switch(self.lab, n)]
        return "drop" if any(self.lab.switch(n).target_kind == "bmv2" for n in ends) else "down"

    def _netns_pid(self, node: str) -> int | None:
        """A pid inside ``node``'s network namespace; None for switches (root namespace)."""
        return None if _is_switch(self.lab, node) else self.lab.host(node).shell.pid

    def _readdress(self, host: str) -> None:
        """What the kernel dropped when the host's interface went down: its default routes and
        its IPv6 address (IPv4 addresses survive; `emulation.mininet_topo.FabricHost` set them)."""
        h = self.lab.fabric.host(host)
        intf = f"{host}-eth0"
        for cmd in (["ip", "-6", "addr", "replace", str(h.ip6), "dev", intf, "nodad"],
                    ["ip", "route", "replace", "default", "via", str(h.gateway4), "dev", intf],
                    ["ip", "-6", "route", "replace", "default", "via", str(h.gateway6), "dev", intf]):
            _in_netns(self._netns_pid(host), cmd)

    def _is_switch_link(self, ln: Link) -> bool:
        return _is_switch(self.lab, ln.a) and _is_switch(self.lab, ln.b)

    # --- switches ------------------------------------------------------------------------------

    def fail_switch(self, name: str) -> FailureEvent:
        """SIGKILL switch ``name``'s target process (and reap it)."""
        self.switch_name(name)
        node = self.lab.switch(name)
        group = getattr(node, "group", None)
        if group is not None:
            raise FailureError(f"switch {name} is served by {group.name} with {len(group.members) - 1} other "
                               f"switches: killing it would kill them all (bring the fabric up with one process "
                               f"a switch: --switches-per-process 1)")
        with self._lock:
            proc = node.process
            if proc is None or proc.poll() is not None:
                raise FailureError(f"switch {name} is not running (already failed?)")
            start, wall = time.monotonic(), time.time()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            end = time.monotonic()
            self.down_switches.add(name)
            detail: dict = {"pid": proc.pid}
            if self.inform_controller:
                detail["controller_s"] = self._tell_controller(self._links_of(name), up=False)
            return self._record("fail_switch", name, start, end, wall, detail)

    def restore_switch(self, name: str) -> FailureEvent:
        """Start switch ``name`` again (same command line, same queue settings) and, when the lab
        runs our controller, reconcile it at once (pipeline and all its state pushed again)."""
        self.switch_name(name)
        node = self.lab.switch(name)
        with self._lock:
            if node.process is not None and node.process.poll() is None:
                raise FailureError(f"switch {name} is running (pid {node.process.pid}): nothing to restore")
            start, wall = time.monotonic(), time.time()
            node.restart_target(self.restart_timeout)
            ready = time.monotonic()
            detail: dict = {"pid": node.process.pid, "ready_s": round(ready - start, 4)}
            controller = self.lab.controller
            if controller is not None:
                # the first attempt may still hold the killed process's session: a second one connects anew
                for _ in range(3):
                    result = controller.reconcile([name])[name]
                    if not isinstance(result, BaseException):
                        break
                else:
                    raise FailureError(f"switch {name} restarted but not programmed: {result}")
                detail["programmed_s"] = round(time.monotonic() - ready, 4)
            self.down_switches.discard(name)
            if self.inform_controller:
                detail["controller_s"] = self._tell_controller(self._links_of(name), up=True)
            return self._record("restore_switch", name, start, time.monotonic(), wall, detail)

    def _links_of(self, switch: str) -> list[tuple[str, str]]:
        return [(ln.a, ln.b) for ln in self.lab.fabric.switch_links() if switch in (ln.a, ln.b)]

    # --- the oracle ----------------------------------------------------------------------------

    def _tell_controller(self, links: list[tuple[str, str]], up: bool) -> float:
        """Mark ``links`` in the controller's model and reconcile every switch now; seconds taken."""
        controller = self.lab.controller
        if controller is None:
            raise FailureError("inform_controller: this lab runs no controller")
        t0 = time.monotonic()
        for a, b in links:
            controller.model.set_link_up(a, b, up)
        live = [s.name for s in self.lab.fabric.switches if s.name not in self.down_switches]
        controller.apply_now(live)
        return round(time.monotonic() - t0, 4)

    def _record(self, action: str, target: str, start: float, end: float, wall: float,
                detail: dict) -> FailureEvent:
        event = FailureEvent(action, target, start, end, wall, detail)
        self.events.append(event)
        return event


def set_interface(netns_pid: int | None, ifname: str, up: bool) -> float:
    """Set ``ifname`` up or down: in the root namespace (``netns_pid`` None) through netlink,
    else inside the namespace of that process (``nsenter``). Returns when the change was
    issued (``time.monotonic()``), the earliest it can have taken effect."""
    state = "up" if up else "down"
    if netns_pid is None:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            index = ipr.link_lookup(ifname=ifname)
            if not index:
                raise FailureError(f"interface {ifname} does not exist (is the fabric up?)")
            issued = time.monotonic()
            ipr.link("set", index=index[0], state=state)
        return issued
    issued = time.monotonic()
    _in_netns(netns_pid, ["ip", "link", "set", "dev", ifname, state])
    return issued


def set_blackhole(ifname: str, on: bool) -> float:
    """Make root-namespace interface ``ifname`` drop every frame it would send (a root pfifo
    that holds nothing), or give it back its default queueing discipline. Returns when the
    change was issued."""
    cmd = ["tc", "qdisc", "replace", "dev", ifname, "root", "pfifo", "limit", "0"] if on else \
          ["tc", "qdisc", "del", "dev", ifname, "root"]
    issued = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    if result.returncode != 0 and on:
        raise FailureError(f"interface {ifname}: {' '.join(cmd)} failed: {result.stderr.strip()}")
    return issued


def blackholed(ifname: str) -> bool:
    """Whether ``ifname`` drops everything it sends (`set_blackhole`)."""
    out = subprocess.run(["tc", "qdisc", "show", "dev", ifname, "root"], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    return "pfifo" in out and "limit 0p" in out


def _in_netns(netns_pid: int, cmd: list[str]) -> None:
    result = subprocess.run(["nsenter", f"--net=/proc/{netns_pid}/ns/net", *cmd],
                            capture_output=True, text=True, timeout=10, check=False)
    if result.returncode != 0:
        raise FailureError(f"{' '.join(cmd)} failed: {result.stderr.strip()}")


def _is_switch(lab: "Lab", node: str) -> bool:
    return any(s.name == node for s in lab.fabric.switches)


def interface_up(netns_pid: int | None, ifname: str) -> bool:
    """Whether ``ifname`` is administratively up (IFF_UP)."""
    cmd = ["ip", "-o", "link", "show", "dev", ifname]
    if netns_pid is not None:
        cmd = ["nsenter", f"--net=/proc/{netns_pid}/ns/net", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
    flags = out.split("<", 1)[1].split(">", 1)[0].split(",")
    return "UP" in flags
