"""Emulated packet loss (p4src/include/control/loss.p4): a drop probability per switch egress
port, set at run time, so tests and benchmarks can show recovery on a kernel without netem.

    loss = LossEmulation(controller)
    loss.set("p0e0", 3, 0.05)      # 5% of the packets leaving p0e0's port 3
    loss.set_link("p0e0", "p0a0", 0.01)   # both directions of a switch-switch link
    loss.clear()
"""
from __future__ import annotations

import threading

from p4.v1 import p4runtime_pb2

from controller.entries import entity
from controller.p4names import Action, Counter, Table

LOSS_CONFIG = Table.LOSS_LOSS_CONFIG
SET_LOSS = Action.LOSS_SET_LOSS
LOSS_DROPPED = Counter.LOSS_LOSS_DROPPED
PROBABILITY_SCALE = 1 << 16   # the data plane takes the probability in 1/65536


def probability_fixed(p: float) -> int:
    if not 0 <= p < 1:
        raise ValueError(f"loss probability {p}: must be in [0, 1)")
    return round(p * PROBABILITY_SCALE)


class LossEmulation:
    """Drop probabilities per (switch, egress port), reconciled like every other entry."""

    def __init__(self, controller) -> None:
        self.controller = controller
        self._ports: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        controller.add_state_source(self)

    def owned(self, switch: str) -> set[tuple]:
        return {("table", self.controller.pipeline.p4info.table_id(LOSS_CONFIG))}

    def entities(self, switch: str) -> list[p4runtime_pb2.Entity]:
        p4info = self.controller.pipeline.p4info
        with self._lock:
            ports = sorted((port, p) for (sw, port), p in self._ports.items() if sw == switch and p)
        return [entity(p4info.table_entry(LOSS_CONFIG, {"egress_port": port}, action=SET_LOSS,
                                          params={"probability": p}))
                for port, p in ports]

    def set(self, switch: str, port: int, probability: float) -> None:
        """Drop ``probability`` of what leaves ``switch`` through ``port`` (0 removes it)."""
        if port not in self.controller.fabric.ports_of(self.controller.fabric.switch(switch).name):
            raise ValueError(f"switch {switch} has no port {port}; its ports: "
                             f"{sorted(self.controller.fabric.ports_of(switch))}")
        with self._lock:
            self._ports[(switch, port)] = probability_fixed(probability)
        self.controller.apply_now([switch])

    def set_link(self, a: str, b: str, probability: float) -> None:
        """Both directions of the link between ``a`` and ``b`` (switches, or a host and its switch)."""
        fabric = self.controller.fabric
        link = next((ln for ln in fabric.links if {ln.a, ln.b} == {a, b}), None)
        if link is None:
            raise ValueError(f"no link between {a} and {b}")
        switches = {sw.name for sw in fabric.switches}
        with self._lock:
            for end in (a, b):
                if end in switches:
                    self._ports[(end, link.port_of(end))] = probability_fixed(probability)
        self.controller.apply_now(sorted({a, b} & switches))

    def clear(self) -> None:
        with self._lock:
            touched = sorted({sw for sw, _ in self._ports})
            self._ports.clear()
        self.controller.apply_now(touched)
