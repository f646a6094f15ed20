"""Swift: Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in the
Datacenter", SIGCOMM 2020.

AIMD on delay against a target (the paper's Algorithm 1): below the target a window grows by
ai / cwnd per acked packet (ai per packet while cwnd < 1); at or above it the window shrinks by
max(1 - beta * (delay - target) / delay, 1 - max_mdf), at most once per RTT. The RTT is split in
two: the fabric delay (rtt - the receiver's host delay) drives the fabric window fcwnd against a
target that grows with the path's hops (hops * h) and with the number of flows sharing the
bottleneck, seen as a smaller fcwnd (flow scaling: alpha / sqrt(fcwnd) + beta, clamped to
[0, fs_range]); the host (endpoint) delay drives the endpoint window ecwnd against a fixed target.
The sender's window is min(fcwnd, ecwnd); below one packet the sender paces, one packet every
rtt / cwnd. A retransmit timeout cuts by (1 - max_mdf), and to min_cwnd after
retx_reset_threshold timeouts in a row.

Left out: fast recovery on SACK holes (the lab's sender reports only timeouts), the hop count
from TTLs (here: the number of INT hops on the ack, else `SwiftParams.hops`), QoS classes and NIC
timestamps. Algorithm 1 records the last decrease whenever cwnd <= cwnd_prev; here each window
records its own, and only when it actually shrinks, so a window held at a bound (or one waiting
out its RTT) is not kept from its next decrease.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hostagent.congestion.sample import (
    AckSample, CongestionControl, check, finite, positive, scale_published)

PAPER_BASE_RTT_S = 20e-6    # reference unloaded RTT for scaled(). Uncertain: the paper reports tails
                            # of 50 us at < 3x the minimal latency, i.e. an unloaded RTT of ~15-20 us
FABRIC, ENDPOINT = "fabric", "endpoint"


@dataclass(frozen=True)
class SwiftParams:
    """Swift's parameters in seconds and packets.

    The paper publishes the algorithm and its formulas, not Google's production values; where a
    value is not in the paper the comment says where it comes from (public ports: htsim/UEC,
    INET, ns-3 ports found by code search) and that it is uncertain.
    """
    ai: float = 1.0                # additive increment, packets per RTT: ports (htsim/UEC); uncertain
    beta: float = 0.8              # MD constant: ports (htsim/UEC "0.8"); uncertain
    max_mdf: float = 0.5           # maximum multiplicative decrease factor: every port found; uncertain
    base_target_s: float = 25e-6   # base target delay (one hop, few flows): uncertain (ports: 3-25 us)
    hop_scale_s: float = 1e-6      # h, target added per hop: uncertain (ports: 1-4 us)
    fs_range_s: float = 125e-6     # flow-scaling range: 5 x base target, as htsim-style ports; uncertain
    fs_min_cwnd: float = 0.1       # fcwnd at which flow scaling reaches fs_range (paper's example; ports)
    fs_max_cwnd: float = 100.0     # fcwnd at which flow scaling reaches 0 (same)
    endpoint_target_s: float = 10e-6   # host-delay target: uncertain (an ns-3 port: 10 us)
    min_cwnd: float = 0.001        # the paper: cwnd may fall to 0.001 packets (then paced)
    max_cwnd: float = 1000.0       # cap: not in the paper (lab)
    retx_reset_threshold: int = 5  # RETX_RESET_THRESHOLD: not published; an ns-3 port's 5 (others 3, 4)
    hops: int = 0                  # hops assumed when an ack carries no INT (the paper reads TTLs) (lab)
    init_cwnd: float | None = None # starting window; None: one BDP of the network (the paper gives none)

    def __post_init__(self) -> None:
        check(self, "ai", positive(self.ai), "must be > 0")
        check(self, "beta", positive(self.beta), "must be > 0")
        check(self, "max_mdf", finite(self.max_mdf) and 0 < self.max_mdf < 1, "must be in (0, 1)")
        check(self, "base_target_s", positive(self.base_target_s), "must be > 0")
        check(self, "hop_scale_s", finite(self.hop_scale_s) and self.hop_scale_s >= 0, "must be >= 0")
        check(self, "fs_range_s", finite(self.fs_range_s) and self.fs_range_s >= 0, "must be >= 0")
        check(self, "fs_min_cwnd", positive(self.fs_min_cwnd), "must be > 0")
        check(self, "fs_max_cwnd", finite(self.fs_max_cwnd) and self.fs_max_cwnd > self.fs_min_cwnd,
              "must be > fs_min_cwnd")
        check(self, "endpoint_target_s", positive(self.endpoint_target_s), "must be > 0")
        check(self, "min_cwnd", positive(self.min_cwnd), "must be > 0")
        check(self, "max_cwnd", finite(self.max_cwnd) and self.max_cwnd >= self.min_cwnd, "must be >= min_cwnd")
        check(self, "retx_reset_threshold", isinstance(self.retx_reset_threshold, int)
              and self.retx_reset_threshold >= 1, "must be an int >= 1")
        check(self, "hops", isinstance(self.hops, int) and self.hops >= 0, "must be an int >= 0")
        check(self, "init_cwnd", self.init_cwnd is None or positive(self.init_cwnd), "must be None or > 0")

    @classmethod
    def scaled(cls, link_bps: float, base_rtt_s: float, frame_bytes: int) -> SwiftParams:
        """The defaults carried over to a network of ``link_bps`` and ``base_rtt_s``.

        Swift compares delays with targets, and counts windows in packets: an emulator whose
        links run 1000x slower, with RTTs in milliseconds, keeps the control's dimensionless
        behaviour (delay over target, a BDP's worth of packets) when every time (base target,
        per-hop scaling, flow-scaling range, endpoint target) scales with base_rtt_s over the
        paper's base RTT. Swift has no rate step, so ``link_bps`` and ``frame_bytes`` only
        enter through the window's BDP, which the emulator keeps."""
        return scale_published(cls, link_bps, base_rtt_s, frame_bytes, paper_rtt_s=PAPER_BASE_RTT_S,
                               times=("base_target_s", "hop_scale_s", "fs_range_s", "endpoint_target_s"))


class Swift(CongestionControl):
    """Swift's windows for one flow; ``params`` defaults to `SwiftParams.scaled` of the network."""

    name, params_type = "swift", SwiftParams
    params: SwiftParams

    def _start(self) -> None:
        p = self.params
        init = p.init_cwnd if p.init_cwnd is not None else self.link_bps * self.base_rtt_s / self.frame_bits
        self._cwnd = {FABRIC: self._clamp(init), ENDPOINT: self._clamp(init)}
        self._last_decrease_s = {FABRIC: -math.inf, ENDPOINT: -math.inf}
        self.rtt_s = self.base_rtt_s        # the latest RTT sample
        self.retransmit_cnt = 0
        self._fs_alpha = p.fs_range_s / (1 / math.sqrt(p.fs_min_cwnd) - 1 / math.sqrt(p.fs_max_cwnd))
        self._fs_beta = -self._fs_alpha / math.sqrt(p.fs_max_cwnd)

    def _clamp(self, cwnd: float) -> float:
        return min(max(cwnd, self.params.min_cwnd), self.params.max_cwnd)

    def target_delay(self, hops: int) -> float:
        """The fabric target for a path of ``hops`` at the current fabric window."""
        return self.target_for(hops, self.fabric_cwnd)

    def target_for(self, hops: int, fabric_cwnd: float) -> float:
        """The fabric target for a path of ``hops`` at a fabric window of ``fabric_cwnd``."""
        p = self.params
        flow = self._fs_alpha / math.sqrt(fabric_cwnd) + self._fs_beta
        return p.base_target_s + hops * p.hop_scale_s + max(0.0, min(flow, p.fs_range_s))

    def _can_decrease(self, which: str, now_s: float) -> bool:
        return now_s - self._last_decrease_s[which] >= self.rtt_s

    def _set(self, which: str, cwnd: float, now_s: float) -> None:
        cwnd = self._clamp(cwnd)
        if cwnd < self._cwnd[which]:
            self._last_decrease_s[which] = now_s
        self._cwnd[which] = cwnd

    def _react(self, which: str, delay: float, target: float, sample: AckSample) -> None:
        p, cwnd = self.params, self._cwnd[which]
        if delay < target:
            self._set(which, cwnd + (p.ai / cwnd if cwnd >= 1 else p.ai) * sample.acked, sample.now_s)
        elif self._can_decrease(which, sample.now_s):
            factor = max(1 - p.beta * (delay - target) / delay, 1 - p.max_mdf)
            self._set(which, cwnd * factor, sample.now_s)

    def on_ack(self, sample: AckSample) -> None:
        if sample.rtt_s > 0:                # a zero sample (clock granularity) keeps the last
            self.rtt_s = sample.rtt_s
        self.retransmit_cnt = 0
        target = self.target_delay(len(sample.hops) if sample.hops else self.params.hops)
        self._react(FABRIC, max(sample.rtt_s - sample.host_delay_s, 0.0), target, sample)
        self._react(ENDPOINT, sample.host_delay_s, self.params.endpoint_target_s, sample)

    def on_loss(self, now_s: float) -> None:
        p = self.params
        self.retransmit_cnt += 1
        for which in (FABRIC, ENDPOINT):
            if self.retransmit_cnt >= p.retx_reset_threshold:
                self._set(which, p.min_cwnd, now_s)
            elif self._can_decrease(which, now_s):
                self._set(which, self._cwnd[which] * (1 - p.max_mdf), now_s)

    @property
    def fabric_cwnd(self) -> float:
        return self._cwnd[FABRIC]

    @property
    def endpoint_cwnd(self) -> float:
        return self._cwnd[ENDPOINT]

    @property
    def cwnd(self) -> float:
        """min(fcwnd, ecwnd), in packets; may be below one."""
        return min(self._cwnd.values())

    @property
    def window_packets(self) -> float:
        """The window, at least one packet: below one, `rate_bps` spaces the packets."""
        return max(self.cwnd, 1.0)

    @property
    def rate_bps(self) -> float | None:
        """cwnd * frame bits / rtt while cwnd < 1 (one packet every rtt / cwnd); else None."""
        if self.cwnd >= 1:
            return None
        return min(self.cwnd * self.frame_bits / self.rtt_s, self.link_bps)
