"""The query player's multiplicative-weights distribution: exact sampling and the sign convention.

Statistical tests are seeded (deterministic) and use significance level 0.001.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from dq_engine import make_rng
from dq_engine.privacy.mw import QueryDistribution, SampledQueries

SIGNIFICANCE = 1e-3


def _signed_frequencies(samples: SampledQueries, n_queries: int) -> np.ndarray:
    """Counts per signed key: 2 i for q_i, 2 i + 1 for its negation."""
    return np.bincount(samples.signed_keys(), minlength=2 * n_queries)


def _interleaved(distribution: QueryDistribution) -> np.ndarray:
    positive, negative = distribution.probabilities()
    return np.stack([positive, negative], axis=1).ravel()


@pytest.mark.parametrize(
    "log_weight",
    [
        [0.0, 0.0, 0.0],
        [-1.2, 0.3, 2.0, 0.0, -0.5, 1.1],
        [40.0, 39.0, -41.5, 0.0],  # large magnitudes: tests the stable scaling
    ],
)
def test_sample_matches_probabilities(log_weight):
    distribution = QueryDistribution(len(log_weight), eta=0.5)
    distribution.log_weight = np.array(log_weight)
    expected = _interleaved(distribution)
    assert expected.sum() == pytest.approx(1.0, abs=1e-12)
    draws = 200_000
    observed = _signed_frequencies(distribution.sample(draws, make_rng(2024)), len(log_weight))
    support = expected > 1e-12
    assert observed[~support].sum() == 0
    _, p_value = chisquare(observed[support], expected[support] / expected[support].sum() * draws)
    assert p_value > SIGNIFICANCE


def test_chi_square_detects_a_sampler_that_ignores_the_sign():
    """Power check: draws with the right pair but a fair coin for the sign are rejected by the same test."""
    distribution = QueryDistribution(4, eta=0.5)
    distribution.log_weight = np.array([0.8, -0.3, 0.5, -1.0])
    draws = distribution.sample(200_000, make_rng(7))
    wrong = SampledQueries(draws.index, make_rng(8).random(len(draws)) < 0.5)
    expected = _interleaved(distribution) * len(draws)
    assert chisquare(_signed_frequencies(wrong, 4), expected).pvalue < SIGNIFICANCE


def test_uniform_start_gives_every_signed_query_equal_probability():
    positive, negative = QueryDistribution(5, eta=1.0).probabilities()
    np.testing.assert_allclose(positive, 0.1)
    np.testing.assert_allclose(negative, 0.1)
    assert QueryDistribution(5, eta=1.0).entropy() == pytest.approx(np.log(10), rel=1e-12)


def test_update_raises_queries_with_positive_payoff_and_lowers_their_negations():
    distribution = QueryDistribution(4, eta=0.7)
    before_positive, before_negative = distribution.probabilities()
    payoff = np.array([0.5, -0.25, 0.0, 1.0])  # q(D) - q(x): the synthetic record under-answers q_0 and q_3
    distribution.update(payoff)
    positive, negative = distribution.probabilities()
    assert positive[0] > before_positive[0] and negative[0] < before_negative[0]
    assert positive[3] > positive[0]
    assert positive[1] < before_positive[1] and negative[1] > before_negative[1]
    assert positive[2] == pytest.approx(negative[2], rel=1e-12)
    # closed form from the uniform start: P[q_i] ∝ exp(eta a_i), P[not q_i] ∝ exp(-eta a_i)
    weights = np.concatenate([np.exp(0.7 * payoff), np.exp(-0.7 * payoff)])
    np.testing.assert_allclose(np.concatenate([positive, negative]), weights / weights.sum(), rtol=1e-12)


def test_updates_accumulate_multiplicatively():
    distribution = QueryDistribution(3, eta=0.4)
    first, second = np.array([0.2, -0.6, 0.1]), np.array([-0.3, 0.9, 0.4])
    distribution.update(first)
    distribution.update(second)
    np.testing.assert_allclose(distribution.log_weight, 0.4 * (first + second), rtol=1e-15)


def test_sampled_queries_distinct_merges_duplicates_into_counts():
    samples = SampledQueries([3, 1, 3, 3, 1], [False, True, False, True, True])
    index, negated, count = samples.distinct()
    assert index.tolist() == [1, 3, 3]
    assert negated.tolist() == [True, False, True]
    assert count.tolist() == [2, 2, 1]


def test_sample_rejects_negative_count_and_distribution_rejects_bad_parameters():
    with pytest.raises(ValueError, match=r"count \(-1\) must be >= 0"):
        QueryDistribution(2, eta=0.5).sample(-1, make_rng(0))
    with pytest.raises(ValueError, match=r"eta \(0\.0\) must be > 0"):
        QueryDistribution(2, eta=0.0)
    with pytest.raises(ValueError, match=r"n_queries \(0\) must be >= 1"):
        QueryDistribution(0, eta=0.5)
