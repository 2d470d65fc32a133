"""Empirical differential-privacy checks of every exact sampler on neighbouring inputs.

For each sampler we draw ``TRIALS`` outcomes on an input ``D`` and on a neighbour ``D'`` (seeded), and check, for
every outcome set ``S`` in a family (each single outcome seen at least ``MIN_COUNT`` times, and every tail
``{z ≥ k}``, ``{z ≤ k}`` of ordered outputs), in both directions:

    lower(P[S | D]) ≤ e^ε · upper(P[S | D']) + δ,

where ``lower``/``upper`` are normal-approximation confidence bounds ``p̂ ∓ Z·√(p̂(1 - p̂)/TRIALS) ∓ 1/TRIALS``
with ``Z = 5`` (a false alarm for one set has probability below 3·10⁻⁷; the families have fewer than 200 sets).
The draws are seeded, so a run is deterministic. Each check also has a *negative control*: the same frequencies
tested against a claim the sampler does not meet (a smaller ε, or narrower noise) must fail, which shows the
check has the power to catch a wrong sampler.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dq_engine import Dataset, Domain, make_rng
from dq_engine.mechanisms.randomized_response import RandomizedResponseConfig, randomized_response
from dq_engine.oracle.free_attributes import gaussian_one_way_marginals, noisy_one_way_marginals
from dq_engine.privacy.accounting import approx_dp_from_zcdp
from dq_engine.privacy.exact_sampling import sample_signed_pairs
from dq_engine.privacy.exponential_mechanism import SparseSignedSelector, select_signed_query
from dq_engine.privacy.mw import QueryDistribution
from dq_engine.privacy.noise import discrete_gaussian, discrete_laplace
from tests.budgets import grant_for_tests

TRIALS = 200_000
Z = 5.0
MIN_COUNT = 30


def _violations(
    first: np.ndarray, second: np.ndarray, *, epsilon: float, delta: float, ordered: bool, trials: int = TRIALS
) -> list[str]:
    """Outcome sets whose frequencies contradict (ε, δ)-DP beyond the confidence bounds (see module docstring)."""
    outcomes = np.union1d(first, second)
    count_first = np.array([np.count_nonzero(first == o) for o in outcomes])
    count_second = np.array([np.count_nonzero(second == o) for o in outcomes])
    sets = [(f"{{{o}}}", a, b) for o, a, b in zip(outcomes, count_first, count_second, strict=True)
            if max(a, b) >= MIN_COUNT]
    if ordered:
        above_first, above_second = np.cumsum(count_first[::-1])[::-1], np.cumsum(count_second[::-1])[::-1]
        below_first, below_second = np.cumsum(count_first), np.cumsum(count_second)
        for k, o in enumerate(outcomes):
            sets.append((f">= {o}", above_first[k], above_second[k]))
            sets.append((f"<= {o}", below_first[k], below_second[k]))
    bad = []
    for name, a, b in sets:
        for x, y in ((a, b), (b, a)):
            p, q = x / trials, y / trials
            lower = p - Z * math.sqrt(p * (1 - p) / trials) - 1 / trials
            upper = q + Z * math.sqrt(q * (1 - q) / trials) + 1 / trials
            if lower > math.exp(epsilon) * upper + delta:
                bad.append(f"{name}: {p:.5f} vs {q:.5f}")
    return bad


# ---------------------------------------------------------------------- additive noise on counts
def test_discrete_laplace_is_epsilon_dp_on_neighbouring_counts():
    epsilon = 1.0  # Δ₁ = 1, scale 1/ε
    first = discrete_laplace(np.zeros(TRIALS, dtype=np.int64), scale=1 / epsilon, rng=make_rng(11))
    second = discrete_laplace(np.ones(TRIALS, dtype=np.int64), scale=1 / epsilon, rng=make_rng(12))
    assert _violations(first, second, epsilon=epsilon, delta=0.0, ordered=True) == []
    assert _violations(first, second, epsilon=0.7 * epsilon, delta=0.0, ordered=True)  # negative control


def test_discrete_gaussian_meets_the_approximate_dp_of_its_rho():
    sigma = 2.0
    rho = 1 / (2 * sigma**2)  # Δ₂ = 1
    delta = 1e-3
    epsilon = approx_dp_from_zcdp(rho, delta)
    first = discrete_gaussian(np.zeros(TRIALS, dtype=np.int64), sigma=sigma, rng=make_rng(21))
    second = discrete_gaussian(np.ones(TRIALS, dtype=np.int64), sigma=sigma, rng=make_rng(22))
    assert _violations(first, second, epsilon=epsilon, delta=delta, ordered=True) == []
    narrow = discrete_gaussian(np.zeros(TRIALS, dtype=np.int64), sigma=sigma / 2, rng=make_rng(23))
    narrow_next = discrete_gaussian(np.ones(TRIALS, dtype=np.int64), sigma=sigma / 2, rng=make_rng(24))
    assert _violations(narrow, narrow_next, epsilon=epsilon, delta=delta, ordered=True)  # negative control


# ---------------------------------------------------------------------- exponential mechanism and MW
def _keys(index: np.ndarray, negated: np.ndarray) -> np.ndarray:
    return 2 * index + negated


def _signed_probabilities(log_weight: np.ndarray, zero_pairs: int = 0) -> np.ndarray:
    """Exact probabilities of the signed outcomes ``2i`` (``q_i``) and ``2i + 1`` (``q̄_i``), zero block last."""
    weights = np.stack([np.exp(log_weight), np.exp(-log_weight)], axis=1).ravel()
    if zero_pairs:
        weights = np.concatenate([weights, [float(zero_pairs), float(zero_pairs)]])
    return weights / weights.sum()


def test_signed_pair_sampler_is_epsilon_dp_when_log_weights_move_by_half_epsilon():
    epsilon = 1.0  # exponential mechanism: log-weights εS/2 with score sensitivity 1 move by at most ε/2
    base = np.array([0.3, -0.2, 0.1, 0.0, 1.2])
    moved = base + np.array([0.5, -0.5, -0.5, -0.5, 0.5]) * epsilon
    first = _keys(*sample_signed_pairs(base, TRIALS, make_rng(31), zero_pairs=3))
    second = _keys(*sample_signed_pairs(moved, TRIALS, make_rng(32), zero_pairs=3))
    assert _violations(first, second, epsilon=epsilon, delta=0.0, ordered=False) == []
    # the negation-closed class keeps the true ratio below e^ε; the control claims 70 % of the true largest one
    largest = float(np.abs(np.log(_signed_probabilities(base, 3) / _signed_probabilities(moved, 3))).max())
    assert largest <= epsilon
    assert _violations(first, second, epsilon=0.7 * largest, delta=0.0, ordered=False)  # negative control


def test_mw_query_distribution_sample_is_epsilon_dp_for_neighbouring_payoffs():
    eta, rounds, n = 0.5, 4, 2  # each round's payoff q(D) - q(x) moves by at most 1/n on neighbours
    payoffs = make_rng(33).uniform(-1, 1, size=(rounds, 6))
    shift = np.array([1, -1, 1, -1, 1, -1]) / n
    draws = []
    for data_shift, seed in ((0.0, 34), (1.0, 35)):
        distribution = QueryDistribution(6, eta=eta)
        for payoff in payoffs:
            distribution.update(payoff + data_shift * shift)
        draws.append(_keys(*(lambda s: (s.index, s.negated))(distribution.sample(TRIALS, make_rng(seed)))))
    epsilon = 2 * eta * rounds / n  # |L(D) - L(D')| ≤ η T / n per query; ratio of two weights ≤ e^{2ηT/n}
    assert _violations(draws[0], draws[1], epsilon=epsilon, delta=0.0, ordered=False) == []
    assert _violations(draws[0], draws[1], epsilon=0.5 * epsilon, delta=0.0, ordered=False)  # negative control


def test_exponential_mechanism_entry_points_are_epsilon_dp_on_neighbouring_answers():
    epsilon, n, trials = 4.0, 10, 2_500  # one draw per call: fewer trials, a larger ε to keep the power
    truth = np.array([0.5, 0.2, 0.0, 0.0, 0.1, 0.0])
    neighbour = truth + np.array([0.1, -0.1, 0.0, 0.0, 0.0, 0.0])  # one record moved: answers move by ≤ 1/n
    estimates = np.array([0.3, 0.3, 0.0, 0.0, 0.0, 0.0])
    positions, values = np.flatnonzero(estimates), estimates[np.flatnonzero(estimates)]
    dense, sparse = [], []
    for answers, seed in ((truth, 41), (neighbour, 42)):
        rng = make_rng(seed)
        dense.append(np.array([2 * i + s for i, s in (
            select_signed_query(answers, estimates, epsilon=epsilon, n=n, rng=rng) for _ in range(trials))]))
        selector = SparseSignedSelector(answers)
        sparse.append(np.array([2 * i + s for i, s in (
            selector.select(positions, values, epsilon=epsilon, n=n, rng=rng) for _ in range(trials))]))
    scale = epsilon * n / 2
    largest = float(np.abs(np.log(_signed_probabilities((truth - estimates) * scale)
                                  / _signed_probabilities((neighbour - estimates) * scale))).max())
    assert largest <= epsilon
    for first, second in (dense, sparse):
        assert _violations(first, second, epsilon=epsilon, delta=0.0, ordered=False, trials=trials) == []
        # the largest ratios sit on outcomes too rare for 2,500 draws; a claim of ε = 0.05 must still fail
        assert _violations(first, second, epsilon=0.05, delta=0.0, ordered=False, trials=trials)


# ---------------------------------------------------------------------- randomized response
def test_randomized_response_is_epsilon_dp_per_record():
    epsilon = 1.0
    domain = Domain.categorical({"a": 3, "b": 2})
    outputs = []
    for record, seed in (((0, 0), 51), ((2, 1), 52)):
        data = Dataset.from_codes(domain, np.tile(record, (TRIALS, 1)))
        result = randomized_response(data, RandomizedResponseConfig(epsilon=epsilon), grant=grant_for_tests(),
                                     rng=make_rng(seed))
        outputs.append(result.records[:, 0] * 2 + result.records[:, 1])
    assert _violations(outputs[0], outputs[1], epsilon=epsilon, delta=0.0, ordered=False) == []
    assert _violations(outputs[0], outputs[1], epsilon=0.8 * epsilon, delta=0.0, ordered=False)  # negative control


# ---------------------------------------------------------------------- free-attribute marginals (add/remove)
def _marginal_draws(measure, records: np.ndarray, domain: Domain, trials: int, seed: int) -> np.ndarray:
    data = Dataset.from_codes(domain, records).with_neighbouring("add-remove")
    rng = make_rng(seed)
    return np.array([round(float(measure(data, rng)[0][0][1]), 9) for _ in range(trials)])


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_free_attribute_marginals_are_private_under_add_remove_neighbours(noise: str):
    trials = 2_000  # one measurement per call
    domain = Domain.binary(1)
    records = np.array([[0], [0], [1], [1], [1]])
    neighbour = np.vstack([records, [[1]]])  # one record added: n itself differs
    if noise == "laplace":
        epsilon, delta = 1.0, 0.0  # add/remove: Δ₁ = 1 attribute, scale 1/ε

        def measure(data, rng):
            return noisy_one_way_marginals(data, epsilon=epsilon, rng=rng)
    else:
        rho, delta = 0.125, 1e-3  # add/remove: Δ₂² = 1, σ = 2

        def measure(data, rng):
            return gaussian_one_way_marginals(data, rho=rho, rng=rng)

        epsilon = approx_dp_from_zcdp(rho, delta)
    first = _marginal_draws(measure, records, domain, trials, 61)
    second = _marginal_draws(measure, neighbour, domain, trials, 62)
    assert _violations(first, second, epsilon=epsilon, delta=delta, ordered=True, trials=trials) == []
    assert _violations(first, second, epsilon=0.05, delta=0.0, ordered=True, trials=trials)  # negative control
