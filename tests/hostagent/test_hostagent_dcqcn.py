"""DCQCN's reaction point (hostagent.agent.dcqcn): alpha, the cut on CNP, recovery stages,
timers and byte counter, and the scaling to emulated line rates."""
from __future__ import annotations

import pytest

from hostagent.agent.dcqcn import REFERENCE_LINE_BPS, DcqcnParams, ReactionPoint

LINE = 100e6
# round numbers to check the arithmetic: 1 s timers, a 1000-byte counter, F = 2
P = DcqcnParams(line_rate_bps=LINE, g=1 / 256, alpha_timer_s=1.0, rate_timer_s=1.0, byte_counter=1000,
                fast_recovery_steps=2, ai_rate_bps=1e6, hai_rate_bps=10e6, min_rate_bps=1e6)
G = 1 / 256


def test_starts_at_line_rate_and_the_first_cnp_halves_it() -> None:
    rp = ReactionPoint(P, now=0.0)
    assert (rp.rate_bps, rp.rt, rp.alpha) == (LINE, LINE, 1.0)
    rp.on_cnp(0.5)
    assert rp.rt == LINE                               # target: the rate before the cut
    assert rp.rate_bps == pytest.approx(LINE / 2)      # RC (1 - alpha/2), alpha = 1
    assert rp.alpha == pytest.approx((1 - G) * 1 + G)  # = 1: alpha = (1-g) alpha + g
    assert rp.stage == "cut" and rp.cnps == 1


def test_alpha_decays_once_per_timer_without_cnp_and_sets_the_next_cut() -> None:
    rp = ReactionPoint(P, now=0.0, rc=LINE)
    rp.on_cnp(0.0)
    rp.advance(3.5)                                    # alpha timer fired at 1, 2, 3
    alpha = (1 - G) ** 3
    assert rp.alpha == pytest.approx(alpha)
    before = rp.rate_bps
    rp.on_cnp(3.5)
    assert rp.rate_bps == pytest.approx(before * (1 - alpha / 2))
    assert rp.alpha == pytest.approx((1 - G) * alpha + G)


def test_fast_recovery_halves_the_gap_to_the_target_f_times() -> None:
    rp = ReactionPoint(P, now=0.0)
    rp.on_cnp(0.0)                                     # RC = 50M, RT = 100M
    rates = []
    for t in (1.0, 2.0):
        rp.advance(t)
        rates.append(rp.rate_bps)
    assert rates == pytest.approx([75e6, 87.5e6])
    assert rp.stage == "fast_recovery" and rp.rt == LINE


def test_additive_then_hyper_increase_move_the_target() -> None:
    params = DcqcnParams(line_rate_bps=LINE, alpha_timer_s=100.0, rate_timer_s=1.0, byte_counter=1000,
                         fast_recovery_steps=2, ai_rate_bps=1e6, hai_rate_bps=10e6, min_rate_bps=1e6)
    rp = ReactionPoint(params, now=0.0)
    rp.on_cnp(0.0)
    rp.on_cnp(0.0)                                     # RC = 25M, RT = 50M
    rp.advance(2.0)                                    # two timer events: fast recovery
    assert (rp.timer_events, rp.stage, rp.rt) == (2, "fast_recovery", 50e6)
    rp.advance(3.0)                                    # T = 3 > F, BC = 0: additive
    assert rp.stage == "additive" and rp.rt == pytest.approx(51e6)
    rc = rp.rate_bps
    rp.on_sent(3000, 3.0)                              # BC = 1, 2 (fast-recovery counts), 3: both past F
    assert rp.byte_events == 3 and rp.stage == "hyper"
    # the BC events 1 and 2 added R_AI each (T past F), the third R_HAI * (min(T, BC) - F) = 1
    assert rp.rt == pytest.approx(51e6 + 2e6 + 10e6)
    assert rp.rate_bps > rc


def test_byte_counter_counts_across_calls_and_restarts_on_cnp() -> None:
    rp = ReactionPoint(P, now=0.0)
    rp.on_cnp(0.0)
    rp.on_sent(600, 0.1)
    rp.on_sent(600, 0.2)
    assert rp.byte_events == 1
    rp.on_cnp(0.3)
    rp.on_sent(900, 0.4)
    assert rp.byte_events == 0 and rp.timer_events == 0


def test_rates_stay_between_the_minimum_and_the_line() -> None:
    rp = ReactionPoint(P, now=0.0)
    for n in range(40):
        rp.on_cnp(0.001 * n)
    assert rp.rate_bps == P.min_rate_bps
    rp.advance(500.0)
    rp.on_sent(10 ** 7, 500.0)
    assert rp.rate_bps <= LINE and rp.rt <= LINE
    assert rp.rate_bps == pytest.approx(LINE, rel=1e-3)


def test_scaling_keeps_packet_times_and_fractions_of_the_line() -> None:
    base = DcqcnParams()
    assert base.line_rate_bps == REFERENCE_LINE_BPS and base.g == 1 / 256 and base.cnp_interval_s == 50e-6
    emu = base.scaled(10e6)                            # 4000 times slower
    assert emu.time_scale == pytest.approx(4000)
    assert emu.cnp_interval_s == pytest.approx(0.2) and emu.rate_timer_s == pytest.approx(0.22)
    assert emu.ai_rate_bps / emu.line_rate_bps == pytest.approx(base.ai_rate_bps / base.line_rate_bps)
    assert emu.byte_counter == base.byte_counter and emu.g == base.g


@pytest.mark.parametrize("kw", [{"line_rate_bps": 0}, {"g": 0}, {"ai_rate_bps": 2e11}, {"cnp_interval_s": -1}])
def test_bad_parameters_are_named(kw) -> None:
    with pytest.raises(ValueError, match=next(iter(kw))):
        DcqcnParams(**kw)
