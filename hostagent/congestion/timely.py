"""TIMELY: Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM 2015.

A rate-based control driven by the gradient of the RTT (the paper's Algorithm 1). Each completion
event (here: each `AckSample`) updates an EWMA of the RTT difference, rtt_diff = (1 - alpha) *
rtt_diff + alpha * (rtt - prev_rtt), normalised by the fabric's minimum RTT, g = rtt_diff / minRTT.
Then, in order: rtt < T_low adds delta; rtt > T_high multiplies the rate by 1 - beta * (1 - T_high
/ rtt); g <= 0 adds delta, or N * delta once the gradient has been negative for N completions in a
row (hyperactive increase, HAI); g > 0 multiplies the rate by 1 - beta * g.

As in the authors' published reference code (people.csail.mit.edu/ghobadi/code/timely.cc), each
step is weighed by the time since the previous update over minRTT, at most 1: a sender that acks
every packet does not add delta per packet. With samples at least minRTT apart the steps are the
paper's exactly.

Left out: the NIC's per-segment (16-64 KB) completion events and its rate limiter (the lab's
sender paces), and any reaction to loss: TIMELY ran over a lossless (PFC) fabric, so `on_loss`
leaves the rate alone; a loss still shows in the RTTs around it.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.congestion.sample import (
    AckSample, CongestionControl, check, finite, positive, scale_published)

PAPER_LINK_BPS = 10e9       # the paper's NICs: 10 Gb/s (delta = 10 Mb/s "for 10Gbps line rate")
PAPER_MIN_RTT_S = 20e-6     # the paper's minRTT: 20 us (HPCC's ns-3 TimelyMinRtt)


@dataclass(frozen=True)
class TimelyParams:
    """TIMELY's parameters in seconds and bits/s; defaults are the published ones.

    Sources: the paper (SIGCOMM 2015); HPCC's ns-3 simulator, github.com/alibaba-edu/
    High-Precision-Congestion-Control, simulation/src/point-to-point/model/rdma-hw.cc (attributes
    TimelyAlpha/Beta/TLow/THigh/MinRtt); the authors' code snippet (URL in the module docstring).
    """
    alpha: float = 0.875        # EWMA weight of the newest RTT difference: ns-3 TimelyAlpha. Uncertain:
                                # the authors' snippet recommends 0.02 (heavier smoothing)
    beta: float = 0.8           # multiplicative decrement: paper; ns-3 TimelyBeta; snippet decreaseFactor
    t_low_s: float = 50e-6      # T_low: paper; ns-3 TimelyTLow 50 us; the snippet: 50 us with 64 KB
                                # segments, 0 with per-packet pacing
    t_high_s: float = 500e-6    # T_high: paper; ns-3 TimelyTHigh 500 us. Uncertain: the snippet says 1 ms
    min_rtt_s: float = PAPER_MIN_RTT_S  # minRTT normalising the gradient: ns-3 TimelyMinRtt 20 us
    delta_bps: float = 10e6     # delta, the additive step: 10 Mb/s at 10 Gb/s (paper; snippet)
    hai_n: int = 5              # N: negative-gradient completions before HAI adds N * delta (paper; snippet
                                # HAI_Thresh 5; ns-3 adds RateHAI after 5 increase stages)
    min_rate_bps: float = 10e6  # rate floor: not in the paper (the snippet: "optional"); lab: one delta
    init_rate_bps: float | None = None  # starting rate; None: the line rate (as ns-3's TIMELY starts)

    def __post_init__(self) -> None:
        check(self, "alpha", finite(self.alpha) and 0 < self.alpha <= 1, "must be in (0, 1]")
        check(self, "beta", finite(self.beta) and 0 < self.beta <= 1, "must be in (0, 1]")
        check(self, "t_low_s", finite(self.t_low_s) and self.t_low_s >= 0, "must be >= 0")
        check(self, "t_high_s", finite(self.t_high_s) and self.t_high_s > self.t_low_s, "must be > t_low_s")
        check(self, "min_rtt_s", positive(self.min_rtt_s), "must be > 0")
        check(self, "delta_bps", positive(self.delta_bps), "must be > 0")
        check(self, "hai_n", isinstance(self.hai_n, int) and self.hai_n >= 1, "must be an int >= 1")
        check(self, "min_rate_bps", positive(self.min_rate_bps), "must be > 0")
        check(self, "init_rate_bps", self.init_rate_bps is None or positive(self.init_rate_bps),
              "must be None or > 0")

    @classmethod
    def scaled(cls, link_bps: float, base_rtt_s: float, frame_bytes: int) -> TimelyParams:
        """The published defaults carried over to a network of ``link_bps`` and ``base_rtt_s``.

        TIMELY's behaviour is dimensionless: the gradient is a difference over minRTT, the
        decrease a ratio of RTTs, delta a fraction of the line rate. An emulator whose links run
        1000x slower than the paper's, with RTTs in milliseconds, keeps that behaviour when the
        time thresholds (T_low, T_high, minRTT) scale with base_rtt_s over the paper's minRTT and
        the rate steps (delta, the floor) with link_bps over the paper's 10 Gb/s. ``frame_bytes``
        is not used (TIMELY counts bits/s)."""
        return scale_published(cls, link_bps, base_rtt_s, frame_bytes, paper_rtt_s=PAPER_MIN_RTT_S,
                               times=("t_low_s", "t_high_s", "min_rtt_s"), paper_link_bps=PAPER_LINK_BPS,
                               rates=("delta_bps", "min_rate_bps"))


class Timely(CongestionControl):
    """TIMELY's rate for one flow; ``params`` defaults to `TimelyParams.scaled` of the network."""

    name, params_type = "timely", TimelyParams
    params: TimelyParams

    def _start(self) -> None:
        p = self.params
        self._rate = self._clamp(p.init_rate_bps if p.init_rate_bps is not None else self.link_bps)
        self.rtt_diff_s = 0.0           # the EWMA of RTT differences
        self.gradient = 0.0             # rtt_diff_s / minRTT, as of the last ack
        self.negative_run = 0           # completions in a row with a negative gradient
        self._prev_rtt_s: float | None = None
        self._last_update_s = 0.0

    def _clamp(self, rate: float) -> float:
        return min(max(rate, self.params.min_rate_bps), self.link_bps)

    def on_ack(self, sample: AckSample) -> None:
        p, rtt = self.params, sample.rtt_s
        if self._prev_rtt_s is None:    # the first sample only sets the reference RTT
            self._prev_rtt_s, self._last_update_s = rtt, sample.now_s
            return
        self.rtt_diff_s = (1 - p.alpha) * self.rtt_diff_s + p.alpha * (rtt - self._prev_rtt_s)
        self._prev_rtt_s = rtt
        g = self.gradient = self.rtt_diff_s / p.min_rtt_s
        self.negative_run = self.negative_run + 1 if g < 0 else 0
        weight = min(max(sample.now_s - self._last_update_s, 0.0) / p.min_rtt_s, 1.0)
        self._last_update_s = sample.now_s
        rate = self._rate
        if rtt < p.t_low_s:
            rate += weight * p.delta_bps
        elif rtt > p.t_high_s:
            rate *= 1 - weight * p.beta * (1 - p.t_high_s / rtt)
        elif g <= 0:
            n = p.hai_n if self.negative_run >= p.hai_n else 1
            rate += weight * n * p.delta_bps
        else:
            rate *= max(0.0, 1 - weight * p.beta * g)
        self._rate = self._clamp(rate)

    def on_loss(self, now_s: float) -> None:
        """TIMELY has no loss reaction (it ran with PFC): the rate stays."""

    @property
    def rate_bps(self) -> float:
        return self._rate
