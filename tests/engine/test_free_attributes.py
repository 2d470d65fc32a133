"""Free-attribute policies: Gaussian noisy one-way marginals, their zCDP charge, calibration and runs."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from dq_engine import DQRSConfig, DualQueryConfig, all_kway_marginals, compose, dqrs, dualquery, make_rng
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.errors import ConfigError
from dq_engine.oracle.free_attributes import (
    FreeAttributeFiller,
    gaussian_marginal_sigma,
    gaussian_one_way_marginals,
    gaussian_sensitivity_squared,
)
from dq_engine.privacy.accounting import ZCDPEvent, approx_dp_from_zcdp, em_rho_bounded_range
from dq_engine.privacy.calibration import calibrate_rounds, mechanism_cost
from dq_engine.privacy.theorems import dualquery_events, dualquery_round_epsilon
from tests.budgets import grant_for_tests


def test_gaussian_sensitivity_counts_one_cell_per_binary_and_two_per_categorical_attribute(mixed_domain):
    # colour (3 values) and grade (4 values): 2 cells of one each; five binary flags: only the ones count, 1 each
    assert gaussian_sensitivity_squared(mixed_domain) == 2 + 2 + 5
    assert gaussian_sensitivity_squared(Domain.binary(100_000)) == 100_000
    # d = 100,000 binary attributes, n = 50,000, rho = 0.05: sigma = sqrt(100,000 / 0.1) / 50,000 = 0.02
    assert gaussian_marginal_sigma(Domain.binary(100_000), n=50_000, rho=0.05) == pytest.approx(0.02, rel=1e-12)


def test_gaussian_marginals_have_the_stated_sigma():
    d, n, rho = 2_000, 1_000, 1.0
    bits = make_rng(5).random((n, d)) < 0.5  # proportions near 1/2: sigma 0.0316 never reaches the clip
    data = Dataset.from_codes(Domain.binary(d), bits.astype(np.int64))
    exact = np.array([c[1] for c in data.one_way_counts()]) / n
    marginals, event = gaussian_one_way_marginals(data, rho=rho, rng=make_rng(6))
    noise = np.array([p[1] for p in marginals]) - exact
    sigma = math.sqrt(d / (2 * rho)) / n
    assert gaussian_marginal_sigma(data.domain, n=n, rho=rho) == pytest.approx(sigma, rel=1e-12)
    # 2,000 draws: the sample sd is within 6% (~4 standard errors of 1.6%), the mean within 4 sigma / sqrt(d)
    assert np.std(noise) == pytest.approx(sigma, rel=0.06)
    assert abs(np.mean(noise)) < 4 * sigma / math.sqrt(d)
    assert event == ZCDPEvent(rho=rho, count=1, label="Gaussian one-way marginals for free attributes")


def test_gaussian_marginals_are_clipped_into_probability_vectors(toy_data, mixed_domain):
    rng = make_rng(7)
    codes = np.stack([rng.integers(0, size, size=50) for size in mixed_domain.sizes], axis=1)
    for data in (toy_data, Dataset.from_codes(mixed_domain, codes)):
        marginals, _ = gaussian_one_way_marginals(data, rho=1e-4, rng=make_rng(8))  # noise far above 1
        for p, size in zip(marginals, data.domain.sizes, strict=True):
            assert p.shape == (size,)
            assert np.all(p >= 0)
            assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_vectorised_filler_draws_what_the_per_attribute_search_drew(mixed_domain):
    marginals = [make_rng(9 + j).dirichlet(np.ones(size)) for j, size in enumerate(mixed_domain.sizes)]
    filler = FreeAttributeFiller(mixed_domain, "dp-marginal", marginals)
    free = np.array([0, 2, 3, 5, 6])
    for seed in range(50):
        filled = filler.fill(np.zeros(len(mixed_domain.sizes), dtype=np.int64), free, make_rng(seed))
        expected = np.zeros(len(mixed_domain.sizes), dtype=np.int64)  # the loop the filler used before
        for attribute, u in zip(free, make_rng(seed).random(len(free)), strict=True):
            cumulative = np.cumsum(marginals[attribute])
            expected[attribute] = min(int(np.searchsorted(cumulative, u * cumulative[-1], side="right")),
                                      len(cumulative) - 1)
        np.testing.assert_array_equal(filled, expected)


def test_calibration_with_gaussian_marginals_matches_a_hand_computed_rho_and_never_exceeds_the_target():
    common = {"eta": 0.4, "samples": 300, "n": 50_000}
    free_rho = 0.006
    rounds = calibrate_rounds("dualquery", epsilon=1.0, delta=1e-3, mode="tight", free_rho=free_rho, **common)
    assert rounds < calibrate_rounds("dualquery", epsilon=1.0, delta=1e-3, mode="tight", **common)

    def hand_rho(t: int) -> float:  # free_rho + sum over rounds of s draws at eps'_t^2 / 8 (bounded range)
        return free_rho + sum(300 * dualquery_round_epsilon(0.4, r, 50_000) ** 2 / 8 for r in range(1, t + 1))

    for t in (rounds, rounds + 1):
        cost = mechanism_cost("dualquery", mode="tight", delta=1e-3, rounds=t, free_rho=free_rho, **common)
        assert cost == pytest.approx(approx_dp_from_zcdp(hand_rho(t), 1e-3), rel=1e-9)
    assert mechanism_cost("dualquery", mode="tight", delta=1e-3, rounds=rounds, free_rho=free_rho, **common) <= 1.0
    assert mechanism_cost("dualquery", mode="tight", delta=1e-3, rounds=rounds + 1, free_rho=free_rho, **common) > 1.0
    paper = calibrate_rounds("dualquery", epsilon=1.0, delta=1e-3, mode="paper", free_rho=free_rho, **common)
    assert mechanism_cost("dualquery", mode="paper", delta=1e-3, rounds=paper, free_rho=free_rho, **common) <= 1.0


@pytest.mark.parametrize("mechanism", ["dualquery", "dqrs"])
def test_run_with_gaussian_marginals_is_valid_and_charges_its_rho(toy_data, deterministic_oracle, mechanism):
    workload = all_kway_marginals(toy_data.domain, 2)
    settings = {"samples": 30, "rounds": 6, "delta": 1e-5, "oracle": deterministic_oracle,
                "free_policy": "dp-marginal", "free_noise": "gaussian", "free_rho": 0.02}
    if mechanism == "dualquery":
        result = dualquery(toy_data, workload, DualQueryConfig(eta=0.6, **settings), grant=grant_for_tests(),
                           rng=make_rng(3))
    else:
        result = dqrs(toy_data, workload, DQRSConfig(eta=0.3, **settings), grant=grant_for_tests(), rng=make_rng(3))
    assert result.records.shape == (6, 4)
    assert np.all((result.records >= 0) & (result.records < toy_data.domain.sizes))
    assert result.events[0] == ZCDPEvent(rho=0.02, count=1, label="Gaussian one-way marginals for free attributes")
    assert result.parameters["free_rho"] == 0.02
    assert result.costs["tight"] == compose(list(result.events), mode="tight", delta=1e-5)
    assert result.costs["paper"].pure_epsilon is None  # Gaussian noise has no pure-epsilon bound
    if mechanism == "dualquery":
        mw_rho = sum(e.count * em_rho_bounded_range(e.epsilon) for e in dualquery_events(0.6, 30, 6, toy_data.n))
        assert result.costs["tight"].rho == pytest.approx(0.02 + mw_rho, rel=1e-12)
        assert "Theorems 4.2/4.3 do not apply" in result.costs["paper"].method


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"free_policy": "dp-marginal", "free_noise": "gaussian"},
         "free_policy 'dp-marginal' with free_noise 'gaussian' needs free_rho > 0"),
        ({"free_policy": "dp-marginal", "free_noise": "gaussian", "free_rho": 0.1, "free_epsilon": 0.1},
         "free_noise 'gaussian' spends free_rho, not free_epsilon; set free_epsilon to 0"),
        ({"free_policy": "dp-marginal", "free_epsilon": 0.1, "free_rho": 0.1},
         "free_rho is only used by free_policy 'dp-marginal' with free_noise 'gaussian'; set it to 0"),
        ({"free_rho": 0.1}, "free_rho is only used by free_policy 'dp-marginal' with free_noise 'gaussian'"),
        ({"free_noise": "cauchy"}, "free_noise ('cauchy') must be 'laplace' or 'gaussian'"),
    ],
)
def test_configs_reject_free_budgets_that_do_not_fit_the_noise(overrides, message):
    for config in (DualQueryConfig, DQRSConfig):
        with pytest.raises(ConfigError, match=re.escape(message)):
            config(**{"eta": 0.5, "samples": 10, "rounds": 5, **overrides})
