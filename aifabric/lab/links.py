"""The lab's links: their rate and its unit, the frames they carry, and limiting every link of a
running lab to one rate.

A rate is bits per second, as a real link's (``LinkRate.parse("10")`` is 10 Mbit/s), or packets
per second, BMv2's unit for its queues, kept as a unit one names (``"1000pps"``): a link limited in
packets charges a 64-byte frame as much as a 1500-byte one, which is how the lab's links worked
before they counted bits. A link in bits spends on a frame of L bytes what Ethernet spends on it,
`softswitch.queues.wire_bytes` (the frame padded to 60 bytes, FCS, preamble and gap).

`limit_links(lab, plan)` limits every link direction of a lab to ``plan.rate``: each switch port's
egress queue (softswitch: its bit rate; BMv2, which limits queues only in packets/s: the bit rate
over the wire size of ``plan.frame_bytes``, the frame the run's traffic is made of, said on the
lab's progress line) and each host's own uplink, shaped by a TBF qdisc counting the same Ethernet
overhead (a switch only limits what it sends).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from softswitch.queues import WIRE_OVERHEAD, MAX_BITRATE, MAX_RATE_PPS, wire_bytes

MTU = 1500
MTU_FRAME = MTU + 14                  # the largest frame a host sends (Ethernet header, no FCS)
DEFAULT_QUEUE = 1024                  # switch queue depth, packets: the windows of every rank fit

Unit = Literal["bit", "pps"]
_PREFIX = {"": 1e6, "k": 1e3, "m": 1e6, "g": 1e9}      # a bare number is Mbit/s
_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:(pps)|([kmg]?)(?:bit|b|bps|bit/s)?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class LinkRate:
    """One link direction's rate: ``value`` bits/s (``unit`` "bit") or packets/s ("pps")."""

    value: float
    unit: Unit = "bit"

    def __post_init__(self) -> None:
        most = MAX_BITRATE if self.unit == "bit" else MAX_RATE_PPS
        least = 1000 if self.unit == "bit" else 1
        if self.unit not in ("bit", "pps") or not least <= self.value <= most:
            raise ValueError(f"link rate {self.describe()}: must be {_show(least, self.unit)} .. {_show(most, self.unit)}")

    @classmethod
    def parse(cls, text: str | float) -> "LinkRate":
        """``"10"`` or ``"10M"``/``"10Mbit"``/``"10mbps"``: 10 Mbit/s; ``"500k"``, ``"1G"``;
        ``"1000pps"``: packets/s. ValueError naming the text otherwise."""
        m = _RATE.match(str(text))
        if m is None:
            raise ValueError(f"link rate {text!r}: a number of Mbit/s (10, 2.5M, 500k, 1G) or of packets/s (1000pps)")
        number = float(m.group(1))
        if m.group(2):
            if number != int(number):
                raise ValueError(f"link rate {text!r}: packets/s is a whole number")
            return cls(int(number), "pps")
        return cls(number * _PREFIX[m.group(3).lower()], "bit")

    def bits_per_s(self, frame_bytes: int = MTU_FRAME) -> float:
        """Bits/s a link carries (in packets/s: of frames of ``frame_bytes``, with Ethernet's overhead)."""
        return self.value if self.unit == "bit" else self.value * wire_bytes(frame_bytes) * 8

    def packets_per_s(self, frame_bytes: int = MTU_FRAME) -> float:
        """Frames of ``frame_bytes`` a second the link carries."""
        return self.value if self.unit == "pps" else self.value / (wire_bytes(frame_bytes) * 8)

    def payload_bytes_per_s(self, frame_bytes: int, payload_bytes: int) -> float:
        """Bytes of payload a second when every frame is ``frame_bytes`` carrying ``payload_bytes``."""
        return self.packets_per_s(frame_bytes) * payload_bytes

    def seconds(self, frame_bytes: int, frames: float = 1) -> float:
        """How long ``frames`` frames of ``frame_bytes`` take on the link."""
        return frames / self.packets_per_s(frame_bytes)

    def describe(self) -> str:
        return _show(self.value, self.unit)

    __str__ = describe

    def to_dict(self) -> dict:
        return {"value": self.value, "unit": self.unit, "text": self.describe()}


def _show(value: float, unit: Unit) -> str:
    if unit == "pps":
        return f"{value:g} packets/s"
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.4g} {prefix}bit/s"
    return f"{value:g} bit/s"


def rate_arg(text: str) -> LinkRate:
    """argparse type of every ``--rate``: `LinkRate.parse`, its error as argparse's."""
    import argparse

    try:
        return LinkRate.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclass(frozen=True)
class LinkPlan:
    """How a run limits a lab's links: every direction at ``rate``, switch queues ``queue_depth``
    packets deep, the hosts' token bucket ``burst_bytes`` deep (a frame larger than it could never
    leave: two of the largest frames), ``frame_bytes`` the frames the run mostly sends (what a
    packets/s limit is converted with where one unit must stand for the other)."""

    rate: LinkRate
    queue_depth: int = DEFAULT_QUEUE
    burst_bytes: int = 2 * MTU_FRAME
    frame_bytes: int = MTU_FRAME

    @property
    def bits_per_s(self) -> float:
        return self.rate.bits_per_s(self.frame_bytes)

    @property
    def packets_per_s(self) -> float:
        """Frames of ``frame_bytes`` a second."""
        return self.rate.packets_per_s(self.frame_bytes)

    def bmv2_packets_per_s(self) -> int:
        """The packets/s a BMv2 queue is set to for this plan (its only unit): frames of ``frame_bytes``."""
        return max(1, round(self.packets_per_s))

    def describe(self) -> str:
        per = (f"{self.rate.describe()} per link direction" if self.rate.unit == "bit" else
               f"{self.rate.describe()} per link direction ({self.bits_per_s / 1e6:.3g} Mbit/s of "
               f"{self.frame_bytes}-byte frames)")
        return f"{per}, switch queues of {self.queue_depth} packets"

    def to_dict(self) -> dict:
        return {"rate": self.rate.to_dict(), "bits_per_s": self.bits_per_s, "queue_depth": self.queue_depth,
                "frame_bytes": self.frame_bytes}


def store_and_forward_rtt(rate: LinkRate, links: int, frame_bytes: int, ack_frame_bytes: int) -> float:
    """The unloaded RTT of a path of ``links`` links at ``rate`` had each link held every frame
    for its serialisation time (store and forward): a frame of ``frame_bytes`` out, an
    acknowledgement of ``ack_frame_bytes`` back. The host congestion controls' thresholds scale
    to it: the emulator forwards an idle link's frame at once (its token bucket holds two), so
    its own unloaded RTT is shorter than one frame's time on a link, where a real fabric's is many."""
    return links * (frame_bytes + ack_frame_bytes) * 8 / rate.bits_per_s(frame_bytes)


def limit_links(lab, plan: LinkPlan) -> None:
    """Every switch port of ``lab`` at ``plan.rate``; every host's uplink shaped to the same rate."""
    from aifabric.lab.report import progress

    bmv2 = [sw.name for sw in lab.fabric.switches if lab.switch(sw.name).target_kind == "bmv2"]
    for sw in lab.fabric.switches:
        node = lab.switch(sw.name)
        if plan.rate.unit == "pps" or sw.name in bmv2:
            node.set_queue_rate(int(plan.rate.value) if plan.rate.unit == "pps" else plan.bmv2_packets_per_s())
        else:
            node.set_queue_bitrate(round(plan.rate.value))
        node.set_queue_depth(plan.queue_depth)
    if bmv2 and plan.rate.unit == "bit":
        progress(f"BMv2 limits queues only in packets/s: its ports at {plan.bmv2_packets_per_s()} packets/s, "
                 f"{plan.rate.describe()} of {plan.frame_bytes}-byte frames (smaller frames leave slower than "
                 f"on a link in bits, larger ones faster)")
    bits = math.floor(plan.bits_per_s)
    limit = plan.queue_depth * MTU_FRAME
    for h in lab.fabric.hosts:
        host = lab.host(h.name)
        out = host.cmd(f"tc qdisc replace dev {host.defaultIntf()} root tbf rate {bits}bit "
                       f"burst {plan.burst_bytes} limit {limit} overhead {WIRE_OVERHEAD} 2>&1")
        if out.strip():
            raise RuntimeError(f"{h.name}: tc tbf failed: {out.strip()}")
    if getattr(lab, "lossless", None) is not None:     # the classes' queues again; PAUSE quanta at the links' rate
        lab.lossless.links_limited(plan.bits_per_s)
