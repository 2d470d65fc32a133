"""End-to-end behaviour of DualQuery and DQRS on tiny instances: outputs, reported costs, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import (
    DQRSConfig,
    DualQueryConfig,
    OracleConfig,
    all_kway_marginals,
    compose,
    dqrs,
    dualquery,
    make_rng,
)
from dq_engine.errors import ConfigError
from dq_engine.privacy.theorems import dqrs_events, dualquery_events
from tests.budgets import grant_for_tests


def _dualquery_config(oracle: OracleConfig, **overrides) -> DualQueryConfig:
    return DualQueryConfig(**{"eta": 0.6, "samples": 30, "rounds": 8, "oracle": oracle, **overrides})


def _dqrs_config(oracle: OracleConfig, **overrides) -> DQRSConfig:
    return DQRSConfig(**{"eta": 0.3, "samples": 30, "rounds": 8, "oracle": oracle, **overrides})


def _run(mechanism: str, data, oracle: OracleConfig, seed: int):
    workload = all_kway_marginals(data.domain, 2)
    if mechanism == "dualquery":
        return dualquery(data, workload, _dualquery_config(oracle), grant=grant_for_tests(), rng=make_rng(seed))
    return dqrs(data, workload, _dqrs_config(oracle), grant=grant_for_tests(), rng=make_rng(seed))


@pytest.mark.parametrize("mechanism", ["dualquery", "dqrs"])
def test_same_seed_and_deterministic_oracle_give_identical_records(toy_data, deterministic_oracle, mechanism):
    first = _run(mechanism, toy_data, deterministic_oracle, seed=42)
    second = _run(mechanism, toy_data, deterministic_oracle, seed=42)
    np.testing.assert_array_equal(first.records, second.records)
    assert [d.objective for d in first.diagnostics] == [d.objective for d in second.diagnostics]
    assert [d.extra for d in first.diagnostics] == [d.extra for d in second.diagnostics]


@pytest.mark.parametrize("mechanism", ["dualquery", "dqrs"])
def test_different_seeds_give_different_records(toy_data, deterministic_oracle, mechanism):
    first = _run(mechanism, toy_data, deterministic_oracle, seed=42)
    other = _run(mechanism, toy_data, deterministic_oracle, seed=43)
    assert not np.array_equal(first.records, other.records)


def test_dualquery_outputs_one_valid_record_per_round_and_reports_its_events(toy_data, deterministic_oracle):
    config = _dualquery_config(deterministic_oracle, delta=1e-5)
    result = dualquery(toy_data, all_kway_marginals(toy_data.domain, 2), config, grant=grant_for_tests(),
                       rng=make_rng(1))
    assert result.mechanism == "dualquery"
    assert result.records.shape == (8, 4)
    assert np.all((result.records >= 0) & (result.records < toy_data.domain.sizes))
    assert list(result.events) == dualquery_events(0.6, 30, 8, toy_data.n)
    events = list(result.events)
    assert result.costs["paper"] == compose(events, mode="paper", delta=1e-5, paper_analysis="advanced_composition")
    assert result.costs["tight"] == compose(events, mode="tight", delta=1e-5)
    assert [d.round for d in result.diagnostics] == list(range(1, 9))
    assert all(d.sampled == 30 for d in result.diagnostics)
    assert all(not any(k.startswith("internal_") for k in d.public()) for d in result.diagnostics)


def test_dqrs_reports_theorem_17_events_and_public_resampling_counters(toy_data, deterministic_oracle):
    config = _dqrs_config(deterministic_oracle, delta=1e-5)
    result = dqrs(toy_data, all_kway_marginals(toy_data.domain, 2), config, grant=grant_for_tests(), rng=make_rng(2))
    assert result.records.shape == (8, 4)
    assert list(result.events) == dqrs_events(0.3, 30, 8, toy_data.n, topup_fraction=0.25)
    assert result.costs["paper"] == compose(list(result.events), mode="paper", delta=1e-5, paper_analysis="zcdp")
    assert result.diagnostics[0].extra == {}  # S_1 comes from the uniform Q^1
    for diagnostics in result.diagnostics[1:]:
        assert set(diagnostics.extra) == {"accepted", "fresh", "topup", "short"}
        assert diagnostics.sampled == 30 or diagnostics.extra["short"] == 1.0
        assert diagnostics.extra["fresh"] > 0


def test_dp_marginal_free_policy_charges_its_epsilon(toy_data, deterministic_oracle):
    config = _dualquery_config(deterministic_oracle, free_policy="dp-marginal", free_epsilon=0.1)
    result = dualquery(toy_data, all_kway_marginals(toy_data.domain, 2), config, grant=grant_for_tests(),
                       rng=make_rng(3))
    assert result.events[0].epsilon == 0.1
    assert result.costs["paper"].pure_epsilon == pytest.approx(
        0.1 + 0.6 * 8 * 7 * 30 / toy_data.n, rel=1e-12
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"eta": 0.0}, r"eta \(0\.0\) must be > 0"),
        ({"samples": 0}, r"samples \(0\) must be >= 1"),
        ({"rounds": 0}, r"rounds \(0\) must be >= 1"),
        ({"delta": 1.0}, r"delta \(1\.0\) must be in \(0, 1\)"),
        ({"free_policy": "dp-marginal"}, "free_policy 'dp-marginal' needs free_epsilon > 0"),
        ({"free_epsilon": 0.2}, "free_epsilon is only used by free_policy 'dp-marginal'; set it to 0"),
    ],
)
def test_configs_reject_out_of_range_parameters(overrides, message):
    with pytest.raises(ConfigError, match=message):
        DualQueryConfig(**{"eta": 0.5, "samples": 10, "rounds": 5, **overrides})
    with pytest.raises(ConfigError, match=message):
        DQRSConfig(**{"eta": 0.5, "samples": 10, "rounds": 5, **overrides})
