"""Exact exponential-mechanism draws and exact Bernoulli draws (dq_engine.privacy.exact_sampling).

Distribution checks are seeded chi-square goodness-of-fit tests against the exact probabilities at significance
10⁻⁴ (outcomes with an expected count below 20 pooled into one bin).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dq_engine.privacy.exact_sampling as exact_sampling
from dq_engine import Domain, make_rng
from dq_engine.mechanisms.randomized_response import _keep_probability_bounds, keep_probability
from dq_engine.privacy.exact_sampling import SamplingAssumptionError, bernoulli_real, exp_interval, sample_signed_pairs
from dq_engine.privacy.mw import QueryDistribution

ALPHA = 1e-4


def _signed_probabilities(log_weight: np.ndarray, zero_pairs: int = 0) -> np.ndarray:
    shift = np.abs(log_weight).max(initial=0.0)
    weights = np.stack([np.exp(log_weight - shift), np.exp(-log_weight - shift)], axis=1).ravel()
    if zero_pairs:
        weights = np.concatenate([weights, zero_pairs * np.exp(-shift) * np.ones(2)])
    return weights / weights.sum()


def _fit_p_value(keys: np.ndarray, probabilities: np.ndarray) -> float:
    observed = np.bincount(keys, minlength=len(probabilities)).astype(float)
    expected = probabilities * len(keys)
    small = expected < 20
    assert observed[expected == 0].sum() == 0, "an outcome of probability 0 was drawn"
    bins_observed = np.append(observed[~small], observed[small].sum())
    bins_expected = np.append(expected[~small], expected[small].sum())
    keep = bins_expected > 0
    scaled = bins_expected[keep] * bins_observed.sum() / bins_expected[keep].sum()
    return float(stats.chisquare(bins_observed[keep], scaled).pvalue)


def _keys(index: np.ndarray, negated: np.ndarray) -> np.ndarray:
    return 2 * index + negated


LOG_WEIGHTS = np.array([0.0, 1.0, -2.0, 0.5, 1.5, -4.0, 3.0, -0.25, 800.0 - 800.0, 2.0])


def test_signed_pairs_follow_the_exponential_weights_exactly():
    keys = _keys(*sample_signed_pairs(LOG_WEIGHTS, 300_000, make_rng(1), zero_pairs=4))
    assert _fit_p_value(keys, _signed_probabilities(LOG_WEIGHTS, 4)) > ALPHA


def test_the_fit_check_catches_a_float_weight_error():  # the check above can fail
    keys = _keys(*sample_signed_pairs(LOG_WEIGHTS, 300_000, make_rng(1), zero_pairs=4))
    wrong = LOG_WEIGHTS.copy()
    wrong[6] += 0.05  # the heaviest query: probability 0.39 -> about 0.40
    assert _fit_p_value(keys, _signed_probabilities(wrong, 4)) < ALPHA


def test_absent_entries_are_never_drawn_and_the_others_keep_their_exact_weights():
    absent = np.zeros(len(LOG_WEIGHTS), dtype=bool)
    absent[[0, 6, 9]] = True  # the heaviest (6) among them: its weight must vanish, not just shrink
    index, negated = sample_signed_pairs(LOG_WEIGHTS, 300_000, make_rng(4), zero_pairs=4, absent=absent)
    assert not np.isin(index, np.flatnonzero(absent)).any()
    kept = np.flatnonzero(~absent)
    probabilities = _signed_probabilities(LOG_WEIGHTS[kept], 4)
    remap = np.full(len(LOG_WEIGHTS) + 1, -1)
    remap[kept], remap[-1] = np.arange(len(kept)), len(kept)  # index N (the zero block) after the kept ones
    assert _fit_p_value(_keys(remap[np.minimum(index, len(LOG_WEIGHTS))], negated), probabilities) > ALPHA


def test_decisions_in_exact_arithmetic_give_the_same_distribution(monkeypatch):
    monkeypatch.setattr(exact_sampling, "FILTER_TOLERANCE", 0.2)  # most comparisons go to the decimal path
    keys = _keys(*sample_signed_pairs(LOG_WEIGHTS[:6], 6_000, make_rng(2), zero_pairs=2))
    assert _fit_p_value(keys, _signed_probabilities(LOG_WEIGHTS[:6], 2)) > ALPHA


def test_weights_far_below_the_largest_are_still_drawn_in_proportion():
    # e^{-30} relative weights are invisible to a float cumulative sum of large weights; the proposal's +1 and the
    # exact acceptance keep them: with the large pair removed by a huge negative shift, only they remain likely
    log_weight = np.array([30.0, 0.0, 0.0, 0.0])
    keys = _keys(*sample_signed_pairs(log_weight, 100_000, make_rng(3)))
    assert _fit_p_value(keys, _signed_probabilities(log_weight)) > ALPHA
    assert set(np.unique(keys)) <= set(range(8))


def test_mw_distribution_sample_matches_its_probabilities():
    distribution = QueryDistribution(7, eta=0.8)
    rng = make_rng(4)
    for _ in range(3):
        distribution.update(rng.uniform(-1, 1, 7))
    drawn = distribution.sample(200_000, make_rng(5))
    positive, negative = distribution.probabilities()
    assert _fit_p_value(_keys(drawn.index, drawn.negated), np.stack([positive, negative], axis=1).ravel()) > ALPHA


def test_two_million_queries_fit_in_int64():
    log_weight = make_rng(6).normal(0.0, 40.0, 2_000_000)
    index, _ = sample_signed_pairs(log_weight, 2_000, make_rng(7))
    assert index.min() >= 0 and index.max() < 2_000_000
    assert exact_sampling.fixed_point_bits(2_000_000) >= 38


def test_a_proposal_below_its_target_is_detected(monkeypatch):
    monkeypatch.setattr(exact_sampling, "_PROPOSAL_MARGIN", -0.5)  # weights half their target: wrong on purpose
    monkeypatch.setattr(exact_sampling, "FILTER_TOLERANCE", 1.0)  # decide every comparison exactly
    with pytest.raises(SamplingAssumptionError, match="float64 exp is less accurate"):
        sample_signed_pairs(np.array([0.0, 1.0]), 50, make_rng(8))


def test_numpy_exp_is_far_more_accurate_than_the_sampler_assumes():
    # the sampler needs a relative error below 2^-31 for results in the normal range (arguments >= -708; below,
    # results are subnormal and far smaller than any uniform they are compared with); libm exp is a few ULP
    arguments = np.concatenate([make_rng(9).uniform(-708.0, 0.0, 100_000), -make_rng(10).exponential(1.0, 1_000)])
    computed = np.exp(arguments)
    context = Context(prec=40)
    worst = max(
        abs(Fraction(context.exp(Decimal(float(x)))) - Fraction(float(y))) / Fraction(context.exp(Decimal(float(x))))
        for x, y in zip(arguments[::50], computed[::50], strict=True)
    )
    assert worst < Fraction(1, 2**45)


def test_exp_interval_brackets_the_true_value():
    for exponent in (Fraction(0), Fraction(-1, 3), Fraction(5, 2), Fraction(-700), Fraction(123456789, 10**9)):
        low, high = exp_interval(exponent, 30)
        assert low <= Fraction(Decimal(math.exp(float(exponent)))) * (1 + Fraction(1, 2**50)) and low < high
        assert high - low < Fraction(1, 10**25) * high
    low, high = exp_interval(Fraction(1), 30)
    assert low < Fraction("2.718281828459045235360287471352662497757") < high


def test_bernoulli_real_has_probability_p_even_when_every_draw_needs_refining():
    p = Fraction(1, 3)

    def coarse_bounds(digits: int) -> tuple[Fraction, Fraction]:
        width = Fraction(1, 4) if digits <= 40 else Fraction(1, 10**digits)  # the first bounds decide nothing
        return p - width, p + width

    trials = 20_000
    draws = bernoulli_real(coarse_bounds, trials, make_rng(11))
    assert abs(draws.mean() - 1 / 3) <= 5 * math.sqrt(2 / 9 / trials)


def test_randomized_response_keep_probability_bounds_bracket_it():
    domain = Domain.categorical({"a": 3, "b": 5, "c": 7})
    for epsilon in (0.1, 1.0, 4.0):
        low, high = _keep_probability_bounds(epsilon, domain)(40)
        assert low <= Fraction(keep_probability(epsilon, domain)) * (1 + Fraction(1, 2**40))
        assert high >= Fraction(keep_probability(epsilon, domain)) * (1 - Fraction(1, 2**40))
        assert 0 < high - low < Fraction(1, 10**30)


@pytest.mark.parametrize("tolerance", [exact_sampling.FILTER_TOLERANCE, 0.3])
def test_bernoulli_exp_has_probability_e_to_the_x(monkeypatch, tolerance: float):
    monkeypatch.setattr(exact_sampling, "FILTER_TOLERANCE", tolerance)  # 0.3: a third of the draws decided exactly
    trials = 40_000 if tolerance < 0.1 else 4_000
    for x in (0.0, -0.05, -1.0, -3.5):
        draws = exact_sampling.bernoulli_exp(np.full(trials, x), make_rng(12))
        p = math.exp(x)
        assert abs(draws.mean() - p) <= 5 * math.sqrt(p * (1 - p) / trials) + 1e-12
    with pytest.raises(ValueError, match="finite exponents <= 0"):
        exact_sampling.bernoulli_exp(np.array([0.1]), make_rng(12))
