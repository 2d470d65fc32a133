"""The forecast's formulas (dq_engine/evaluation/forecast.py) against hand-computed values, and its verdicts."""

from __future__ import annotations

import math

import pytest

from dq_engine import Domain
from dq_engine.data.workload import concatenate_workloads, marginal_queries
from dq_engine.errors import ConfigError
from dq_engine.evaluation import forecast
from dq_engine.evaluation.forecast import (
    Figure,
    ForecastShape,
    judge_forecast,
    max_of_gaussians,
    particles_forecast,
    randomized_response_forecast,
    raw_records_forecast,
    uniform_forecast,
    zeros_forecast,
)
from dq_engine.fit.mwem import MWEMConfig


def _shape(**overrides) -> ForecastShape:
    values = {"n": 10_000, "rows": 10_000, "column_sizes": (2, 4, 10),
              "marginal_cells": (2, 4, 10, 8, 20, 40), "complete": (True,) * 6, "n_queries": 84}
    values.update(overrides)
    return ForecastShape(**values)


def _particles(**overrides) -> MWEMConfig:
    values = {"rounds": 8, "select_epsilon": 0.2, "measure_rho": 0.0025, "measure_noise": "gaussian",
              "measure": "marginal", "support": "sampled", "support_budget": 0.01}
    values.update(overrides)
    return MWEMConfig(**values)


def test_max_of_gaussians_is_sigma_times_sqrt_two_log_two_count():
    # 2 ln 100 = 9.21034: sqrt = 3.03485
    assert max_of_gaussians(0.1, 50) == pytest.approx(0.303485, abs=1e-6)
    with pytest.raises(ConfigError, match=r"count \(0\) must be >= 1"):
        max_of_gaussians(0.1, 0)


def test_zeros_bounds_are_one_over_the_smallest_column_and_marginal():
    zeros = zeros_forecast(_shape())
    assert zeros.worst_one_way_cell.value == 0.5 and zeros.worst_one_way_cell.source == "bound"
    assert zeros.workload_max.value == 0.5 and zeros.workload_max.shown() == ">= 0.5"
    # only the complete marginals bound zeros' workload error; none complete: nothing can be said
    partial = zeros_forecast(_shape(complete=(False, True, False, False, False, True)))
    assert partial.workload_max.value == 0.25
    unknown = zeros_forecast(_shape(complete=(False,) * 6))
    assert unknown.workload_max.value is None and unknown.workload_max.shown() == "unknown"


def test_uniform_is_the_typical_share_of_its_largest_possible_error():
    uniform = uniform_forecast(_shape())
    assert uniform.worst_one_way_cell.value == pytest.approx(forecast.UNIFORM_TYPICAL_SHARE * 0.9)
    assert uniform.workload_max.value == pytest.approx(forecast.UNIFORM_TYPICAL_SHARE * (1 - 1 / 40))
    assert uniform.worst_one_way_cell.source == "calibrated"


def test_particles_forecast_matches_the_hand_computed_noise():
    shape, config = _shape(), _particles()
    # prior: sqrt(3 / 0.01) / 10,000 = 0.0017321; rows: 0.5 / sqrt(10,000) = 0.005; hypot = 0.0052915
    # C1 = 16 one-way cells: sqrt(2 ln 32) = 2.63297 -> 0.0139325
    one_way = math.hypot(0.0139325 * forecast.PRIOR_FIT_FACTOR, forecast.ONE_WAY_FIT_FLOOR)
    # measure: 1 / (10,000 sqrt(0.0025)) = 0.002; hypot with rows = 0.0053852; W = 84 cells: sqrt(2 ln 168) =
    # 3.20124 -> 0.0172393; floor: 2 ln 168 / (10,000 x 0.2) = 0.0051240; hypot = 0.0179847
    # unmeasured: M = 6 marginals, T = 8 rounds -> sqrt(6/8) = 0.8660254
    workload = max(one_way, math.hypot(0.0179847 * forecast.WORKLOAD_FIT_FACTOR,
                                       0.8660254 * forecast.WORKLOAD_FIT_FLOOR))
    got = particles_forecast(shape, config, label="mwem-particles")
    assert got.worst_one_way_cell.value == pytest.approx(one_way, rel=1e-4)
    assert got.workload_max.value == pytest.approx(workload, rel=1e-4)
    assert got.worst_one_way_cell.source == "calibrated"


def test_workload_floor_grows_with_the_marginals_per_measured_round():
    # n = 10^9: every noise term is below 1e-5, so the workload max is the floor f_W sqrt(M/T) (above the one-way)
    shape = _shape(n=10**9, rows=10**9, marginal_cells=(2, 4, 10, 8, 20, 40) * 8, complete=(True,) * 48)
    assert forecast.unmeasured_scale(shape, 12) == pytest.approx(2.0)  # M = 48, T = 12
    few = particles_forecast(shape, _particles(rounds=12), label="a").workload_max.value
    many = particles_forecast(shape, _particles(rounds=48), label="b").workload_max.value
    assert few == pytest.approx(2.0 * forecast.WORKLOAD_FIT_FLOOR, rel=1e-3)
    assert many == pytest.approx(forecast.WORKLOAD_FIT_FLOOR, rel=1e-3)
    assert "M/T = 48/12" in particles_forecast(shape, _particles(rounds=12), label="a").workload_max.how
    with pytest.raises(ConfigError, match=r"rounds \(0\) must be >= 1"):
        forecast.unmeasured_scale(shape, 0)


def test_more_budget_forecasts_less_error():
    shape = _shape()
    small = particles_forecast(shape, _particles(), label="a")
    large = particles_forecast(shape, _particles(support_budget=0.04, measure_rho=0.01, select_epsilon=0.4),
                               label="b")
    assert large.worst_one_way_cell.value < small.worst_one_way_cell.value
    assert large.workload_max.value < small.workload_max.value


def test_particles_forecast_refuses_another_configuration():
    with pytest.raises(ConfigError, match="MWEM on particles"):
        particles_forecast(_shape(), MWEMConfig(rounds=3, select_epsilon=0.1, measure_epsilon=0.1), label="x")


def test_raw_records_error_shrinks_as_one_over_root_records():
    got = raw_records_forecast(_shape(), 16, label="dualquery")
    assert got.worst_one_way_cell.value == pytest.approx(forecast.RAW_RECORDS_FACTOR / 4)
    assert got.workload_max.value == pytest.approx(
        max(forecast.RAW_RECORDS_FACTOR, forecast.RAW_RECORDS_WORKLOAD_FACTOR) / 4)
    assert raw_records_forecast(_shape(), 1, label="x").workload_max.value == 1.0  # capped at 1


def test_randomized_response_workload_is_the_estimator_bound_theory():
    got = randomized_response_forecast(_shape(), keep_probability=0.5, estimate_sd=0.01)
    # 0.01 x sqrt(2 ln 168) = 0.0320124
    assert got.workload_max.value == pytest.approx(0.0320124, rel=1e-5)
    assert got.workload_max.source == "theory"
    # rows: half of uniform's typical error, plus sampling 0.005 x sqrt(2 ln 32)
    expected = 0.5 * forecast.UNIFORM_TYPICAL_SHARE * 0.9 + 0.005 * math.sqrt(2 * math.log(32))
    assert got.worst_one_way_cell.value == pytest.approx(expected)


def test_judge_fails_a_forecast_at_or_above_zeros_bound_and_passes_a_small_one():
    shape = _shape()
    bad = raw_records_forecast(shape, 2, label="dualquery (raw records)")  # c_R / sqrt(2) >= 0.5
    verdict = judge_forecast(bad, shape)
    assert not verdict.passes
    assert any(f.startswith("worst one-way cell") and f.endswith("publishing zeros (>= 0.5)")
               for f in verdict.failures)
    good = judge_forecast(particles_forecast(shape, _particles(), label="mwem-particles"), shape)
    assert good.passes and good.failures == ()
    assert [b.label for b in good.baselines] == ["zeros", "uniform"]


def test_zeros_bound_below_the_resampling_floor_is_not_compared():
    # one 3-way marginal of 10 x 10 x 10 cells: zeros' bound is 0.001, uniform's typical value ~0.9
    shape = _shape(column_sizes=(10, 10, 10), marginal_cells=(1000,), complete=(True,), n_queries=1000)
    moderate = forecast.ErrorForecast(
        label="x", worst_one_way_cell=Figure(value=0.05, source="calibrated", how=""),
        workload_max=Figure(value=0.2, source="calibrated", how=""),
    )
    assert judge_forecast(moderate, shape).passes
    awful = forecast.ErrorForecast(
        label="x", worst_one_way_cell=Figure(value=0.05, source="calibrated", how=""),
        workload_max=Figure(value=0.95, source="calibrated", how=""),
    )
    assert judge_forecast(awful, shape).failures == ("workload max 0.95 is no better than publishing uniform "
                                                     f"({uniform_forecast(shape).workload_max.value:.3g})",)


def test_a_figure_has_a_value_unless_unknown():
    with pytest.raises(ConfigError, match="unless its source is 'unknown'"):
        Figure(value=None, source="theory", how="")
    with pytest.raises(ConfigError):
        Figure(value=0.1, source="unknown", how="")


def test_shape_of_a_workload_counts_cells_and_complete_marginals():
    domain = Domain.categorical({"a": 2, "b": 3, "c": 4})
    full = marginal_queries(domain, [("a",), ("a", "b")])
    workload = concatenate_workloads([full, marginal_queries(domain, [("c",)])])
    shape = ForecastShape.of(workload, n=500)
    assert shape.column_sizes == (2, 3, 4) and shape.rows == 500
    assert sorted(shape.marginal_cells) == [2, 4, 6] and shape.complete == (True, True, True)
    assert shape.one_way_cells == 9 and shape.workload_cells == 12
    assert ForecastShape.of(full, n=500, rows=20).rows == 20


def test_the_particles_forecast_carries_the_error_bars_measured_on_the_benchmark_tables():
    got = particles_forecast(_shape(), _particles(), label="mwem-particles")
    low, high = forecast.FIT_FORECAST_RATIOS
    for figure in (got.worst_one_way_cell, got.workload_max):
        assert figure.ratios == (low, high)
        assert figure.expected_range() == pytest.approx((figure.value / high, figure.value / low))
    assert got.as_dict()["workload_max_error"]["expected_range"] == got.workload_max.expected_range()


def test_error_bars_are_capped_at_one_and_absent_where_none_were_measured():
    assert Figure(value=0.9, source="calibrated", how="x", ratios=(0.5, 2.0)).expected_range() == (0.45, 1.0)
    assert Figure(value=0.1, source="theory", how="x").expected_range() is None
    assert Figure(value=None, source="unknown", how="x", ratios=(0.5, 2.0)).expected_range() is None
    assert raw_records_forecast(_shape(), 300, label="raw").worst_one_way_cell.expected_range() is None
