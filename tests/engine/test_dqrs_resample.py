"""DQRS rejection sampling produces samples of Q^{t+1} (Vietri et al. 2020, Algorithm 4, Lemmas 20-21).

A small query class: N = 4 positive queries (8 signed queries) with non-trivial log-weights (Q^t) and payoffs.
Each repetition draws S_t fresh from Q^t, builds Q^{t+1}, and calls ``resample``; the signed outputs of all
repetitions are pooled and compared with Q^{t+1} by a chi-square test at significance 0.001 (seeded, so the
outcome is deterministic). Every output element is an i.i.d. draw of Q^{t+1} given the pool sizes, so pooled
counts are multinomial. Power: the same test rejects the carried samples without rejection (they follow Q^t)
and the output of a rejection step with the payoff sign flipped.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from dq_engine import make_rng
from dq_engine.mechanisms.dqrs import resample
from dq_engine.privacy.mw import QueryDistribution, SampledQueries
from dq_engine.privacy.theorems import dqrs_gamma

SIGNIFICANCE = 1e-3
LOG_WEIGHT = np.array([0.9, -0.4, 1.3, -1.1])  # Q^t
PAYOFF = np.array([0.8, -0.7, -0.3, 0.6])  # q(D) - q(x^t), in [-1, 1]
ETA = 0.5
GAMMA = dqrs_gamma(4)
S = 40
REPETITIONS = 3000


def _distributions() -> tuple[QueryDistribution, QueryDistribution]:
    current = QueryDistribution(len(LOG_WEIGHT), eta=ETA)
    current.log_weight = LOG_WEIGHT.copy()
    following = QueryDistribution(len(LOG_WEIGHT), eta=ETA)
    following.log_weight = LOG_WEIGHT.copy()
    following.update(PAYOFF)
    return current, following


def _interleaved_probabilities(distribution: QueryDistribution) -> np.ndarray:
    positive, negative = distribution.probabilities()
    return np.stack([positive, negative], axis=1).ravel()


def _p_value(pooled: np.ndarray, distribution: QueryDistribution) -> float:
    observed = np.bincount(pooled, minlength=2 * len(LOG_WEIGHT))
    return float(chisquare(observed, _interleaved_probabilities(distribution) * observed.sum()).pvalue)


def _run(*, seed: int, payoff_sign: float, fresh: int, reserve: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Pooled signed keys of the outputs and of the carried inputs, and summed counters."""
    current, following = _distributions()
    rng = make_rng(seed)
    outputs, inputs = [], []
    totals = {"accepted": 0.0, "topup": 0.0, "short": 0.0, "discarded": 0.0}
    for _ in range(REPETITIONS):
        carried = current.sample(S, rng)
        result, counters = resample(
            carried, payoff_sign * PAYOFF, following, eta=ETA, gamma=GAMMA, fresh=fresh, reserve=reserve,
            target=S, rng=rng,
        )
        outputs.append(result.signed_keys())
        inputs.append(carried.signed_keys())
        pool = counters["accepted"] + counters["fresh"] + counters["topup"]
        totals["discarded"] += pool - len(result)
        for key in ("accepted", "topup", "short"):
            totals[key] += counters[key]
    return np.concatenate(outputs), np.concatenate(inputs), totals


@pytest.fixture(scope="module")
def correct_run():
    # fresh = 15 of s = 40: on average ~23 carried samples survive, so top-up, discard and short all occur
    return _run(seed=20240601, payoff_sign=1.0, fresh=15, reserve=4)


def test_resampled_set_is_distributed_as_next_distribution(correct_run):
    outputs, _, totals = correct_run
    _, following = _distributions()
    assert _p_value(outputs, following) > SIGNIFICANCE
    # the paths this test is meant to cover were all exercised
    assert totals["topup"] > 0 and totals["discarded"] > 0 and totals["short"] > 0
    assert totals["accepted"] / (REPETITIONS * S) > 0.4  # carried samples make up most of the output


def test_chi_square_detects_carried_samples_that_skip_rejection(correct_run):
    _, inputs, _ = correct_run
    current, following = _distributions()
    assert _p_value(inputs, current) > SIGNIFICANCE  # they are Q^t ...
    assert _p_value(inputs, following) < SIGNIFICANCE  # ... and detectably not Q^{t+1}


def test_chi_square_detects_an_acceptance_rule_with_the_wrong_sign():
    outputs, _, _ = _run(seed=20240602, payoff_sign=-1.0, fresh=15, reserve=4)
    _, following = _distributions()
    assert _p_value(outputs, following) < SIGNIFICANCE


def test_acceptance_rate_matches_the_rejection_sampling_constant(correct_run):
    """Each carried sample survives with probability sum_q Q^t_q e^{-eta-gamma+eta a_q} = e^{-eta-gamma} Z_{t+1}/Z_t."""
    _, _, totals = correct_run
    current, _ = _distributions()
    probabilities = _interleaved_probabilities(current)
    signed_payoff = np.stack([PAYOFF, -PAYOFF], axis=1).ravel()
    rate = float(probabilities @ np.exp(-ETA - GAMMA + ETA * signed_payoff))
    trials = REPETITIONS * S
    standard_error = np.sqrt(rate * (1 - rate) / trials)
    assert abs(totals["accepted"] / trials - rate) < 4 * standard_error


def _hopeless_carried(size: int) -> tuple[SampledQueries, np.ndarray]:
    """Carried samples that all have payoff -1: each survives with probability e^{-2 eta - gamma}."""
    return SampledQueries(np.zeros(size, dtype=np.int64), np.zeros(size, dtype=bool)), np.array([-1.0, 0.0])


def test_topup_fills_the_set_to_s_when_the_reserve_suffices():
    carried, payoff = _hopeless_carried(50)
    following = QueryDistribution(2, eta=1.5)
    result, counters = resample(
        carried, payoff, following, eta=1.5, gamma=0.5, fresh=2, reserve=60, target=50, rng=make_rng(3)
    )
    assert counters["accepted"] < 10  # survival probability e^{-3.5} ~ 0.03
    assert counters["topup"] == 50 - counters["accepted"] - 2
    assert counters["short"] == 0.0
    assert len(result) == 50


def test_short_round_is_counted_when_the_reserve_does_not_suffice():
    carried, payoff = _hopeless_carried(50)
    following = QueryDistribution(2, eta=1.5)
    result, counters = resample(
        carried, payoff, following, eta=1.5, gamma=0.5, fresh=2, reserve=5, target=50, rng=make_rng(3)
    )
    assert counters["topup"] == 5  # the whole reserve is used
    assert counters["short"] == 1.0
    assert len(result) == counters["accepted"] + 2 + 5 < 50


def test_no_topup_and_random_discard_down_to_s_when_the_pool_overflows():
    current, following = _distributions()
    rng = make_rng(5)
    carried = current.sample(S, rng)
    result, counters = resample(
        carried, PAYOFF, following, eta=ETA, gamma=GAMMA, fresh=2 * S, reserve=10, target=S, rng=rng
    )
    assert counters["topup"] == 0.0 and counters["short"] == 0.0
    assert len(result) == S
