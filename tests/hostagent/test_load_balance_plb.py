"""PLB's state machine (hostagent.agent.load_balance_plb) against the kernel's semantics (net/ipv4/tcp_plb.c)."""
from __future__ import annotations

import pytest

from hostagent.agent.load_balance_plb import PlbParams, PlbState, cong_ratio

CONGESTED = cong_ratio(60, 100)        # 60% CE: at or above K = 50%
CLEAR = cong_ratio(40, 100)            # 40%: below K


def run(state: PlbState, ratios, *, in_flight: bool = True, now: float = 0.0) -> list[int]:
    """The rounds (1-based) after which the flow repathed."""
    out = []
    for n, ratio in enumerate(ratios, 1):
        state.update(ratio)
        if state.check_rehash(now, in_flight):
            out.append(n)
    return out


def test_ratio_is_the_kernels_integer_scale() -> None:
    assert cong_ratio(1, 2) == 128 and cong_ratio(0, 10) == 0 and cong_ratio(10, 10) == 256
    assert cong_ratio(1, 3) == 85                # (1 << 8) // 3
    assert cong_ratio(5, 0) is None              # no deliveries: not a round
    assert PlbParams() == PlbParams(rehash_rounds=12, idle_rehash_rounds=3, cong_thresh=128, suspend_rto_sec=60)
    assert PlbParams.with_fraction(0.5).cong_thresh == 128


def test_n_consecutive_congested_rounds_repath_and_the_count_restarts() -> None:
    state = PlbState()
    assert run(state, [CONGESTED] * 36) == [12, 24, 36]
    assert (state.rehashes, state.rounds, state.congested_rounds) == (3, 36, 36)


def test_exactly_k_is_congested_and_a_clear_round_restarts_the_count() -> None:
    state = PlbState()
    assert run(state, [cong_ratio(1, 2)] * 12) == [12]          # ratio == K counts as congested
    state = PlbState()
    assert run(state, [CONGESTED] * 11 + [CLEAR] + [CONGESTED] * 11) == []
    assert state.consec_cong_rounds == 11


def test_below_k_never_repaths() -> None:
    state = PlbState()
    assert run(state, [cong_ratio(127, 256)] * 500, in_flight=False) == []
    assert state.rehashes == 0 and state.congested_rounds == 0


def test_rounds_without_deliveries_neither_count_nor_clear() -> None:
    state = PlbState()
    assert run(state, [CONGESTED, None] * 12) == [23]            # 12 congested rounds, gaps between
    assert state.rounds == 12


def test_m_congested_rounds_with_nothing_in_flight_repath_at_once() -> None:
    state = PlbState()
    assert run(state, [CONGESTED] * 3, in_flight=False) == [3]
    state = PlbState()
    assert run(state, [CONGESTED] * 2, in_flight=False) == []    # M not reached yet
    state = PlbState(PlbParams(idle_rehash_rounds=0))              # 0 turns the idle rule off
    assert run(state, [CONGESTED] * 11, in_flight=False) == []


def test_an_rto_holds_plb_still_then_lets_it_repath() -> None:
    params = PlbParams(suspend_rto_sec=60)
    state = PlbState(params)
    run(state, [CONGESTED] * 5)
    state.on_rto(100.0, lambda pause: 0.5 * pause)                # the random part: 30 s here
    assert state.consec_cong_rounds == 0 and state.pause_until == 190.0
    assert state.paused(150.0)
    assert run(state, [CONGESTED] * 30, now=189.9) == []          # held still for the whole pause
    assert state.consec_cong_rounds == params.rehash_rounds       # counting went on, capped at N
    assert state.check_rehash(190.0, True)                        # the pause is over
    assert not state.paused(190.0) and state.rehashes == 1


def test_the_random_part_of_the_pause_is_below_the_suspension() -> None:
    state = PlbState(PlbParams(suspend_rto_sec=2))
    asked = []
    state.on_rto(0.0, lambda pause: asked.append(pause) or pause * 0.999)
    assert asked == [2] and 2 <= state.pause_until < 4


def test_threshold_zero_repaths_every_n_rounds_whatever_the_marks() -> None:
    state = PlbState(PlbParams(cong_thresh=0, rehash_rounds=2))
    assert run(state, [0, 0, 0, 0]) == [2, 4]


@pytest.mark.parametrize("kw", [{"rehash_rounds": 32}, {"idle_rehash_rounds": -1}, {"cong_thresh": 257},
                                {"suspend_rto_sec": -1}])
def test_bad_parameters_name_the_sysctl(kw) -> None:
    with pytest.raises(ValueError, match=next(iter(kw))):
        PlbParams(**kw)
