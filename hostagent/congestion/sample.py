"""What the congestion controls of `hostagent.congestion` are told, and what they answer.

The sender (`hostagent.traffic`) hands each control one `AckSample` per ack: its RTT sample, the
receiver's share of it (the host delay, Swift's endpoint delay) and, where the switches stamp
in-band network telemetry (INT), one `HopTelemetry` per hop of the path (what HPCC reads). A
control (`CongestionControl`) turns acks and retransmit timeouts into a window of packets in
flight, a pacing rate, or both; the sender applies whichever is not None.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar


def finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def positive(x: object) -> bool:
    return finite(x) and x > 0  # type: ignore[operator]


def check(owner: object, field: str, ok: bool, want: str) -> None:
    """Raise ValueError naming ``owner``'s ``field`` (and its value) unless ``ok``."""
    if not ok:
        value = getattr(owner, field, None)
        raise ValueError(f"{type(owner).__name__}.{field} = {value!r}: {want}")


P = TypeVar("P")


def check_path(link_bps: float, base_rtt_s: float, frame_bytes: int) -> None:
    """The network a control runs on: a line rate, an unloaded RTT and a frame size."""
    for name, value in (("link_bps", link_bps), ("base_rtt_s", base_rtt_s), ("frame_bytes", frame_bytes)):
        if not positive(value):
            raise ValueError(f"{name} = {value!r}: must be a positive finite number")


@dataclass(frozen=True)
class HopTelemetry:
    """One hop's INT as HPCC reads it, echoed by the receiver in the ack."""
    qlen_bytes: int          # the egress queue when the packet left
    tx_bytes: int            # the egress port's bytes sent so far (a counter)
    ts_s: float              # the hop's egress timestamp, seconds
    link_bps: float          # the egress link's rate

    def __post_init__(self) -> None:
        check(self, "qlen_bytes", finite(self.qlen_bytes) and self.qlen_bytes >= 0, "must be >= 0")
        check(self, "tx_bytes", finite(self.tx_bytes) and self.tx_bytes >= 0, "must be >= 0")
        check(self, "ts_s", finite(self.ts_s), "must be a finite time")
        check(self, "link_bps", positive(self.link_bps), "must be > 0")


@dataclass(frozen=True)
class AckSample:
    """One ack as the sender saw it."""
    now_s: float                 # when the ack arrived (sender's clock, seconds)
    rtt_s: float                 # send to ack, seconds
    host_delay_s: float = 0.0    # the receiver's part of rtt (receive to ack sent); Swift's endpoint delay
    acked: int = 1               # packets this ack covers
    seq: int = 0                 # the acked packet's sequence number (HPCC's lastUpdateSeq test)
    snd_nxt: int = 0             # the sender's next sequence number when the ack arrived
    hops: tuple[HopTelemetry, ...] = ()

    def __post_init__(self) -> None:
        check(self, "now_s", finite(self.now_s), "must be a finite time")
        check(self, "rtt_s", finite(self.rtt_s) and self.rtt_s >= 0, "must be >= 0")
        check(self, "host_delay_s", finite(self.host_delay_s) and self.host_delay_s >= 0, "must be >= 0")
        check(self, "acked", finite(self.acked) and self.acked >= 0, "must be >= 0")


def scale_published(cls: type[P], link_bps: float, base_rtt_s: float, frame_bytes: int, *, paper_rtt_s: float,
                    times: tuple[str, ...], paper_link_bps: float = 0.0, rates: tuple[str, ...] = ()) -> P:
    """``cls``'s published defaults carried over to a network of ``link_bps`` and ``base_rtt_s``:
    the fields named in ``times`` scaled by base_rtt_s over the paper's RTT, those in ``rates``
    by link_bps over the paper's line rate, the others as published."""
    check_path(link_bps, base_rtt_s, frame_bytes)
    d = cls()
    t, r = base_rtt_s / paper_rtt_s, (link_bps / paper_link_bps if rates else 1.0)
    return cls(**{f: getattr(d, f) * t for f in times}, **{f: getattr(d, f) * r for f in rates})


class CongestionControl:
    """The interface the sender drives: feed it acks and losses, read its window and rate. A
    control is made for a network (line rate, unloaded RTT, frame size) and takes its
    ``params_type``'s defaults scaled to it unless ``params`` are given."""

    name: str = ""
    params_type: type

    def __init__(self, link_bps: float, base_rtt_s: float, frame_bytes: int, params=None):
        check_path(link_bps, base_rtt_s, frame_bytes)
        self.params = params if params is not None else self.params_type.scaled(link_bps, base_rtt_s, frame_bytes)
        self.link_bps, self.base_rtt_s, self.frame_bits = float(link_bps), float(base_rtt_s), 8 * frame_bytes
        floor = getattr(self.params, "min_rate_bps", None)
        if floor is not None:
            check(self.params, "min_rate_bps", floor <= link_bps, f"must be <= link_bps {link_bps!r}")
        self._last_timeout_s = -math.inf
        self._start()

    def _start(self) -> None:
        """The control's own state at the start, from ``params`` and the network above."""
        raise NotImplementedError

    def on_ack(self, sample: AckSample) -> None:
        raise NotImplementedError

    def on_loss(self, now_s: float) -> None:
        """A packet given up as lost (a retransmit timeout)."""
        raise NotImplementedError

    def timed_out(self, now_s: float, rtt_s: float) -> bool:
        """A sender's retransmission timeout: told as a loss at most once every ``rtt_s`` (the
        packets of one window time out together; they are one congestion event). True: told."""
        if now_s - self._last_timeout_s < rtt_s:
            return False
        self._last_timeout_s = now_s
        self.on_loss(now_s)
        return True

    @property
    def window_packets(self) -> float | None:
        """Packets allowed in flight; None for a rate-based control (TIMELY)."""
        return None

    @property
    def rate_bps(self) -> float | None:
        """Pacing rate in bits/s of frames; None: no pacing limit."""
        return None
