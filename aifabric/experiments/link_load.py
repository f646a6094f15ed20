"""Link load during a run: what every switch sent on each link direction, from the switches'
egress port counters read before and after, as a share of the links' rate in bits.

`LinkLoad` keeps every direction (``"sw->peer"``: packets and frame bytes) and sums up the fabric
links (switch to switch) apart from the host links: the busiest direction, the mean over fabric
directions and their imbalance (max / mean), so a run says where its traffic went as well as how
long it took. A direction's bits are its frames' bytes plus Ethernet's overhead per frame
(`softswitch.queues.WIRE_OVERHEAD`), what the link spent on them.
"""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.lab.lab import Lab
from controller.fabric_controller import PortCounter
from softswitch.queues import WIRE_OVERHEAD


def link_counters(lab: Lab) -> dict[str, PortCounter]:
    """Packets and bytes sent so far on every link direction ``"switch->peer"`` (peer a switch or a host)."""
    fabric, ctl = lab.fabric, lab.controller
    assert ctl is not None
    out = {}
    for sw in fabric.switches:
        counters = ctl.read_port_counters(sw.name)
        for port, peer in fabric.ports_of(sw.name).items():
            out[f"{sw.name}->{peer}"] = counters.get(port, PortCounter(0, 0))
    return out


@dataclass(frozen=True)
class LinkLoad:
    sent: dict[str, PortCounter]    # per direction, during the run
    seconds: float
    bits_per_s: float               # every link's rate per direction (0: not limited)
    switches: frozenset[str]

    @classmethod
    def between(cls, lab: Lab, before: dict[str, PortCounter], after: dict[str, PortCounter], seconds: float,
                bits_per_s: float) -> "LinkLoad":
        zero = PortCounter(0, 0)
        return cls({k: PortCounter(v.packets - before.get(k, zero).packets, v.bytes - before.get(k, zero).bytes)
                    for k, v in after.items()}, seconds, bits_per_s, frozenset(sw.name for sw in lab.fabric.switches))

    @staticmethod
    def bits(c: PortCounter) -> int:
        """What the frames took of a link, in bits."""
        return 8 * (c.bytes + WIRE_OVERHEAD * c.packets)

    def share(self, bits: float) -> float:
        """A direction's bits as a share of what the link could carry in the run."""
        return bits / (self.seconds * self.bits_per_s) if self.seconds > 0 and self.bits_per_s > 0 else 0.0

    def summary(self) -> dict:
        bits = {k: self.bits(c) for k, c in self.sent.items()}
        fabric = {k: b for k, b in bits.items() if k.split("->")[1] in self.switches}
        busy = max(bits, key=bits.get) if bits else ""
        mean = sum(fabric.values()) / len(fabric) if fabric else 0.0
        return {"busiest": busy, "busiest_packets": self.sent[busy].packets if busy else 0,
                "busiest_bits": bits.get(busy, 0), "busiest_share": round(self.share(bits.get(busy, 0)), 3),
                "fabric_packets": sum(self.sent[k].packets for k in fabric),
                "fabric_directions_used": sum(1 for b in fabric.values() if b),
                "fabric_directions": len(fabric), "fabric_mean_share": round(self.share(mean), 3),
                "fabric_imbalance": round(max(fabric.values()) / mean, 2) if mean else 0.0,
                "seconds": round(self.seconds, 2), "bits_per_s": self.bits_per_s}
