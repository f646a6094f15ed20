"""Mininet topologies built from a `topologies.fabric.Fabric`, and the host class they use.

`FabricTopo(fabric)` adds every switch (with its ``device_id`` and ``grpc_port`` for
`emulation.p4switch.P4Switch`), every host (`FabricHost`, with the address plan's MAC, IPv4 and
IPv6 addresses and default routes via the gateways; a host's further NICs get their addresses
and the routes of their plane) and every link with the plan's port numbers, so interfaces are
named ``<node>-eth<port>``. `FatTreeTopo(k)` and `LeafSpineTopo(...)` are
shorthands. `make_net(fabric, target=...)` returns a ready-to-start ``Mininet`` using P4Switch.

With ``telemetry=True`` every switch also gets ``TELEMETRY_PORT`` linked to the telemetry bridge
(`emulation.telemetry_net.TelemetryBridge`, node ``tnet``, port n+1 for the n-th switch). These
links are Mininet's only: the `Fabric` (and so routing) never sees them.

`stop_net(net)` stops such a net at once (all targets and all node shells together, one
deadline); `emulation.cleanup.cleanup()` then removes what the nodes left (interfaces, strays
in the hosts' namespaces). Mininet's own ``net.stop()`` works too, one node after another.
"""

from __future__ import annotations

import functools
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Host
from mininet.topo import Topo

from topologies import addressing as ap
from topologies.fabric import Fabric, Nic, fat_tree, leaf_spine
from emulation.p4switch import RUN_DIR, MarkedNode, P4Switch, P4SwitchError, resolve_target
from emulation.switch_group import SwitchGroup
from emulation.procs import stop_processes
from emulation.telemetry_net import TelemetryBridge

OFFLOADS = ("tx", "rx", "gso", "tso", "gro")


class FabricHost(MarkedNode, Host):
    """A host with an IPv6 address (no DAD) and IPv6 default route besides Mininet's IPv4 setup,
    and with offloads off on its interface (P4 targets see raw frames; checksums must be real).
    Its shell and everything it starts carry the lab markers (`MarkedNode`)."""

    def config(self, ip6: str | None = None, gateway6: str | None = None,  # type: ignore[override]
               extra_nics: tuple[Nic, ...] = (), **params: object) -> dict:
        result = super().config(**params)
        intf = self.defaultIntf()
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0")
        self.cmd("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0")
        self._prepare(str(intf), ip6)
        if gateway6:
            self.cmd(f"ip -6 route replace default via {gateway6} dev {intf}")
        for nic in extra_nics:      # IPv4 address and MAC were set with the link (FabricTopo)
            name = f"{self.name}-eth{nic.port}"
            self._prepare(name, str(nic.ip6))
            for net in nic.routes4:
                self.cmd(f"ip route replace {net} via {nic.gateway4} dev {name}")
            for net in nic.routes6:
                self.cmd(f"ip -6 route replace {net} via {nic.gateway6} dev {name}")
        return result

    def _prepare(self, intf: str, ip6: str | None) -> None:
        """IPv6 on without DAD or RA, offloads off, the IPv6 address."""
        self.cmd(f"sysctl -qw net.ipv6.conf.{intf}.accept_dad=0 net.ipv6.conf.{intf}.disable_ipv6=0 "
                 f"net.ipv6.conf.{intf}.accept_ra=0")
        self.cmd(f"ethtool -K {intf} " + " ".join(f"{o} off" for o in OFFLOADS) + " >/dev/null 2>&1")
        if ip6:
            self.cmd(f"ip -6 addr add {ip6} dev {intf} nodad")


class FabricTopo(Topo):
    """The Mininet topology of a Fabric description."""

    def build(self, fabric: Fabric, telemetry: bool = False) -> None:  # type: ignore[override]
        self.fabric = fabric
        for sw in fabric.switches:
            self.addSwitch(sw.name, device_id=sw.device_id, grpc_port=sw.grpc_port)
        for h in fabric.hosts:
            self.addHost(
                h.name,
                cls=FabricHost,
                ip=str(h.ip4),
                mac=h.mac,
                defaultRoute=f"via {h.gateway4}",
                ip6=str(h.ip6),
                gateway6=str(h.gateway6),
                extra_nics=h.extra_nics,
            )
        extra = {(h.name, nic.port): nic for h in fabric.hosts for nic in h.extra_nics}
        for ln in fabric.links:
            nic = extra.get((ln.a, ln.a_port))
            opts = {"addr1": nic.mac, "params1": {"ip": str(nic.ip4)}} if nic else {}
            self.addLink(ln.a, ln.b, port1=ln.a_port, port2=ln.b_port, **opts)
        if telemetry:
            self.add_telemetry_network(fabric)

    def add_telemetry_network(self, fabric: Fabric) -> None:
        for sw in fabric.switches:
            ports = fabric.ports_of(sw.name)
            if ports:
                ap.check_telemetry_port(max(ports))
        self.addSwitch(ap.TELEMETRY_BRIDGE, cls=TelemetryBridge)
        for n, sw in enumerate(fabric.switches, start=1):
            self.addLink(sw.name, ap.TELEMETRY_BRIDGE, port1=ap.TELEMETRY_PORT, port2=n)


class FatTreeTopo(FabricTopo):
    def build(self, k: int = 4) -> None:  # type: ignore[override]
        super().build(fat_tree(k))


class LeafSpineTopo(FabricTopo):
    def build(self, leaves: int = 4, spines: int = 2, hosts_per_leaf: int = 2) -> None:  # type: ignore[override]
        super().build(leaf_spine(leaves, spines, hosts_per_leaf))


def make_net(
    fabric: Fabric,
    *,
    target: str = "auto",
    log_dir: str | Path | None = None,
    start_timeout: float = 60.0,
    telemetry: bool = False,
    switches_per_process: int = 1,
    **switch_opts: object,
) -> Mininet:
    """A Mininet (not started) of ``fabric`` with P4Switch nodes and no OpenFlow controller;
    ``switch_opts`` go to every P4Switch (e.g. ``thrift_port`` for a one-switch fabric);
    ``telemetry`` adds the telemetry bridge and every switch's telemetry port; with
    ``switches_per_process`` > 1, softswitch serves that many switches a process
    (`emulation.switch_group`), in the fabric's order."""
    switch = functools.partial(
        P4Switch, target=target, log_dir=log_dir, start_timeout=start_timeout, **switch_opts
    )
    if switches_per_process > 1:
        switch = _grouped(switch, switches_per_process, target, log_dir)
    return Mininet(
        topo=FabricTopo(fabric, telemetry=telemetry), switch=switch, host=FabricHost, controller=None, autoSetMacs=False
    )


def _grouped(make_switch, size: int, target: str, log_dir: str | Path | None):
    """``make_switch`` with each switch put in a group of ``size`` (a new group when the last is full)."""
    kind, executable = resolve_target(target)
    if kind != "softswitch":
        raise P4SwitchError(f"only softswitch serves several switches in one process, not {kind} "
                            f"(target {target})")
    groups: list[SwitchGroup] = []

    def make(name: str, **params: object) -> P4Switch:
        if not groups or groups[-1].full:
            groups.append(SwitchGroup(size, executable, Path(log_dir) if log_dir else RUN_DIR / "logs", RUN_DIR))
        return make_switch(name, group=groups[-1], **params)
    return make


def stop_net(net: Mininet, timeout: float = 5.0) -> None:
    """Stop every node of ``net`` at once: SIGTERM to every switch target and SIGKILL to every
    node shell (with its foreground job; an interactive shell ignores SIGTERM, and Mininet's
    ``stop()`` would wait for each node in turn), one deadline of ``timeout`` s for all, then
    Mininet's bookkeeping (ptys closed, shells reaped). Interfaces, and processes the hosts
    started in their own sessions, are left to `emulation.cleanup.cleanup`."""
    nodes = [*net.hosts, *net.switches, *net.controllers]
    targets = [sw for sw in net.switches if isinstance(sw, P4Switch)]
    stop_processes(
        terminate=sorted({sw.process.pid for sw in targets if sw.process is not None}),
        kill=[n.shell.pid for n in nodes if getattr(n, "shell", None) is not None],
        timeout=timeout,
    )
    for sw in targets:
        sw.forget_target()
    for node in nodes:
        if getattr(node, "shell", None) is not None and node.shell.poll() is not None:
            node.cleanup()      # closes the pty; the shell is dead, so its wait() returns at once


# `mn --custom emulation/mininet_topo.py --topo fattree,4 --switch p4`
topos = {"fattree": FatTreeTopo, "leafspine": LeafSpineTopo}
switches = {"p4": P4Switch}
