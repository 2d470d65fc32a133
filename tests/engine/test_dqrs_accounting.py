"""DQRS privacy events checked by hand (seed 004, proof of Theorem 17, Lemmas 18-19).

Setting: eta = 0.5, s = 4, T = 3, n = 100, top-up fraction f = 0.25. Rounds t = 1, 2 build S_2, S_3; round
T = 3 builds nothing (S_4 is never used). Fresh draws of round t come from Q^{t+1} and are charged 2 eta t / n
(the dqrs_events docstring explains why not the printed 2 eta (t-1) / n).

By hand:
  gamma_1 = 1 / (2 * 1^(2/3)) = 0.5
  gamma_2 = 1 / (2 * 2^(2/3)) = 1 / 3.1748021... = 0.3149802...
  s~_1 = ceil((2 * 0.5 + 4 * 0.5) * 4) = ceil(12) = 12,         reserve_1 = ceil(0.25 * 12) = 3
  s~_2 = ceil((2 * 0.3149802 + 2) * 4) = ceil(10.519842) = 11, reserve_2 = ceil(0.25 * 11) = ceil(2.75) = 3
  rejection eps_1 = eta / (gamma_1 n) = 0.5 / 50 = 0.01
  rejection eps_2 = eta / (gamma_2 n) = 2^(2/3) / 100 = 0.015874...
  fresh eps_1 = 2 * 0.5 * 1 / 100 = 0.01  (count 12 + 3 = 15)
  fresh eps_2 = 2 * 0.5 * 2 / 100 = 0.02  (count 11 + 3 = 14)
"""

from __future__ import annotations

import math

import pytest

from dq_engine.accounting import ExponentialMechanismEvent, PureDpEvent, compose
from dq_engine.calibration import mechanism_cost
from dq_engine.errors import ConfigError
from dq_engine.theorems import dqrs_events, dqrs_fresh_samples, dqrs_gamma, dqrs_topup_reserve

ETA, S, T, N, F, DELTA = 0.5, 4, 3, 100, 0.25, 1e-6

GAMMA = {1: 0.5, 2: 1 / (2 * 2 ** (2 / 3))}
FRESH = {1: 12, 2: 11}
RESERVE = {1: 3, 2: 3}
REJECTION_EPS = {1: 0.01, 2: 2 ** (2 / 3) / 100}
FRESH_EPS = {1: 0.01, 2: 0.02}


def test_gamma_fresh_and_reserve_match_hand_values():
    for t in (1, 2):
        assert dqrs_gamma(t) == pytest.approx(GAMMA[t], rel=1e-15)
        assert dqrs_fresh_samples(ETA, S, t) == FRESH[t]
        assert dqrs_topup_reserve(ETA, S, t, F) == RESERVE[t]
    assert GAMMA[2] == pytest.approx(0.3149802, abs=1e-7)


def test_fresh_sample_count_is_not_inflated_by_float_noise():
    # (2 gamma_8 + 4 * 0.1) * 20 = (0.25 + 0.4) * 20 = 13 in reals, 13.000000000000004 in floats
    assert (2 * dqrs_gamma(8) + 4 * 0.1) * 20 > 13
    assert dqrs_fresh_samples(0.1, 20, 8) == 13


def test_dqrs_events_list_one_rejection_and_one_draw_event_per_round_before_the_last():
    events = dqrs_events(ETA, S, T, N, topup_fraction=F)
    assert [type(e) for e in events] == [PureDpEvent, ExponentialMechanismEvent] * 2
    for t, (rejection, draws) in zip((1, 2), zip(events[::2], events[1::2], strict=True), strict=True):
        assert rejection.count == S
        assert rejection.epsilon == pytest.approx(REJECTION_EPS[t], rel=1e-12)
        assert draws.count == FRESH[t] + RESERVE[t]
        assert draws.epsilon == pytest.approx(FRESH_EPS[t], rel=1e-12)


def test_paper_mode_charges_every_pure_step_half_epsilon_squared():
    rho = (
        4 * 0.01**2 / 2  # round 1 rejection
        + 15 * 0.01**2 / 2  # round 1 fresh + reserve
        + 4 * (2 ** (2 / 3) / 100) ** 2 / 2  # round 2 rejection
        + 14 * 0.02**2 / 2  # round 2 fresh + reserve
    )
    assert rho == pytest.approx(0.00425397, abs=1e-8)
    cost = compose(dqrs_events(ETA, S, T, N, topup_fraction=F), mode="paper", delta=DELTA, paper_analysis="zcdp")
    assert cost.rho == pytest.approx(rho, rel=1e-12)
    assert cost.epsilon == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / DELTA)), rel=1e-12)
    assert mechanism_cost(
        "dqrs", mode="paper", delta=DELTA, eta=ETA, samples=S, rounds=T, n=N, topup_fraction=F
    ) == pytest.approx(cost.epsilon, rel=1e-12)


def test_tight_mode_charges_draws_an_eighth_and_rejection_steps_a_half():
    rho = (
        4 * 0.01**2 / 2  # rejection steps are not exponential mechanisms: eps^2 / 2
        + 15 * 0.01**2 / 8  # exponential-mechanism draws: eps^2 / 8 (bounded range)
        + 4 * (2 ** (2 / 3) / 100) ** 2 / 2
        + 14 * 0.02**2 / 8
    )
    assert rho == pytest.approx(0.00159147, abs=1e-8)
    cost = compose(dqrs_events(ETA, S, T, N, topup_fraction=F), mode="tight", delta=DELTA)
    assert cost.rho == pytest.approx(rho, rel=1e-9)
    assert cost.epsilon < rho + 2 * math.sqrt(rho * math.log(1 / DELTA))


def test_pure_epsilon_of_dqrs_is_the_plain_sum():
    by_hand = 4 * 0.01 + 15 * 0.01 + 4 * 2 ** (2 / 3) / 100 + 14 * 0.02
    cost = compose(dqrs_events(ETA, S, T, N, topup_fraction=F), mode="tight", delta=DELTA)
    assert cost.pure_epsilon == pytest.approx(by_hand, rel=1e-12)


def test_single_round_dqrs_costs_nothing_and_zero_reserve_charges_only_fresh_draws():
    assert dqrs_events(ETA, S, 1, N, topup_fraction=F) == []
    events = dqrs_events(ETA, S, T, N, topup_fraction=0.0)
    assert [e.count for e in events] == [4, 12, 4, 11]


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_dqrs_events_reject_topup_fraction_outside_unit_interval(fraction):
    with pytest.raises(ConfigError, match=r"topup_fraction \(.*\) must be in \[0, 1\]"):
        dqrs_events(ETA, S, T, N, topup_fraction=fraction)
