"""Link load during a run: packets every switch sent on each link direction, from the switches'
egress port counters read before and after, as packets/s and as a share of the links' rate.

`LinkLoad` keeps every direction (``"sw->peer"``) and sums up the fabric links (switch to
switch) apart from the host links: the busiest direction, the mean over fabric directions and
their imbalance (max / mean), so a run says where its traffic went as well as how long it took.
"""
from __future__ import annotations

from dataclasses import dataclass

from aifabric.lab.lab import Lab


def link_packets(lab: Lab) -> dict[str, int]:
    """Packets sent so far on every link direction ``"switch->peer"`` (peer a switch or a host)."""
    fabric, ctl = lab.fabric, lab.controller
    assert ctl is not None
    out = {}
    for sw in fabric.switches:
        counters = ctl.read_port_counters(sw.name)
        for port, peer in fabric.ports_of(sw.name).items():
            out[f"{sw.name}->{peer}"] = counters[port].packets if port in counters else 0
    return out


@dataclass(frozen=True)
class LinkLoad:
    packets: dict[str, int]         # per direction, during the run
    seconds: float
    rate_pps: float                 # every link's rate, packets/s per direction
    switches: frozenset[str]

    @classmethod
    def between(cls, lab: Lab, before: dict[str, int], after: dict[str, int], seconds: float,
                rate_pps: float) -> "LinkLoad":
        return cls({k: after[k] - before.get(k, 0) for k in after}, seconds, rate_pps,
                   frozenset(sw.name for sw in lab.fabric.switches))

    def _fabric(self) -> dict[str, int]:
        return {k: v for k, v in self.packets.items() if k.split("->")[1] in self.switches}

    def share(self, packets: int) -> float:
        """A direction's packets as a share of what the link could carry in the run."""
        return packets / (self.seconds * self.rate_pps) if self.seconds > 0 and self.rate_pps > 0 else 0.0

    def summary(self) -> dict:
        fabric = self._fabric()
        busy = max(self.packets, key=self.packets.get) if self.packets else ""
        used = [v for v in fabric.values() if v]
        mean = sum(fabric.values()) / len(fabric) if fabric else 0.0
        return {"busiest": busy, "busiest_packets": self.packets.get(busy, 0),
                "busiest_share": round(self.share(self.packets.get(busy, 0)), 3),
                "fabric_packets": sum(fabric.values()), "fabric_directions_used": len(used),
                "fabric_directions": len(fabric), "fabric_mean_share": round(self.share(mean), 3),
                "fabric_imbalance": round(max(fabric.values()) / mean, 2) if mean else 0.0,
                "seconds": round(self.seconds, 2), "rate_pps": self.rate_pps}
