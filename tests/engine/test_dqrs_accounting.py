"""DQRS privacy events checked by hand (Vietri et al. 2020, proof of Theorem 17, Lemmas 18-19).

Setting: eta = 0.05, s = 4, T = 3, n = 100, top-up fraction f = 0.25. Rounds t = 1, 2 build S_2, S_3; round
T = 3 builds nothing (S_4 is never used). Fresh draws of round t come from Q^{t+1} and are charged 2 eta t / n
(the dqrs_events docstring explains why not the printed 2 eta (t-1) / n). A round rejects only when
2 gamma_t + 4 eta < 1; otherwise it draws s fresh samples, as DualQuery does (never more).

By hand:
  gamma_1 = 1 / (2 * 1^(2/3)) = 0.5        2 gamma_1 + 4 eta = 1.2 >= 1: a DualQuery step, 4 fresh draws
  gamma_2 = 1 / (2 * 2^(2/3)) = 0.3149802   2 gamma_2 + 4 eta = 0.8299604 < 1: rejection
  s~_2 = ceil(0.8299604 * 4) = ceil(3.3198) = 4 (<= s),  reserve_2 = ceil(0.25 * 4) = 1
  fresh eps_1 = 2 * 0.05 * 1 / 100 = 0.001  (count 4, no reserve, no rejection step)
  rejection eps_2 = eta / (gamma_2 n) = 0.05 * 2 * 2^(2/3) / 100 = 0.0015874...
  fresh eps_2 = 2 * 0.05 * 2 / 100 = 0.002  (count 4 + 1 = 5)
"""

from __future__ import annotations

import math

import pytest

from dq_engine.errors import ConfigError
from dq_engine.privacy.accounting import ExponentialMechanismEvent, PureDpEvent, compose
from dq_engine.privacy.calibration import mechanism_cost
from dq_engine.privacy.theorems import dqrs_events, dqrs_fresh_samples, dqrs_gamma, dqrs_rejects, dqrs_topup_reserve

ETA, S, T, N, F, DELTA = 0.05, 4, 3, 100, 0.25, 1e-6

GAMMA = {1: 0.5, 2: 1 / (2 * 2 ** (2 / 3))}
FRESH = {1: 4, 2: 4}
RESERVE = {1: 0, 2: 1}
REJECTION_EPS_2 = 0.05 * 2 * 2 ** (2 / 3) / 100
FRESH_EPS = {1: 0.001, 2: 0.002}


def test_gamma_fresh_and_reserve_match_hand_values():
    assert not dqrs_rejects(ETA, 1)
    assert dqrs_rejects(ETA, 2)
    for t in (1, 2):
        assert dqrs_gamma(t) == pytest.approx(GAMMA[t], rel=1e-15)
        assert dqrs_fresh_samples(ETA, S, t) == FRESH[t]
        assert dqrs_topup_reserve(ETA, S, t, F) == RESERVE[t]
    assert GAMMA[2] == pytest.approx(0.3149802, abs=1e-7)


def test_fresh_sample_count_is_not_inflated_by_float_noise():
    # (2 gamma_8 + 4 * 0.1) * 20 = (0.25 + 0.4) * 20 = 13 in reals, 13.000000000000004 in floats
    assert (2 * dqrs_gamma(8) + 4 * 0.1) * 20 > 13
    assert dqrs_fresh_samples(0.1, 20, 8) == 13


@pytest.mark.parametrize("eta", [0.01, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("samples", [1, 7, 300])
def test_dqrs_never_draws_more_fresh_samples_per_round_than_dualquery(eta, samples):
    for t in range(1, 400):
        assert dqrs_fresh_samples(eta, samples, t) <= samples


@pytest.mark.parametrize("eta", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("mode", ["tight", "paper"])
def test_dqrs_with_eta_at_least_a_quarter_costs_exactly_dualquery(eta, mode):
    # 4 eta >= 1: every round is a DualQuery step, so the events are DualQuery's (round t+1 draws at 2 eta t / n)
    common = {"eta": eta, "samples": 50, "rounds": 40, "n": 10_000}
    assert mechanism_cost("dqrs", mode="tight", delta=DELTA, topup_fraction=F, **common) == pytest.approx(
        mechanism_cost("dualquery", mode="tight", delta=DELTA, **common), rel=1e-12
    )


def test_dqrs_events_list_the_dualquery_step_then_the_rejection_round():
    events = dqrs_events(ETA, S, T, N, topup_fraction=F)
    assert [type(e) for e in events] == [ExponentialMechanismEvent, PureDpEvent, ExponentialMechanismEvent]
    first, rejection, draws = events
    assert (first.count, first.epsilon) == (4, pytest.approx(FRESH_EPS[1], rel=1e-12))
    assert rejection.count == S
    assert rejection.epsilon == pytest.approx(REJECTION_EPS_2, rel=1e-12)
    assert draws.count == FRESH[2] + RESERVE[2]
    assert draws.epsilon == pytest.approx(FRESH_EPS[2], rel=1e-12)


def test_paper_mode_charges_every_pure_step_half_epsilon_squared():
    rho = 4 * 0.001**2 / 2 + 4 * REJECTION_EPS_2**2 / 2 + 5 * 0.002**2 / 2
    assert rho == pytest.approx(1.70397e-5, abs=1e-9)
    cost = compose(dqrs_events(ETA, S, T, N, topup_fraction=F), mode="paper", delta=DELTA, paper_analysis="zcdp")
    assert cost.rho == pytest.approx(rho, rel=1e-12)
    assert cost.epsilon == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / DELTA)), rel=1e-12)
    assert mechanism_cost(
        "dqrs", mode="paper", delta=DELTA, eta=ETA, samples=S, rounds=T, n=N, topup_fraction=F
    ) == pytest.approx(cost.epsilon, rel=1e-12)


def test_tight_mode_charges_draws_an_eighth_and_rejection_steps_a_half():
    rho = (
        4 * 0.001**2 / 8  # exponential-mechanism draws: eps^2 / 8 (bounded range)
        + 4 * REJECTION_EPS_2**2 / 2  # rejection steps are not exponential mechanisms: eps^2 / 2
        + 5 * 0.002**2 / 8
    )
    cost = compose(dqrs_events(ETA, S, T, N, topup_fraction=F), mode="tight", delta=DELTA)
    assert cost.rho == pytest.approx(rho, rel=1e-9)
    assert cost.epsilon < rho + 2 * math.sqrt(rho * math.log(1 / DELTA))


def test_pure_epsilon_of_dqrs_is_the_plain_sum():
    by_hand = 4 * 0.001 + 4 * REJECTION_EPS_2 + 5 * 0.002
    cost = compose(dqrs_events(ETA, S, T, N, topup_fraction=F), mode="tight", delta=DELTA)
    assert cost.pure_epsilon == pytest.approx(by_hand, rel=1e-12)


def test_single_round_dqrs_costs_nothing_and_zero_reserve_charges_only_fresh_draws():
    assert dqrs_events(ETA, S, 1, N, topup_fraction=F) == []
    events = dqrs_events(ETA, S, T, N, topup_fraction=0.0)
    assert [e.count for e in events] == [4, 4, 4]


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_dqrs_events_reject_topup_fraction_outside_unit_interval(fraction):
    with pytest.raises(ConfigError, match=r"topup_fraction \(.*\) must be in \[0, 1\]"):
        dqrs_events(ETA, S, T, N, topup_fraction=fraction)
