"""Which path the fabric's hash gives a five-tuple, switch by switch.

ECMP's choice at a switch is the program's: the hash of the ``hashed`` table's selector fields
(next.p4: addresses, protocol, ports, flow label and a seeded mix of them, the switch's
``hash_config`` seed) taken modulo the group's size, into the group's members in the order they
were inserted. `HashPaths` asks the program itself instead of keeping a second copy of that
arithmetic: one offline softswitch per switch (`softswitch.offline`) holds the entities the
controller wants on that switch (routes, groups, seeds, load-balancing modes: everything its
state sources give), and a frame of the five-tuple is run through them, hop by hop, from the
source host's switch to the destination host. What a real switch does with the same frame is
the same where it holds the same state in the same order (a freshly programmed fabric: the
controller inserts a switch's members in member-id order), on softswitch and BMv2 alike; after
reroutes that delete and insert members, a group's order on a switch may differ from a fresh
one's (a `HashPaths` made then takes the controller's newest state, not the order a switch saw
it in).

Hosts use it to pick source ports whose paths do not collide (`controller.load_balance.disjoint`);
it answers for ECMP and flowlet modes (a flowlet's first packet), not for spraying, whose
choice is random per packet.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Mapping

from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller.p4names import PROTO_TCP, PROTO_UDP, UDP_PORT_ROCEV2
from controller.paths import MAX_PATH_SWITCHES, PathHop
from controller.reconcile import plan
from softswitch.offline import OfflineSwitch
from topologies.fabric import Fabric

PROTOCOLS = {"udp": PROTO_UDP, "tcp": PROTO_TCP}      # name -> IP protocol number
PAYLOAD = bytes(64)            # the probe frame's payload: the hash reads headers only


@dataclass(frozen=True)
class FiveTuple:
    """A flow between two hosts of the fabric, by host name (addresses: the hosts' first ones)."""

    src: str
    dst: str
    sport: int
    dport: int = UDP_PORT_ROCEV2
    protocol: str = "udp"
    ipv6: bool = False
    flow_label: int = 0           # IPv6 only: what PLB changes to move a flow

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"five-tuple {self}: protocol {self.protocol!r} is not one of {tuple(PROTOCOLS)}")
        if self.flow_label and not self.ipv6:
            raise ValueError(f"five-tuple {self}: a flow label needs IPv6")

    @property
    def protocol_number(self) -> int:
        return PROTOCOLS[self.protocol]


class HashPaths:
    """``path(flow)``: the hops a flow's packets take. Offline switches are made the first time
    a path crosses them; ``close`` frees them."""

    def __init__(self, fabric: Fabric, p4info: p4runtime_pb2.P4Info, device_config: bytes,
                 states: Mapping[str, tuple[list[p4runtime_pb2.Entity], set[tuple]]]):
        self.fabric = fabric
        self._p4info, self._device_config = p4info, device_config
        self._states = dict(states)
        self._switches: dict[str, OfflineSwitch] = {}
        self._lock = threading.Lock()
        self._peer = {}
        for link in fabric.links:
            self._peer[(link.a, link.a_port)] = (link.b, link.b_port)
            self._peer[(link.b, link.b_port)] = (link.a, link.a_port)

    @classmethod
    def of(cls, controller) -> "HashPaths":
        """The switches as ``controller`` (a `FabricController`) wants them now."""
        return cls(controller.fabric, controller.pipeline.p4info.message, controller.pipeline.device_config,
                   {name: agent.desired_state() for name, agent in controller.agents.items()})

    def path(self, flow: FiveTuple) -> tuple[PathHop, ...]:
        """The switches ``flow`` crosses, with the ports it enters and leaves by."""
        src, dst = self.fabric.host(flow.src), self.fabric.host(flow.dst)
        frame = _frame(flow, src, dst, self.fabric.switch(src.switch).mac)
        switch, port, hops = src.switch, src.port, []
        with self._lock:
            while len(hops) < MAX_PATH_SWITCHES:
                links = self.fabric.ports_of(switch)
                sent = self._switch(switch).process(port, frame)
                onward = [(p, f) for p, f in sent if p in links]   # not the copies to the CPU or telemetry
                if len(onward) != 1:
                    raise LookupError(f"{flow}: {switch} sent {len(onward)} frames for it into the fabric "
                                      f"(ports {[p for p, _ in sent]}), not one")
                out, frame = onward[0]
                hops.append(PathHop(switch, self.fabric.switch(switch).device_id, port, out))
                if links[out] == flow.dst:
                    return tuple(hops)
                if (switch, out) not in self._peer:
                    raise LookupError(f"{flow}: {switch} sent it to {links[out]}, a host other than {flow.dst}")
                switch, port = self._peer[(switch, out)]
        raise LookupError(f"{flow}: no way to {flow.dst} within {MAX_PATH_SWITCHES} switches "
                          f"({' -> '.join(h.switch for h in hops)})")

    def links(self, flow: FiveTuple) -> tuple[tuple[str, str], ...]:
        """The switch-to-switch link directions ``flow`` crosses, as (from, to) names."""
        hops = self.path(flow)
        return tuple((a.switch, b.switch) for a, b in zip(hops, hops[1:]))

    def _switch(self, name: str) -> OfflineSwitch:
        switch = self._switches.get(name)
        if switch is None:
            if name not in self._states:
                raise LookupError(f"no state for switch {name!r}")
            desired, owns = self._states[name]
            switch = OfflineSwitch(self.fabric.switch(name).device_id, self._p4info, self._device_config)
            switch.write(plan(desired, [], owns).updates())
            self._switches[name] = switch
        return switch

    def _close_switches(self) -> None:
        for switch in self._switches.values():
            switch.close()
        self._switches.clear()

    def close(self) -> None:
        with self._lock:
            self._close_switches()

    def __enter__(self) -> "HashPaths":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frame(flow: FiveTuple, src, dst, router_mac: str) -> bytes:
    """The frame ``src`` sends for ``flow``: to its switch's router MAC, TTL 64."""
    if flow.ipv6:
        ip = IPv6(src=str(src.ip6.ip), dst=str(dst.ip6.ip), fl=flow.flow_label, hlim=64)
    else:
        ip = IP(src=str(src.ip4.ip), dst=str(dst.ip4.ip), ttl=64)
    l4 = UDP(sport=flow.sport, dport=flow.dport) if flow.protocol == "udp" else TCP(sport=flow.sport, dport=flow.dport)
    return bytes(Ether(src=src.mac, dst=router_mac) / ip / l4 / PAYLOAD)
