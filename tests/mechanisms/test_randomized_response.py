"""Randomized response: the row distribution, the estimators, the universe limit.

Mechanism E of the paper "minimax distortion of query-set-independent mechanisms".
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from dq_engine import Dataset, Domain, all_kway_marginals, answer_workload, make_rng
from dq_engine.data.answers import uniform_answers
from dq_engine.errors import ConfigError, UniverseTooLargeError
from dq_engine.evaluation.baselines import zeros_answers
from dq_engine.mechanisms.randomized_response import (
    RandomizedResponseConfig,
    estimate_answers,
    keep_probability,
    randomized_response,
)
from tests.budgets import grant_for_tests


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_keep_probability_gives_the_row_distribution_of_equation_11(epsilon):
    domain = Domain.categorical({"a": 3, "b": 4, "c": 5})  # U = 60
    p = keep_probability(epsilon, domain)
    g = 1 + 59 * math.exp(-epsilon)
    assert p + (1 - p) / 60 == pytest.approx(1 / g, rel=1e-12)  # P[Y_i = x_i]
    assert (1 - p) / 60 == pytest.approx(math.exp(-epsilon) / g, rel=1e-12)  # P[Y_i = y], y != x_i


def test_released_rows_follow_mechanism_e():
    domain = Domain.categorical({"a": 2, "b": 3})  # U = 6
    data = Dataset.from_codes(domain, np.tile([[1, 2]], (60_000, 1)))
    result = randomized_response(data, RandomizedResponseConfig(epsilon=1.0), grant=grant_for_tests(), rng=make_rng(3))
    flat = result.records[:, 0] * 3 + result.records[:, 1]
    observed = np.bincount(flat, minlength=6) / len(flat)
    g = 1 + 5 * math.exp(-1.0)
    expected = np.full(6, math.exp(-1.0) / g)
    expected[5] = 1 / g  # the true record (1, 2) is cell 5
    # each frequency has standard error <= sqrt(0.25 / 60,000) = 0.002; allow 5 of them
    np.testing.assert_allclose(observed, expected, atol=0.01)


def test_unbiased_estimator_is_unbiased():
    domain = Domain.categorical({"a": 3, "b": 2, "c": 4})
    rng = make_rng(5)
    data = Dataset.from_codes(domain, np.stack([rng.choice(s, 300, p=np.arange(1, s + 1) / np.arange(1, s + 1).sum())
                                                for s in domain.sizes], axis=1))
    workload = all_kway_marginals(domain, 2)
    truth = answer_workload(data, workload)
    runs = 400
    estimates = np.stack([
        estimate_answers(randomized_response(data, RandomizedResponseConfig(epsilon=1.5), grant=grant_for_tests(),
                                             rng=rng), workload)
        for _ in range(runs)
    ])
    standard_error = estimates.std(axis=0, ddof=1) / math.sqrt(runs)
    # every query's Monte-Carlo mean within 4.5 standard errors (26 queries: a false alarm has p < 2e-4)
    assert np.all(np.abs(estimates.mean(axis=0) - truth) < 4.5 * standard_error)


def test_proper_estimator_returns_possible_answers(adult_tiny):
    result = randomized_response(adult_tiny.data, RandomizedResponseConfig(epsilon=0.5), grant=grant_for_tests(),
                                 rng=make_rng(6))
    proper = estimate_answers(result, adult_tiny.workload, proper=True)
    n = adult_tiny.data.n
    assert np.all((proper >= 0) & (proper <= 1))
    np.testing.assert_allclose(proper * n, np.round(proper * n), atol=1e-6)


def test_mechanism_e_estimates_beat_zeros_and_uniform_on_small_adult(adult_tiny):
    """Four Adult attributes (U = 420) at ε = 5 (a local-model budget): p = 0.26."""
    result = randomized_response(adult_tiny.data, RandomizedResponseConfig(epsilon=5.0), grant=grant_for_tests(),
                                 rng=make_rng(7))
    error = np.abs(estimate_answers(result, adult_tiny.workload, proper=True) - adult_tiny.truth).max()
    zeros = np.abs(zeros_answers(adult_tiny.workload) - adult_tiny.truth).max()
    uniform = np.abs(uniform_answers(adult_tiny.workload) - adult_tiny.truth).max()
    assert error < 0.25 * min(zeros, uniform)  # baselines about 0.4; the estimator about 0.03
    assert result.records.shape == (adult_tiny.data.n, 4)
    assert result.costs["paper"].epsilon == 5.0 and result.costs["paper"].delta == 0.0


def test_randomized_response_refuses_a_universe_beyond_float_range():
    domain = Domain.categorical({f"a{i}": 1024 for i in range(101)})  # log2 U = 1010
    data = Dataset.from_codes(domain, np.zeros((2, 101), dtype=np.int64))
    with pytest.raises(UniverseTooLargeError, match=re.escape("log2 of the universe size <= 1000")):
        randomized_response(data, RandomizedResponseConfig(epsilon=1.0), grant=grant_for_tests(), rng=make_rng(0))


def test_randomized_response_config_rejects_a_non_positive_epsilon():
    with pytest.raises(ConfigError, match=re.escape("epsilon (0.0) must be finite and > 0")):
        RandomizedResponseConfig(epsilon=0.0)
