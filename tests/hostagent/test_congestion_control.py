"""hostagent.congestion: each control's reaction to scripted acks against its paper's formula.

Every expected value is computed here from the published formula (TIMELY's Algorithm 1, Swift's
Algorithm 1 and target-delay formula, HPCC's MeasureInflight/ComputeWind), not by the module's
own helpers. Pure unit tests: no network, no fabric.
"""
from __future__ import annotations

import math

import pytest

from hostagent.congestion import (
    AckSample, CongestionControl, HopTelemetry, Hpcc, HpccParams, Swift, SwiftParams, Timely,
    TimelyParams, make_control)

US = 1e-6


# --------------------------------------------------------------------------------------- TIMELY
# The paper's network: 10 Gb/s, minRTT 20 us; defaults alpha 0.875, beta 0.8, T_low 50 us,
# T_high 500 us, delta 10 Mb/s, N 5. Acks 1 ms apart: every step has its full weight.

def timely(**kw) -> Timely:
    kw.setdefault("init_rate_bps", 5e9)
    return Timely(10e9, 20 * US, 1500, TimelyParams(**kw))


def feed(cc: CongestionControl, rtts_us: list[float], step_s: float = 1e-3, **kw) -> list[float]:
    """One ack per RTT, ``step_s`` apart; the rate (or window) after each."""
    out = []
    for i, rtt in enumerate(rtts_us):
        cc.on_ack(AckSample(now_s=i * step_s, rtt_s=rtt * US, **kw))
        out.append(cc.rate_bps)
    return out


def test_timely_first_ack_only_sets_the_reference():
    assert feed(timely(), [30]) == [5e9]


def test_timely_below_t_low_adds_delta():
    # the RTT rises (a positive gradient), but below T_low the rate still grows by delta
    assert feed(timely(), [30, 40])[-1] == pytest.approx(5e9 + 10e6)


def test_timely_above_t_high_decreases_by_t_high_over_rtt():
    rate = feed(timely(), [600, 800])[-1]
    assert rate == pytest.approx(5e9 * (1 - 0.8 * (1 - 500 / 800)))


def test_timely_positive_gradient_uses_the_ewma_over_min_rtt():
    rtts = [100, 101, 103, 104]            # in [T_low, T_high], rising
    rates = feed(timely(), rtts)
    alpha, beta, min_rtt = 0.875, 0.8, 20.0
    rate, diff = 5e9, 0.0
    for prev, rtt, got in zip(rtts, rtts[1:], rates[1:]):
        diff = (1 - alpha) * diff + alpha * (rtt - prev)
        rate *= 1 - beta * diff / min_rtt
        assert got == pytest.approx(rate)
    assert rates[-1] < 5e9 * 0.9


def test_timely_hai_after_n_negative_gradients():
    rtts = [200, 199, 198, 197, 196, 195, 194]    # falling: six negative gradients in a row
    rates = feed(timely(), rtts)
    steps = [b - a for a, b in zip(rates, rates[1:])]
    delta = 10e6
    assert steps == pytest.approx([delta] * 4 + [5 * delta] * 2)


def test_timely_positive_gradient_ends_hai():
    cc = timely()
    feed(cc, [200, 199, 198, 197, 196, 195])      # in HAI
    before = cc.rate_bps
    cc.on_ack(AckSample(now_s=1.0, rtt_s=196 * US))   # up: EWMA 0.125 * -1 + 0.875 * 1 > 0
    assert cc.rate_bps < before and cc.negative_run == 0
    after_rise = cc.rate_bps
    cc.on_ack(AckSample(now_s=1.001, rtt_s=195 * US))  # down again: one negative, plain delta
    assert cc.rate_bps == pytest.approx(after_rise + 10e6)


def test_timely_step_weighed_by_time_since_update_over_min_rtt():
    cc = timely()
    cc.on_ack(AckSample(now_s=0.0, rtt_s=30 * US))
    cc.on_ack(AckSample(now_s=10 * US, rtt_s=30 * US))    # half a minRTT later: half a delta
    assert cc.rate_bps == pytest.approx(5e9 + 5e6)


def test_timely_rate_clamped_to_floor_and_line_rate():
    cc = timely(init_rate_bps=10e9)
    assert feed(cc, [30, 30])[-1] == 10e9
    rates = feed(timely(min_rate_bps=1e9), [600] + [100_000] * 20)
    assert min(rates) == 1e9 and rates[-1] == 1e9


def test_timely_is_rate_based_and_ignores_loss():
    cc = timely()
    cc.on_loss(0.0)
    assert cc.window_packets is None and cc.rate_bps == 5e9


# ---------------------------------------------------------------------------------------- Swift
# Defaults: ai 1, beta 0.8, max_mdf 0.5, base target 25 us, h 1 us, fs_range 125 us over
# fcwnd [0.1, 100], endpoint target 10 us. 100 Gb/s, 4 KB frames.

def swift(**kw) -> Swift:
    kw.setdefault("init_cwnd", 10.0)
    return Swift(100e9, 20 * US, 4096, SwiftParams(**kw))


def target(fcwnd: float, hops: int = 0, base=25 * US, h=1 * US, fs_range=125 * US,
           fs_min=0.1, fs_max=100.0) -> float:
    """Swift's fabric target: base + hops * h + max(0, min(alpha / sqrt(fcwnd) + beta, fs_range))."""
    alpha = fs_range / (1 / math.sqrt(fs_min) - 1 / math.sqrt(fs_max))
    beta = -alpha / math.sqrt(fs_max)
    return base + hops * h + max(0.0, min(alpha / math.sqrt(fcwnd) + beta, fs_range))


def md(cwnd: float, delay: float, tgt: float, beta=0.8, max_mdf=0.5) -> float:
    return cwnd * max(1 - beta * (delay - tgt) / delay, 1 - max_mdf)


def test_swift_below_target_additive_increase_per_acked_packet():
    cc = swift()
    cc.on_ack(AckSample(now_s=0.0, rtt_s=20 * US, acked=2))
    assert cc.fabric_cwnd == pytest.approx(10 + 1.0 / 10 * 2)
    assert cc.endpoint_cwnd == pytest.approx(10 + 1.0 / 10 * 2)
    assert cc.window_packets == pytest.approx(10.2)


def test_swift_below_one_packet_increase_is_ai_per_acked():
    cc = swift(init_cwnd=0.25)
    cc.on_ack(AckSample(now_s=0.0, rtt_s=20 * US, acked=1))
    assert cc.fabric_cwnd == pytest.approx(0.25 + 1.0)


@pytest.mark.parametrize("delay_us", [50, 500])     # 50: the formula; 500: capped by max_mdf
def test_swift_above_target_multiplicative_decrease(delay_us):
    cc = swift()
    tgt = target(10.0)
    cc.on_ack(AckSample(now_s=0.0, rtt_s=delay_us * US))
    assert cc.fabric_cwnd == pytest.approx(md(10.0, delay_us * US, tgt))
    assert cc.endpoint_cwnd == pytest.approx(10.1)      # no host delay: the endpoint grows
    assert cc.cwnd == cc.fabric_cwnd
    if delay_us == 500:
        assert cc.fabric_cwnd == pytest.approx(5.0)


def test_swift_decreases_at_most_once_per_rtt():
    cc = swift()
    rtt = 50 * US
    cc.on_ack(AckSample(now_s=0.0, rtt_s=rtt))
    first = md(10.0, rtt, target(10.0))
    cc.on_ack(AckSample(now_s=30 * US, rtt_s=rtt))      # within an RTT of the decrease
    assert cc.fabric_cwnd == pytest.approx(first)
    cc.on_ack(AckSample(now_s=50 * US, rtt_s=rtt))      # an RTT later: decreases again
    assert cc.fabric_cwnd == pytest.approx(md(first, rtt, target(first)))


def test_swift_host_delay_shrinks_endpoint_window_not_fabric():
    cc = swift()
    cc.on_ack(AckSample(now_s=0.0, rtt_s=35 * US, host_delay_s=15 * US))   # fabric 20 us
    assert cc.fabric_cwnd == pytest.approx(10.1)                           # below target: grows
    assert cc.endpoint_cwnd == pytest.approx(md(10.0, 15 * US, 10 * US))   # 15 us > 10 us
    assert cc.cwnd == cc.endpoint_cwnd < 10


def test_swift_target_grows_with_fewer_cwnd_and_with_hops():
    for fcwnd in (0.05, 0.1, 0.5, 2.0, 10.0, 50.0, 100.0, 400.0):
        cc = swift(init_cwnd=fcwnd)
        for hops in (0, 3):
            assert cc.target_delay(hops) == pytest.approx(target(fcwnd, hops))
    assert swift(init_cwnd=0.05).target_delay(0) == pytest.approx(25 * US + 125 * US)
    assert swift(init_cwnd=400.0).target_delay(0) == pytest.approx(25 * US)
    targets = [swift(init_cwnd=c).target_delay(0) for c in (0.2, 1.0, 5.0, 50.0)]
    assert targets == sorted(targets, reverse=True)


def test_swift_same_delay_few_flows_back_off_many_flows_grow():
    small, large = swift(init_cwnd=0.5), swift(init_cwnd=50.0)   # many flows -> small windows
    delay = 60 * US             # under target(0.5) ~ 78.6 us, over target(50) ~ 26.7 us
    for cc in (small, large):
        cc.on_ack(AckSample(now_s=0.0, rtt_s=delay))
    assert small.fabric_cwnd == pytest.approx(0.5 + 1.0)
    assert large.fabric_cwnd == pytest.approx(md(50.0, delay, target(50.0)))


def test_swift_hop_count_from_int_raises_the_target():
    hop = HopTelemetry(qlen_bytes=0, tx_bytes=0, ts_s=0.0, link_bps=100e9)
    delay = (target(10.0, 0) + target(10.0, 3)) / 2          # between the two targets
    flat, three = swift(), swift()
    flat.on_ack(AckSample(now_s=0.0, rtt_s=delay))
    three.on_ack(AckSample(now_s=0.0, rtt_s=delay, hops=(hop,) * 3))
    assert flat.fabric_cwnd < 10 < three.fabric_cwnd
    assert swift(hops=3).target_delay(3) == pytest.approx(target(10.0, 3))


def test_swift_paces_below_one_packet():
    cc = swift(init_cwnd=0.4)
    cc.on_ack(AckSample(now_s=0.0, rtt_s=500 * US))   # decrease by max_mdf: 0.2
    assert cc.cwnd == pytest.approx(0.2)
    assert cc.window_packets == 1.0
    assert cc.rate_bps == pytest.approx(0.2 * 4096 * 8 / (500 * US))
    assert swift(init_cwnd=2.0).rate_bps is None
    cc.on_ack(AckSample(now_s=1.0, rtt_s=0.0, acked=0))   # a zero RTT: pacing keeps the last RTT
    assert cc.cwnd == pytest.approx(0.2) and cc.rtt_s == 500 * US
    assert cc.rate_bps == pytest.approx(0.2 * 4096 * 8 / (500 * US))


def test_swift_retransmit_timeout_cuts_then_resets():
    cc = swift(retx_reset_threshold=3)
    cc.on_loss(0.0)
    assert cc.cwnd == pytest.approx(5.0)
    cc.on_loss(1 * US)                                  # within an RTT: no second cut
    assert cc.cwnd == pytest.approx(5.0)
    cc.on_loss(1e-3)                                    # third in a row: min_cwnd
    assert cc.fabric_cwnd == cc.endpoint_cwnd == 0.001
    cc2 = swift(retx_reset_threshold=3)
    cc2.on_loss(0.0)
    cc2.on_ack(AckSample(now_s=1e-3, rtt_s=20 * US))    # an ack resets the count
    cc2.on_loss(2e-3)
    cc2.on_loss(3e-3)
    assert cc2.cwnd > 1


def test_a_windows_timeouts_are_one_loss_to_the_control_once_an_rtt():
    """Swift's third loss in a row resets it to min_cwnd: told every timeout of one window, the
    first window lost would reset it; told once an RTT, it takes three RTTs."""
    cc = swift(retx_reset_threshold=3)
    told = [cc.timed_out(t * US, rtt_s=100 * US) for t in (0, 10, 20, 90)]
    assert told == [True, False, False, False] and cc.cwnd > 1
    assert cc.timed_out(100 * US, rtt_s=100 * US) and cc.timed_out(250 * US, rtt_s=100 * US)
    assert cc.fabric_cwnd == cc.endpoint_cwnd == 0.001


def test_swift_window_clamped():
    cc = swift(max_cwnd=10.05)
    cc.on_ack(AckSample(now_s=0.0, rtt_s=20 * US))
    assert cc.cwnd == 10.05


# ----------------------------------------------------------------------------------------- HPCC
# 100 Gb/s NIC, T 13 us, 1000-byte frames: W_init = 162.5 packets; eta 0.95, maxStage 5, N 125.

B, T, FRAME = 100e9, 13 * US, 1000
W_INIT = B * T / (8 * FRAME)
W_AI = W_INIT * (1 - 0.95) / 125


def hpcc(**kw) -> Hpcc:
    return Hpcc(B, T, FRAME, HpccParams(t_s=T, **kw))


class Path:
    """One hop whose switch reports ``qlen`` and sends at ``tx_fraction`` of B each interval."""

    def __init__(self, rate: float = B):
        self.ts, self.tx, self.rate = 0.0, 0, rate

    def hop(self, qlen: int, tx_fraction: float, dt: float) -> HopTelemetry:
        self.ts += dt
        self.tx += round(tx_fraction * self.rate * dt / 8)
        return HopTelemetry(qlen_bytes=qlen, tx_bytes=self.tx, ts_s=self.ts, link_bps=self.rate)


def u_of(qlen: int, tx_fraction: float, rate: float = B) -> float:
    return qlen * 8 / (rate * T) + tx_fraction


def test_hpcc_queue_gives_u_and_multiplicative_window():
    cc, path = hpcc(), Path()
    cc.on_ack(AckSample(now_s=0, rtt_s=T, seq=0, snd_nxt=10, hops=(path.hop(50_000, 0.9, 0),)))
    assert cc.window_packets == W_INIT and cc.last_update_seq == 10
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=11, snd_nxt=20, hops=(path.hop(50_000, 0.9, T),)))
    u = u_of(50_000, 0.9)               # 0.308 of queue + 0.9 of rate
    assert u >= 0.95
    assert cc.utilization == pytest.approx(u)      # tau = T: the new sample alone
    w = W_INIT / (u / 0.95) + W_AI
    assert cc.window_packets == pytest.approx(w)
    assert cc.reference_window == pytest.approx(w) and cc.last_update_seq == 20
    assert cc.rate_bps == pytest.approx(w * 8 * FRAME / T)


def test_hpcc_ewma_over_tau_by_t():
    cc, path = hpcc(), Path()
    cc.on_ack(AckSample(now_s=0, rtt_s=T, hops=(path.hop(0, 0.4, 0),)))
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=5, hops=(path.hop(0, 0.4, T / 4),)))
    assert cc.utilization == pytest.approx((1 - 0.25) * 1.0 + 0.25 * 0.4)   # U starts at 1


def test_hpcc_queue_counts_as_min_of_this_and_previous_ack():
    cc, path = hpcc(), Path()
    cc.on_ack(AckSample(now_s=0, rtt_s=T, hops=(path.hop(0, 0.4, 0),)))
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=5, hops=(path.hop(80_000, 0.4, T),)))
    assert cc.utilization == pytest.approx(0.4)         # min(80 000, 0): a queue just formed
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=6, hops=(path.hop(60_000, 0.4, T),)))
    assert cc.utilization == pytest.approx(u_of(60_000, 0.4))   # min(60 000, 80 000)


def test_hpcc_most_loaded_hop_and_its_tau():
    cc, a, b = hpcc(), Path(), Path(rate=400e9)
    cc.on_ack(AckSample(now_s=0, rtt_s=T, hops=(a.hop(0, 0.5, 0), b.hop(20_000, 0.5, 0))))
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=5,
                        hops=(a.hop(0, 0.6, T), b.hop(20_000, 0.7, T / 2))))
    u_b = u_of(20_000, 0.7, rate=400e9)
    assert u_b > 0.6
    assert cc.utilization == pytest.approx(0.5 * 1.0 + 0.5 * u_b)


def test_hpcc_reference_window_moves_once_per_rtt():
    cc, path = hpcc(), Path()
    load = dict(qlen=50_000, tx_fraction=0.9, dt=T)
    u = u_of(50_000, 0.9)
    cc.on_ack(AckSample(now_s=0, rtt_s=T, seq=0, snd_nxt=10, hops=(path.hop(**load),)))
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=11, snd_nxt=20, hops=(path.hop(**load),)))
    w1 = W_INIT * 0.95 / u + W_AI
    for seq in (15, 20):        # acks of packets sent before the update: seq <= lastUpdateSeq
        cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=seq, snd_nxt=30, hops=(path.hop(**load),)))
        assert cc.window_packets == pytest.approx(w1 * 0.95 / u + W_AI)   # from Wc = w1 ...
        assert cc.reference_window == pytest.approx(w1)                   # ... which stays
        assert cc.last_update_seq == 20
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=21, snd_nxt=40, hops=(path.hop(**load),)))
    assert cc.reference_window == pytest.approx(w1 * 0.95 / u + W_AI)
    assert cc.last_update_seq == 40


def test_hpcc_additive_stages_then_multiplicative():
    cc, path, seq = hpcc(), Path(), 0

    def rtt_ack(qlen, frac):
        nonlocal seq
        seq += 10
        cc.on_ack(AckSample(now_s=0, rtt_s=T, seq=seq, snd_nxt=seq + 5, hops=(path.hop(qlen, frac, T),)))

    rtt_ack(120_000, 1.0)                 # prime
    rtt_ack(120_000, 1.0)                 # U ~ 1.74: cut from W_init
    u_hi = u_of(120_000, 1.0)
    wc = W_INIT * 0.95 / u_hi + W_AI
    assert cc.reference_window == pytest.approx(wc)
    rtt_ack(0, 0.8)                       # the queue drains (min(0, 120 000) = 0): U = 0.8
    wc += W_AI
    for stage in range(2, 6):             # U = 0.8 < eta: W_AI per RTT, maxStage = 5 stages
        rtt_ack(0, 0.8)
        wc += W_AI
        assert cc.reference_window == pytest.approx(wc) and cc.inc_stage == stage
    rtt_ack(0, 0.8)                       # stage 5 >= maxStage: Wc / (U / eta) + W_AI
    wc = wc / (0.8 / 0.95) + W_AI
    assert wc < W_INIT
    assert cc.reference_window == pytest.approx(wc) and cc.inc_stage == 0


def test_hpcc_w_ai_formula_and_window_bounds():
    cc = hpcc()
    assert cc.w_ai_packets == pytest.approx(162.5 * 0.05 / 125)
    assert hpcc(w_ai_packets=2.0).w_ai_packets == 2.0
    path = Path()
    cc.on_ack(AckSample(now_s=0, rtt_s=T, hops=(path.hop(0, 0.1, 0),)))
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=1, hops=(path.hop(0, 0.1, T),)))   # U 0.1: would grow
    assert cc.window_packets == W_INIT                  # capped at one BDP (the line rate)
    path2, cc2 = Path(), hpcc()
    cc2.on_ack(AckSample(now_s=0, rtt_s=T, hops=(path2.hop(10**9, 1.0, 0),)))
    cc2.on_ack(AckSample(now_s=T, rtt_s=T, seq=1, hops=(path2.hop(10**9, 1.0, T),)))
    assert cc2.rate_bps == pytest.approx(1e9)           # the floor: min_rate_bps


def test_hpcc_needs_int_and_restarts_on_a_new_path():
    cc, path = hpcc(), Path()
    cc.on_ack(AckSample(now_s=0, rtt_s=T))                     # no INT: nothing
    assert cc.last_update_seq is None and cc.window_packets == W_INIT
    cc.on_ack(AckSample(now_s=0, rtt_s=T, hops=(path.hop(0, 0.5, 0),)))
    other = Path()
    cc.on_ack(AckSample(now_s=T, rtt_s=T, seq=1, hops=(path.hop(90_000, 1.0, T), other.hop(0, 1, T))))
    assert cc.utilization == 1.0 and cc.window_packets == W_INIT   # re-primed, not measured
    cc.on_loss(1.0)
    assert cc.window_packets == W_INIT


# ------------------------------------------------------------------- parameters, scaling, factory

@pytest.mark.parametrize("cls,field,value", [
    (TimelyParams, "alpha", 0.0), (TimelyParams, "beta", 1.5), (TimelyParams, "t_high_s", 10e-6),
    (TimelyParams, "min_rtt_s", 0.0), (TimelyParams, "delta_bps", -1.0), (TimelyParams, "hai_n", 0),
    (TimelyParams, "min_rate_bps", math.nan), (TimelyParams, "init_rate_bps", 0.0),
    (SwiftParams, "ai", 0.0), (SwiftParams, "max_mdf", 1.0), (SwiftParams, "base_target_s", -1e-6),
    (SwiftParams, "fs_max_cwnd", 0.05), (SwiftParams, "min_cwnd", 0.0), (SwiftParams, "max_cwnd", 1e-4),
    (SwiftParams, "retx_reset_threshold", 0), (SwiftParams, "hops", -1), (SwiftParams, "hop_scale_s", math.inf),
    (HpccParams, "eta", 1.2), (HpccParams, "max_stage", -1), (HpccParams, "expected_flows", 0),
    (HpccParams, "t_s", 0.0), (HpccParams, "w_ai_packets", -0.5),
])
def test_params_reject_bad_fields_by_name(cls, field, value):
    with pytest.raises(ValueError, match=rf"{cls.__name__}\.{field} ="):
        cls(**{field: value})


def test_construction_validates_the_network():
    with pytest.raises(ValueError, match="link_bps"):
        Timely(0, 20 * US, 1500)
    with pytest.raises(ValueError, match="base_rtt_s"):
        Swift(1e9, -1.0, 1500)
    with pytest.raises(ValueError, match="frame_bytes"):
        Hpcc(1e9, 1e-3, 0)
    with pytest.raises(ValueError, match="min_rate_bps"):
        Timely(1e6, 20 * US, 1500, TimelyParams())      # floor 10 Mb/s above a 1 Mb/s link
    with pytest.raises(ValueError, match="rtt_s"):
        AckSample(now_s=0.0, rtt_s=-1e-6)
    with pytest.raises(ValueError, match="host_delay_s"):
        AckSample(now_s=0.0, rtt_s=1e-6, host_delay_s=-1.0)


def test_scaled_at_the_papers_network_is_the_published_defaults():
    assert TimelyParams.scaled(10e9, 20e-6, 1500) == TimelyParams()
    assert SwiftParams.scaled(100e9, 20e-6, 4096) == SwiftParams()
    assert HpccParams.scaled(100e9, 13e-6, 1000) == HpccParams()


def test_scaled_1000x_slower_keeps_dimensionless_behaviour():
    t = TimelyParams.scaled(10e6, 20e-3, 1500)
    assert (t.t_low_s, t.t_high_s, t.min_rtt_s) == pytest.approx((50e-3, 500e-3, 20e-3))
    assert (t.delta_bps, t.min_rate_bps) == pytest.approx((10e3, 10e3))
    assert (t.alpha, t.beta, t.hai_n) == (0.875, 0.8, 5)
    s = SwiftParams.scaled(100e6, 20e-3, 4096)
    assert (s.base_target_s, s.hop_scale_s, s.fs_range_s) == pytest.approx((25e-3, 1e-3, 125e-3))
    h = HpccParams.scaled(100e6, 13e-3, 1000)
    assert h.t_s == pytest.approx(13e-3) and h.min_rate_bps == pytest.approx(1e6)
    fast, slow = Hpcc(100e9, 13e-6, 1000), Hpcc(100e6, 13e-3, 1000)
    assert slow.w_ai_packets == pytest.approx(fast.w_ai_packets)      # same BDP, same W_AI
    rate_step = lambda cc: cc.w_ai_packets * 8000 / cc.params.t_s      # W_AI / T, bits/s
    assert rate_step(slow) == pytest.approx(rate_step(fast) / 1000)    # in proportion to link_bps


def test_make_control_by_name_with_overrides():
    for name, cls in (("timely", Timely), ("swift", Swift), ("HPCC", Hpcc)):
        cc = make_control(name, 100e6, 5e-3, 1500)
        assert isinstance(cc, cls) and isinstance(cc, CongestionControl)
    cc = make_control("swift", 100e6, 5e-3, 1500, max_mdf=0.3, hops=4)
    assert (cc.params.max_mdf, cc.params.hops) == (0.3, 4)
    assert cc.params.base_target_s == pytest.approx(25e-6 * 5e-3 / 20e-6)
    with pytest.raises(ValueError, match="hpcc, swift, timely"):
        make_control("dcqcn", 100e6, 5e-3, 1500)
    with pytest.raises(ValueError, match="no field bogus"):
        make_control("hpcc", 100e6, 5e-3, 1500, bogus=1)
    with pytest.raises(ValueError, match=r"TimelyParams\.beta"):
        make_control("timely", 100e6, 5e-3, 1500, beta=2.0)
