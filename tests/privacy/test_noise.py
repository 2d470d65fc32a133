"""The exact discrete Laplace and discrete Gaussian samplers (dq_engine.privacy.noise).

Distribution checks are chi-square goodness-of-fit tests against the exact probability mass function, seeded, at
significance 10⁻⁴ (bins with an expected count of at least 20; the rest pooled into one bin per tail).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dq_engine.privacy.noise as noise
from dq_engine import make_rng
from dq_engine.errors import ConfigError
from dq_engine.privacy.noise import (
    bernoulli_exp_minus,
    discrete_gaussian,
    discrete_gaussian_noise,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_noise,
    discrete_laplace_scale,
)

ALPHA = 1e-4


def _chi_square_p_value(draws: np.ndarray, log_weight) -> float:
    """Goodness of fit of integer draws to ``P[z] ∝ exp(log_weight(z))`` (exact pmf on a wide support)."""
    spread = int(np.abs(draws).max()) + 50
    support = np.arange(-spread, spread + 1)
    logs = np.array([log_weight(int(z)) for z in support])
    pmf = np.exp(logs - logs.max())
    pmf /= pmf.sum()
    expected = pmf * len(draws)
    observed = np.bincount(draws + spread, minlength=len(support)).astype(float)
    keep = expected >= 20
    first, last = np.flatnonzero(keep)[[0, -1]]
    bins_observed = [observed[:first].sum(), *observed[keep], observed[last + 1 :].sum()]
    bins_expected = [expected[:first].sum(), *expected[keep], expected[last + 1 :].sum()]
    pairs = [(o, e) for o, e in zip(bins_observed, bins_expected, strict=True) if e > 0]
    observed_bins, expected_bins = (np.array(v) for v in zip(*pairs, strict=True))
    expected_bins *= observed_bins.sum() / expected_bins.sum()
    return float(stats.chisquare(observed_bins, expected_bins).pvalue)


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 7.3, 1000.0])
def test_discrete_laplace_matches_its_exact_distribution(scale: float):
    draws = discrete_laplace_noise(200_000, scale=scale, rng=make_rng(1))
    exact = float(discrete_laplace_scale(scale))
    assert _chi_square_p_value(draws, lambda z: -abs(z) / exact) > ALPHA


@pytest.mark.parametrize("sigma", [0.4, 1.0, 2.5, 13.7, 900.0])
def test_discrete_gaussian_matches_its_exact_distribution(sigma: float):
    draws = discrete_gaussian_noise(200_000, sigma=sigma, rng=make_rng(2))
    _, variance = discrete_gaussian_variance(sigma)
    assert _chi_square_p_value(draws, lambda z: -(z * z) / (2 * float(variance))) > ALPHA


def test_a_wrong_scale_fails_the_distribution_check():  # the check above can fail
    draws = discrete_laplace_noise(200_000, scale=2.5, rng=make_rng(1))
    assert _chi_square_p_value(draws, lambda z: -abs(z) / 2.4) < ALPHA


@pytest.mark.parametrize("numerator,denominator", [(0, 1), (1, 3), (2, 3), (1, 1), (5, 2), (17, 4), (3 * 2**50, 2**50)])
def test_bernoulli_exp_minus_has_probability_exp_minus_gamma(numerator: int, denominator: int):
    trials = 400_000
    draws = bernoulli_exp_minus(np.full(trials, numerator), denominator, make_rng(3))
    p = math.exp(-numerator / denominator)
    assert abs(draws.mean() - p) <= 5 * math.sqrt(p * (1 - p) / trials) + 1e-12


def test_parameters_are_rounded_towards_more_noise():
    for scale in (0.1, 1 / 3, 1.0, 7.3, 12345.678):
        exact = discrete_laplace_scale(scale)
        assert Fraction(scale) <= exact <= Fraction(scale) * (1 + Fraction(1, 2**39))
    for sigma in (0.01, 0.4, 1.0, math.pi, 900.0, 1e6):
        t, variance = discrete_gaussian_variance(sigma)
        assert t == math.floor(sigma) + 1
        assert Fraction(sigma) ** 2 <= variance <= Fraction(sigma) ** 2 * (1 + Fraction(1, 2**23)) + Fraction(1, 2**24)


def test_noise_is_added_to_integer_counts_and_keeps_the_shape():
    counts = np.array([[3, 0], [7, 12]])
    noisy = discrete_gaussian(counts, sigma=1.5, rng=make_rng(4))
    assert noisy.shape == counts.shape and noisy.dtype == np.int64
    assert discrete_laplace(np.array([2.0, 5.0]), scale=1.0, rng=make_rng(5)).dtype == np.int64
    with pytest.raises(ConfigError, match=re.escape("exact noise is added to integer counts")):
        discrete_laplace(np.array([0.5]), scale=1.0, rng=make_rng(5))


def test_seeded_draws_are_reproducible():
    first = discrete_gaussian_noise(1000, sigma=3.0, rng=make_rng(6))
    np.testing.assert_array_equal(first, discrete_gaussian_noise(1000, sigma=3.0, rng=make_rng(6)))
    assert not np.array_equal(first, discrete_gaussian_noise(1000, sigma=3.0, rng=make_rng(7)))


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: discrete_laplace_noise(3, scale=0.0, rng=make_rng(0)), "discrete Laplace scale (0.0) must be finite"),
        (lambda: discrete_laplace_noise(3, scale=2.0**41, rng=make_rng(0)), "is above the supported"),
        (lambda: discrete_gaussian_noise(3, sigma=math.inf, rng=make_rng(0)), "discrete Gaussian sigma (inf) must be"),
        (lambda: discrete_gaussian_noise(3, sigma=2.0**25, rng=make_rng(0)), "is above the supported"),
        (lambda: bernoulli_exp_minus(np.array([1]), 0, make_rng(0)), "1 <= denominator < 2^56"),
    ],
)
def test_out_of_range_parameters_are_refused(call, message: str):
    with pytest.raises(ConfigError, match=re.escape(message)):
        call()


def test_python_integer_paths_give_the_same_distribution(monkeypatch):
    # force the rare paths: every discrete Gaussian candidate beyond the int64 tail, Algorithm 1 past int64
    monkeypatch.setattr(noise, "_GAUSSIAN_TAIL", 0)
    draws = discrete_gaussian_noise(20_000, sigma=2.0, rng=make_rng(8))
    _, variance = discrete_gaussian_variance(2.0)
    assert _chi_square_p_value(draws, lambda z: -(z * z) / (2 * float(variance))) > ALPHA
    trials = 20_000
    big = noise._bernoulli_exp_fraction(np.full(trials, 2**61), 2**61 + 1, make_rng(9))  # den·K ≥ 2^62 at K = 2
    p = math.exp(-(2**61) / (2**61 + 1))
    assert abs(big.mean() - p) <= 5 * math.sqrt(p * (1 - p) / trials)


def test_same_distribution_as_opendp_samplers():
    opendp = pytest.importorskip("opendp.prelude")
    opendp.enable_features("contrib")
    size = 20_000
    vector = opendp.vector_domain(opendp.atom_domain(T=int))
    gaussian = opendp.m.make_gaussian(vector, opendp.l2_distance(T=int), scale=2.5)
    laplace = opendp.m.make_laplace(vector, opendp.l1_distance(T=int), scale=1.5)
    pairs = [
        (np.array(gaussian([0] * size)), discrete_gaussian_noise(size, sigma=2.5, rng=make_rng(10))),
        (np.array(laplace([0] * size)), discrete_laplace_noise(size, scale=1.5, rng=make_rng(11))),
    ]
    for theirs, ours in pairs:
        values = np.arange(-8, 9)
        table = np.array([[np.count_nonzero(np.clip(d, -8, 8) == v) for v in values] for d in (theirs, ours)])
        table = table[:, table.min(axis=0) >= 5]
        assert stats.chi2_contingency(table).pvalue > ALPHA
