"""Scaling a real iteration down to the emulated links.

One stated factor ``S`` divides every byte count. Compute durations are divided by
``S * R_emulated / R_real``: the same factor, taken relative to the links, so compute keeps its
proportion to communication when a real link of ``R_real`` is replaced by an emulated one of
``R_emulated``. Both shrink by the one time dilation ``D = R_real / (S * R_emulated)``: an
emulated iteration lasts D times the real one, and every ratio the lab reports (exposed
communication over step time, one collective kind against another) is the real one.
`fit` picks S so the iteration takes a given time on the emulated links.

What scaling cannot preserve (`CANNOT_PRESERVE`, printed with every scaled workload):
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from aifabric.workloads.errors import require_positive

REAL_LINK_GBPS = 400.0
"""One GPU's NIC in a current training cluster (400 Gb/s, InfiniBand NDR or RoCE)."""
EMULATED_LINK_MBPS = 1.2
"""The lab's emulated links at ``aifabric demo allreduce``'s default 100 packets/s of 1500 bytes."""

CANNOT_PRESERVE = (
    "latency: propagation, switch and host-stack delays are not scaled, so they weigh D times less "
    "(D > 1) or more (D < 1) against transfers than on the real fabric",
    "per-packet overheads: headers, the MTU and per-packet processing are not scaled; a message of "
    "bytes/S is fewer packets, so header share, pipelining over hops and packet-rate limits differ",
    "small messages: a message scaled below one packet (or one element) is rounded up",
    "congestion control and load balancing dynamics that depend on the RTT-to-transfer ratio "
    "(window sizes, flowlet gaps, ECN thresholds in packets)",
    "compute jitter and kernel launch overheads, which the emulated durations do not model",
)
__doc__ += "".join(f"\n* {item}" for item in CANNOT_PRESERVE) + "\n"


@dataclass(frozen=True)
class Scale:
    factor: float = 1.0                             # S: bytes are divided by it
    real_link_gbps: float = REAL_LINK_GBPS
    emulated_link_mbps: float = EMULATED_LINK_MBPS

    def __post_init__(self) -> None:
        require_positive("scale.factor", self.factor)
        require_positive("scale.real_link_gbps", self.real_link_gbps)
        require_positive("scale.emulated_link_mbps", self.emulated_link_mbps)

    @property
    def real_bytes_per_s(self) -> float:
        return self.real_link_gbps * 1e9 / 8

    @property
    def emulated_bytes_per_s(self) -> float:
        return self.emulated_link_mbps * 1e6 / 8

    @property
    def time_dilation(self) -> float:
        """D: emulated durations over real ones, for compute and communication alike."""
        return self.real_bytes_per_s / (self.factor * self.emulated_bytes_per_s)

    def bytes(self, real: int) -> int:
        """Emulated size of a real message: real / S, rounded up, at least one byte."""
        return max(1, math.ceil(real / self.factor)) if real else 0

    def seconds(self, real: float) -> float:
        return real * self.time_dilation

    def to_dict(self) -> dict:
        return {"factor": self.factor, "real_link_gbps": self.real_link_gbps,
                "emulated_link_mbps": self.emulated_link_mbps, "time_dilation": self.time_dilation,
                "cannot_preserve": list(CANNOT_PRESERVE)}


def fit(real_step_seconds: float, target_seconds: float, real_link_gbps: float = REAL_LINK_GBPS,
        emulated_link_mbps: float = EMULATED_LINK_MBPS) -> Scale:
    """The Scale whose emulated iteration takes ``target_seconds`` when the real one takes
    ``real_step_seconds``: S = R_real * real / (R_emulated * target). S below 1 (a target the
    emulated links reach with messages larger than the real ones) is returned as it is."""
    require_positive("target_seconds", target_seconds)
    require_positive("real_step_seconds", real_step_seconds)
    probe = Scale(1.0, real_link_gbps, emulated_link_mbps)
    return Scale(probe.time_dilation * real_step_seconds / target_seconds, real_link_gbps, emulated_link_mbps)
