"""Traffic-engineering overrides: a flow (5-tuple) pinned to an egress port on a switch."""
from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.entries import entity
from controller.p4names import Action, DirectCounter, Table

TE_OVERRIDE = Table.TE_OVERRIDE_TE_OVERRIDE
PIN = Action.TE_OVERRIDE_PIN
TE_PINNED = DirectCounter.TE_OVERRIDE_TE_PINNED


@dataclass(frozen=True)
class Pin:
    """At ``switch``, the flow leaves through ``port`` (towards ``neighbor``)."""

    switch: str
    src_ip: str
    dst_ip: str
    proto: int
    sport: int
    dport: int
    port: int


class TeOverrides:
    """The pins in force; `replace(pins)` installs exactly these (new ones, changed, stale removed),
    writing only the changed entries (`FabricController.apply_source`)."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self._pins: dict[tuple, Pin] = {}
        self._lock = threading.Lock()
        controller.add_state_source(self)

    def owned(self, switch: str) -> set[tuple]:
        return {("table", self.controller.pipeline.p4info.table_id(TE_OVERRIDE))}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        p4info, fabric = self.controller.pipeline.p4info, self.controller.fabric
        with self._lock:
            pins = sorted((p for p in self._pins.values() if p.switch == switch), key=_key)
        ports = fabric.ports_of(switch)
        out = []
        for p in pins:
            neighbor = ports[p.port]
            dmac = fabric.switch(neighbor).mac if neighbor in {s.name for s in fabric.switches} \
                else fabric.host(neighbor).mac
            match = {"ip_src": int(ipaddress.ip_address(p.src_ip)), "ip_dst": int(ipaddress.ip_address(p.dst_ip)),
                     "ip_proto": p.proto, "l4_sport": p.sport, "l4_dport": p.dport}
            out.append(entity(p4info.table_entry(TE_OVERRIDE, match, action=PIN, params={
                "port": p.port, "smac": fabric.switch(switch).mac, "dmac": dmac})))
        return out

    @property
    def pins(self) -> list[Pin]:
        with self._lock:
            return sorted(self._pins.values(), key=_key)

    def replace(self, pins: list[Pin]) -> None:
        for p in pins:
            if p.port not in self.controller.fabric.ports_of(p.switch):
                raise ValueError(f"pin {p}: switch {p.switch} has no port {p.port}")
        new = {_key(p): p for p in pins}
        with self._lock:
            old, self._pins = self._pins, new
        # only switches whose pins changed are written (a TE round that keeps its paths writes nothing),
        # all at once, each its changed pins alone in one batch
        touched = sorted({p.switch for k, p in old.items() if new.get(k) != p}
                         | {p.switch for k, p in new.items() if old.get(k) != p})
        if touched:
            self.controller.apply_source(self, touched)


def _key(p: Pin) -> tuple:
    return (p.switch, p.src_ip, p.dst_ip, p.proto, p.sport, p.dport)
