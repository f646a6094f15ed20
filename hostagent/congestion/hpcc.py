"""HPCC: Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019.

Every switch hop stamps in-band network telemetry (INT: queue length, bytes sent, a timestamp,
the link rate) on the data packet and the receiver echoes it in the ack (the paper's Algorithm
1). MeasureInflight: per hop, against the previous ack's INT, u = min(qlen, qlen_prev) / (B * T)
+ txRate / B, the hop's inflight bytes over its BDP; the most loaded hop's u, covering tau =
ts - ts_prev, is smoothed into U = (1 - tau/T) * U + tau/T * u, tau at most T. ComputeWind:
W = Wc / (U / eta) + W_AI when U >= eta or after maxStage additive stages (then stage 0), else
W = Wc + W_AI (one more stage). The reference window Wc and the stage move only once per RTT: on
an ack of a packet sent after the last update (seq > lastUpdateSeq, which then becomes snd_nxt);
the acks in between react from the same Wc, so fast reactions never compound. The pacing rate is
R = W / T. W_AI = W_init * (1 - eta) / N, with W_init = B_NIC * T and N the expected flows.

Left out: the simulator's per-hop rates (MultiRate) and PINT's sampled INT. An ack without INT
changes nothing, and one with a different number of hops (a new path) only restarts the
measurement. HPCC has no loss reaction (it runs with PFC): `on_loss` does nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.congestion.sample import (
    AckSample, CongestionControl, HopTelemetry, check, finite, positive, scale_published)

PAPER_LINK_BPS = 100e9      # the paper's simulated NICs: 100 Gb/s (ns-3 run.py scales with --bw)
PAPER_BASE_RTT_S = 13e-6    # T of the simulated fat tree: run.py's "RTT=13us". Uncertain: T is
                            # the network's base RTT, which the paper sets per topology


@dataclass(frozen=True)
class HpccParams:
    """HPCC's parameters in seconds, bits/s and packets; defaults are the published ones.

    Sources: the paper (SIGCOMM 2019); its ns-3 simulator, github.com/alibaba-edu/
    High-Precision-Congestion-Control: simulation/src/point-to-point/model/rdma-hw.cc (TargetUtil,
    MiThresh, MinRate) and simulation/run.py (U_TARGET, MI_THRESH, RATE_AI, MIN_RATE).
    """
    eta: float = 0.95            # target utilisation: paper; ns-3 TargetUtil 0.95, run.py --utgt 95
    max_stage: int = 5           # maxStage: paper; ns-3 MiThresh 5 (run.py's --mi defaults to 0)
    expected_flows: float = 125.0  # N of W_AI = W_init (1 - eta) / N: run.py's RATE_AI = 10 * bw/25
                                 # Mb/s is W_AI / T, i.e. N = (1 - eta) B / RATE_AI = 125. Uncertain
    t_s: float = PAPER_BASE_RTT_S  # T, the base RTT of the paths
    min_rate_bps: float = 1e9    # rate floor: run.py MIN_RATE 1000 Mb/s (rdma-hw.cc default 100 Mb/s)
    w_ai_packets: float | None = None  # W_AI; None: W_init (1 - eta) / N for the link and T

    def __post_init__(self) -> None:
        check(self, "eta", finite(self.eta) and 0 < self.eta <= 1, "must be in (0, 1]")
        check(self, "max_stage", isinstance(self.max_stage, int) and self.max_stage >= 0, "must be an int >= 0")
        check(self, "expected_flows", positive(self.expected_flows), "must be > 0")
        check(self, "t_s", positive(self.t_s), "must be > 0")
        check(self, "min_rate_bps", positive(self.min_rate_bps), "must be > 0")
        check(self, "w_ai_packets", self.w_ai_packets is None
              or (finite(self.w_ai_packets) and self.w_ai_packets >= 0), "must be None or >= 0")

    @classmethod
    def scaled(cls, link_bps: float, base_rtt_s: float, frame_bytes: int) -> HpccParams:
        """The published defaults carried over to a network of ``link_bps`` and ``base_rtt_s``.

        HPCC's U is dimensionless (bytes over a BDP, rates over a line rate), so an emulator
        whose links run 1000x slower, with RTTs in milliseconds, keeps its behaviour when T
        scales with base_rtt_s over the paper's base RTT (T becomes base_rtt_s) and the rate
        floor with link_bps over the paper's 100 Gb/s; W_AI follows by its formula, W_init (1 -
        eta) / N with W_init = link_bps * T, which is the same number of packets when the BDP is.
        ``frame_bytes`` only converts W_AI to packets, at construction."""
        return scale_published(cls, link_bps, base_rtt_s, frame_bytes, paper_rtt_s=PAPER_BASE_RTT_S, times=("t_s",),
                               paper_link_bps=PAPER_LINK_BPS, rates=("min_rate_bps",))


class Hpcc(CongestionControl):
    """HPCC's window (and its rate W/T) for one flow; ``params`` defaults to `HpccParams.scaled`."""

    name, params_type = "hpcc", HpccParams
    params: HpccParams

    def _start(self) -> None:
        p = self.params
        self.w_init = self.link_bps * p.t_s / self.frame_bits       # one BDP, packets
        self.w_min = p.min_rate_bps * p.t_s / self.frame_bits
        self.w_ai_packets = (p.w_ai_packets if p.w_ai_packets is not None
                             else self.w_init * (1 - p.eta) / p.expected_flows)
        self.window = self.reference_window = self.w_init           # W and Wc
        self.utilization = 1.0          # U before any measurement (as the ns-3 simulator starts)
        self.inc_stage = 0
        self.last_update_seq: int | None = None
        self._hops: tuple[HopTelemetry, ...] = ()

    def _measure_inflight(self, hops: tuple[HopTelemetry, ...]) -> None:
        t, best, tau = self.params.t_s, None, 0.0
        for new, old in zip(hops, self._hops):
            dt, sent = new.ts_s - old.ts_s, new.tx_bytes - old.tx_bytes
            if dt <= 0 or sent < 0:     # no time passed, or a counter reset: nothing to learn
                continue
            u = (min(new.qlen_bytes, old.qlen_bytes) * 8 / (new.link_bps * t)
                 + sent * 8 / dt / new.link_bps)
            if best is None or u > best:
                best, tau = u, dt
        if best is not None:
            tau = min(tau, t)
            self.utilization = (1 - tau / t) * self.utilization + tau / t * best

    def _compute_wind(self, update_wc: bool) -> None:
        p, u = self.params, self.utilization
        if u >= p.eta or self.inc_stage >= p.max_stage:
            w = self.reference_window * p.eta / u + self.w_ai_packets if u > 0 else self.w_init
            stage = 0
        else:
            w = self.reference_window + self.w_ai_packets
            stage = self.inc_stage + 1
        self.window = min(max(w, self.w_min), self.w_init)
        if update_wc:
            self.reference_window, self.inc_stage = self.window, stage

    def on_ack(self, sample: AckSample) -> None:
        if not sample.hops:
            return
        if len(sample.hops) != len(self._hops):     # the first INT, or a new path
            self._hops = sample.hops
            if self.last_update_seq is None:
                self.last_update_seq = sample.snd_nxt
            return
        self._measure_inflight(sample.hops)
        self._hops = sample.hops
        update = self.last_update_seq is None or sample.seq > self.last_update_seq
        self._compute_wind(update)
        if update:
            self.last_update_seq = sample.snd_nxt

    def on_loss(self, now_s: float) -> None:
        """HPCC has no loss reaction (it runs with PFC): the window stays."""

    @property
    def window_packets(self) -> float:
        return self.window

    @property
    def rate_bps(self) -> float:
        """R = W / T, in bits/s of frames."""
        return self.window * self.frame_bits / self.params.t_s
