"""Independent columns: the mechanism's draws, its rows, its plan and forecast, and when ``auto`` chooses it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dq_engine import (
    Dataset,
    Domain,
    IndependentConfig,
    PrivacyGrant,
    all_kway_marginals,
    independent_columns,
    make_rng,
)
from dq_engine.errors import BudgetExceededError, ConfigError
from dq_engine.evaluation.forecast import ForecastShape, independent_forecast
from dq_engine.mechanisms.independent import INDEPENDENT_LABEL, exact_counts, raked_component
from dq_engine.privacy.accounting import ZCDPEvent
from dq_engine.privacy.public import PublicQuantities
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism
from dqrelease.mechanisms.auto import AutoKeys
from dqrelease.mechanisms.independent import independent_rho
from dqrelease.mechanisms.utility import assess_plan, forecast_shape
from tests.budgets import grant_for_tests, study_grant


def _dependent_table(n: int, seed: int = 0) -> Dataset:
    """``b`` copies ``a`` (strong dependence); ``c`` is skewed and independent of both."""
    rng = make_rng(seed)
    domain = Domain.categorical({"a": 4, "b": 4, "c": 3})
    a = rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1])
    c = rng.choice(3, n, p=[0.7, 0.2, 0.1])
    return Dataset.from_codes(domain, np.stack([a, a, c], axis=1))


# ---------------------------------------------------------------------- the rows
@pytest.mark.parametrize("probabilities, rows", [([0.5, 0.5], 3), ([0.7, 0.2, 0.1], 10), ([0.333, 0.333, 0.334], 7),
                                                 ([1.0, 0.0], 5), ([0.1] * 10, 1)])
def test_exact_counts_sum_to_the_rows_and_stay_within_one_of_the_expectation(probabilities, rows):
    counts = exact_counts(np.array(probabilities), rows)
    assert counts.sum() == rows
    assert np.all(np.abs(counts - np.array(probabilities) * rows) < 1.0)


def test_the_published_columns_have_the_noisy_one_way_marginals_and_no_dependence():
    data = _dependent_table(20_000)
    rho = 5.0  # sigma = sqrt(3 / 5) = 0.77 counts: the noise is negligible at n = 20,000
    result = independent_columns(data, IndependentConfig(rho=rho, rows=20_000), grant=grant_for_tests(),
                                 rng=make_rng(1))
    codes = result.records
    truth = [c / c.sum() for c in data.one_way_counts()]
    for a in range(3):
        # exact counts: no sampling noise; only the measurement's (sd 0.77 / 20,000 per value), so 1e-3 is > 20 sd
        np.testing.assert_allclose(np.bincount(codes[:, a], minlength=len(truth[a])) / len(codes), truth[a],
                                   atol=1e-3)
    joint = np.zeros((4, 4))
    np.add.at(joint, (codes[:, 0], codes[:, 1]), 1.0 / len(codes))
    product = np.outer(truth[0], truth[1])
    # a and b are copies in the data (TVD from the product 0.70); the published pair is the product up to the
    # shuffles' chance agreement, whose TVD over 16 cells at 20,000 rows is about 0.01 (stated bound 0.03)
    assert 0.5 * np.abs(joint - product).sum() < 0.03
    assert result.events == (ZCDPEvent(rho=rho, count=1, label=INDEPENDENT_LABEL),)
    assert result.parameters["noise_sd_counts"] == pytest.approx(math.sqrt(2 * 3) / math.sqrt(2 * rho))


def test_the_noise_has_the_planned_scale():
    data = _dependent_table(2_000)
    rho, seeds = 0.02, 200
    sd = math.sqrt(3 / rho)  # counts: L2 sensitivity sqrt(2 m) under replace-one, sigma = l2 / sqrt(2 rho)
    errors = []
    for seed in range(seeds):
        result = independent_columns(data, IndependentConfig(rho=rho, rows=2_000), grant=grant_for_tests(),
                                     rng=make_rng(seed))
        published = np.bincount(result.records[:, 2], minlength=3)
        errors.append(published[0] - data.one_way_counts()[2][0])
    # the dominant value of c (70 %) keeps the noise (the projection moves it little): the spread of 200 draws is
    # within 25 % of sd (the sample sd's own relative error at 200 draws is about 5 %)
    assert np.std(errors) == pytest.approx(sd, rel=0.25)
    assert abs(np.mean(errors)) < 4 * sd / math.sqrt(seeds)


def test_a_grant_that_does_not_cover_rho_refuses():
    data = _dependent_table(100)
    with pytest.raises(BudgetExceededError):
        independent_columns(data, IndependentConfig(rho=1.0, rows=10), grant=PrivacyGrant(
            epsilon=0.1, delta=1e-9, purpose="too small"), rng=make_rng(0))


@pytest.mark.parametrize("config", [{"rho": 0.0, "rows": 5}, {"rho": -1.0, "rows": 5}, {"rho": float("nan"), "rows": 5},
                                    {"rho": 1.0, "rows": 0}])
def test_bad_configs_are_refused(config):
    with pytest.raises(ConfigError):
        IndependentConfig(**config)


# ---------------------------------------------------------------------- rule components
def test_raking_meets_the_marginals_on_the_feasible_values_and_stays_closest_to_the_product():
    values = np.array([[a, b] for a in range(2) for b in range(3)])
    feasible = ~((values[:, 0] == 0) & (values[:, 1] > 0))  # a = 0 forces b = 0
    marginals = [np.array([0.3, 0.7]), np.array([0.5, 0.3, 0.2])]
    joint = raked_component(values, feasible, marginals)
    assert joint[~feasible].sum() == 0
    for j, target in enumerate(marginals):
        np.testing.assert_allclose(np.bincount(values[:, j], weights=joint, minlength=len(target)), target, atol=1e-8)
    # by hand: a = 0 puts 0.3 on (0, 0); the remaining 0.2 of b = 0 and all of b = 1, 2 go to a = 1
    np.testing.assert_allclose(joint, [0.3, 0, 0, 0.2, 0.3, 0.2], atol=1e-8)


# ---------------------------------------------------------------------- the plan, the forecast and auto
def _inputs(data: Dataset, epsilon: float, *, n: int | None = None) -> PlanInputs:
    workload = all_kway_marginals(data.domain, 2)
    public = PublicQuantities(n=n or data.n, epsilon=epsilon, delta=1e-9, domain=data.domain,
                              n_queries=len(workload), n_marginals=workload.n_marginals)
    return PlanInputs(public=public, mode="tight", deterministic=True, workload=workload)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_the_plan_charges_at_most_the_target_and_the_run_spends_its_plan(epsilon, tmp_path):
    data = _dependent_table(500)
    inputs = _inputs(data, epsilon)
    plan = plan_mechanism(MECHANISMS["independent"].keys(), inputs)
    assert plan.charged.epsilon <= epsilon
    assert plan.parameters["rho"] == independent_rho(epsilon, 1e-9, "tight")
    result = run_mechanism(study_grant(plan, tmp_path), RunInputs(data=data, workload=inputs.workload,
                                                                rng=make_rng(2)))
    assert result.events == plan.events and len(result.records) == 500


def test_the_one_way_forecast_is_the_noise_of_the_measurement():
    shape = ForecastShape(n=1_000, rows=1_000, column_sizes=(4, 4, 3), marginal_cells=(4, 4, 3),
                          complete=(True, True, True), n_queries=11, max_columns=1)
    forecast = independent_forecast(shape, 0.5)
    sigma = math.sqrt(3 / 0.5) / 1_000
    assert forecast.worst_one_way_cell.value == pytest.approx(sigma * math.sqrt(2 * math.log(2 * 11)))
    assert forecast.worst_one_way_cell.source == "theory" and forecast.workload_max.source == "theory"


def test_a_plan_no_better_than_independent_columns_is_told_so_but_not_failed():
    data = _dependent_table(100)  # MWEM on particles' forecast 0.59, independent columns' 0.50
    inputs = _inputs(data, 1.0)
    plan = plan_mechanism(MECHANISMS["mwem-particles"].keys(), inputs)
    verdict = assess_plan(plan, forecast_shape(inputs))
    assert [b.label for b in verdict.baselines] == ["zeros", "uniform", "independent columns"]
    assert verdict.notes and verdict.notes[0].startswith("independent columns at the same epsilon are forecast")
    assert not any("independent" in failure for failure in verdict.failures)
    big = plan_mechanism(MECHANISMS["mwem-particles"].keys(), _inputs(data, 1.0, n=1_000_000))
    assert assess_plan(big, forecast_shape(_inputs(data, 1.0, n=1_000_000))).notes == ()


def test_auto_chooses_independent_columns_where_their_forecast_wins_and_says_so():
    domain = Domain.categorical({f"c{j}": s for j, s in enumerate((15, 9, 10, 16, 16, 7, 15, 6, 5, 2, 8, 6, 10, 42))})
    data = Dataset.from_codes(domain, np.zeros((10, len(domain)), dtype=np.int64))
    small = plan_mechanism(AutoKeys(), _inputs(data, 0.1, n=1_000))
    assert small.mechanism == "independent"
    assert small.notes[0].startswith("auto chose independent columns: their forecast")
    large = plan_mechanism(AutoKeys(), _inputs(data, 1.0, n=1_000_000))
    assert large.mechanism == "mwem-particles"
