"""MWEM: accuracy on real data, the seed-000 comparison with DualQuery, the universe limit, accounting."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dq_engine import DualQueryConfig, OracleConfig, dualquery, make_rng, random_marginals
from dq_engine.data.answers import answer_workload, uniform_answers
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import Workload, marginal_queries
from dq_engine.errors import ConfigError, UniverseTooLargeError
from dq_engine.evaluation.baselines import zeros_answers
from dq_engine.fit.mwem import MWEMConfig, calibrate_mwem, mwem, mwem_events
from dq_engine.privacy.accounting import mwem_costs
from dq_engine.privacy.theorems import dualquery_pure_epsilon
from tests.budgets import grant_for_tests

DELTA = 1e-9


def max_error(workload, truth, records, weights=None) -> float:
    return float(np.abs(MarginalIndex(workload).answers(records, weights) - truth).max())


def test_mwem_beats_zeros_and_uniform_on_an_adult_slice(adult_slice):
    budget = calibrate_mwem(epsilon=1.0, delta=DELTA, rounds=20, mode="paper")
    config = MWEMConfig(rounds=20, replay_sweeps=10, delta=DELTA, **budget)
    result = mwem(adult_slice.data, adult_slice.workload, config, grant=grant_for_tests(), rng=make_rng(1))
    error = max_error(adult_slice.workload, adult_slice.truth, result.records, result.weights)
    zeros = np.abs(zeros_answers(adult_slice.workload) - adult_slice.truth).max()
    uniform = np.abs(uniform_answers(adult_slice.workload) - adult_slice.truth).max()
    assert error < 0.5 * min(zeros, uniform)  # baselines 0.265 / 0.262; MWEM gets about 0.046
    assert result.costs["paper"].epsilon <= 1.0 and result.costs["paper"].delta == 0.0


def test_mwem_on_a_sampled_support_beats_zeros_and_uniform(adult_slice):
    budget = calibrate_mwem(
        epsilon=1.0, delta=DELTA, rounds=10, mode="tight", measure_noise="gaussian", support_share=0.1
    )
    config = MWEMConfig(
        rounds=10, measure_noise="gaussian", measure="marginal", support="sampled", support_size=20_000,
        support_moves=1, learning_rate=2.0, delta=DELTA, **budget,
    )
    result = mwem(adult_slice.data, adult_slice.workload, config, grant=grant_for_tests(), rng=make_rng(2))
    error = max_error(adult_slice.workload, adult_slice.truth, result.records, result.weights)
    zeros = np.abs(zeros_answers(adult_slice.workload) - adult_slice.truth).max()
    uniform = np.abs(uniform_answers(adult_slice.workload) - adult_slice.truth).max()
    assert error < 0.5 * min(zeros, uniform)
    assert result.costs["tight"].epsilon <= 1.0
    assert result.weights.sum() == pytest.approx(1.0)


def test_mwem_is_more_accurate_than_dualquery_on_a_17_attribute_adult(mcsherry_adult_17):
    """Gaboardi et al. 2014, "Comparison with MWEM": on a low-dimensional Adult MWEM beats DualQuery.

    Both run under the same pure ε: DualQuery with the paper's η = 0.4, s = 35 and T = 46 (Theorem 4.2
    gives ε = ηT(T-1)s/n = 0.96), MWEM with the paper's T = 15 and the HLM split ε/2T per step. The
    workload is 200 random 3-way marginals of the 17 attributes (1,600 queries; the paper used 10,000).
    """
    data = mcsherry_adult_17
    workload = random_marginals(data.domain, 3, 200, make_rng(17))
    truth = answer_workload(data, workload)
    epsilon = dualquery_pure_epsilon(0.4, 35, 46, data.n)
    dq_errors, mwem_errors = [], []
    for seed in range(2):
        oracle = OracleConfig(kind="portfolio", deterministic=True, num_workers=1, deterministic_time_limit=0.5)
        dq = dualquery(
            data, workload, DualQueryConfig(eta=0.4, samples=35, rounds=46, oracle=oracle, track_error=False),
            grant=grant_for_tests(), rng=make_rng(seed),
        )
        assert dq.costs["paper"].pure_epsilon == pytest.approx(epsilon)
        dq_errors.append(max_error(workload, truth, dq.records))
        config = MWEMConfig(
            rounds=15, select_epsilon=epsilon / 30, measure_epsilon=epsilon / 30, delta=DELTA, track_error=False
        )
        result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(seed))
        assert result.costs["paper"].epsilon == pytest.approx(epsilon)
        mwem_errors.append(max_error(workload, truth, result.records, result.weights))
    # measured: DualQuery about 0.19-0.22, MWEM about 0.12-0.13 max error
    assert np.mean(mwem_errors) < 0.85 * np.mean(dq_errors)


def test_mwem_refuses_a_universe_above_the_limit():
    domain = Domain.categorical({f"a{i}": 10 for i in range(8)})  # 10^8 records = 2^26.6
    from dq_engine import Dataset

    data = Dataset.from_codes(domain, np.zeros((5, 8), dtype=np.int64))
    workload = random_marginals(domain, 2, 3, make_rng(0))
    config = MWEMConfig(rounds=1, select_epsilon=0.1, measure_epsilon=0.1)
    message = "MWEM keeps one weight per record: this domain has 2^26.6 records, more than the limit 2^24"
    with pytest.raises(UniverseTooLargeError, match=re.escape(message)):
        mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(0))


@pytest.mark.parametrize("mode", ["paper", "tight"])
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
@pytest.mark.parametrize("support_share", [0.0, 0.1])
def test_calibrated_mwem_budget_fits_the_target_tightly(mode, noise, epsilon, support_share):
    budget = calibrate_mwem(
        epsilon=epsilon, delta=DELTA, rounds=30, mode=mode, measure_noise=noise, support_share=support_share
    )
    extra = {"support": "sampled"} if support_share else {}
    config = MWEMConfig(rounds=30, measure_noise=noise, delta=DELTA, **extra, **budget)
    cost = mwem_costs(mwem_events(config), DELTA)[mode].epsilon
    assert epsilon * (1 - 1e-6) < cost <= epsilon


def test_paper_cost_of_laplace_mwem_is_basic_composition():
    config = MWEMConfig(rounds=15, select_epsilon=0.01, measure_epsilon=0.02)
    cost = mwem_costs(mwem_events(config), DELTA)
    assert cost["paper"].epsilon == pytest.approx(15 * 0.03)
    assert cost["paper"].delta == 0.0
    assert cost["tight"].epsilon <= cost["paper"].epsilon  # the better of pure and zCDP


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"rounds": 0}, "rounds (0) must be >= 1"),
        ({"select_epsilon": 0.0}, "select_epsilon (0.0) must be finite and > 0"),
        ({"measure_epsilon": 0.0}, "Laplace measurements need measure_epsilon > 0 and measure_rho = 0"),
        ({"measure_noise": "gaussian"}, "Gaussian measurements need measure_rho > 0 and measure_epsilon = 0"),
        ({"support_budget": 0.1}, "support_budget is only used by support='sampled'; set it to 0"),
        ({"support": "sampled", "support_moves": 1, "output": "average"}, "output 'average' needs fixed particles"),
        ({"max_universe_log2": 40}, "max_universe_log2 (40) must be in [1, 30]"),
    ],
)
def test_mwem_config_rejects_out_of_range_values(arguments, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        MWEMConfig(**{"rounds": 5, "select_epsilon": 0.1, "measure_epsilon": 0.1, **arguments})


def _dependent_pairs() -> tuple[Dataset, Workload]:
    """6,400 rows: a and b agree on 60 % of rows (every cell 0.05 off independence, L1 0.2); c and d put 15 % of
    the rows on (0, 0) (that cell about 0.1 off, L1 about 0.4 spread over 64 cells)."""
    domain = Domain.categorical({"a": 2, "b": 2, "c": 8, "d": 8})
    ab = np.repeat(np.array([[0, 0], [1, 1], [0, 1], [1, 0]]), [1920, 1920, 1280, 1280], axis=0)
    cells = np.array([[c, d] for c in range(8) for d in range(8)])
    cd = np.concatenate([np.zeros((960, 2), dtype=np.int64), np.repeat(cells, 85, axis=0)])
    codes = np.concatenate([ab, make_rng(0).permutation(cd)], axis=1)
    return Dataset.from_codes(domain, codes), marginal_queries(domain, [("a", "b"), ("c", "d")])


@pytest.mark.parametrize(("select", "chosen"), [("query", ("c", "d")), ("marginal", ("a", "b"))])
def test_the_marginal_score_discounts_the_noise_a_wide_marginal_brings(select, chosen):
    # With a noisy measurement (rho 0.0008: sigma 35 counts) the 64 cells of (c, d) are expected to carry an L1
    # error of about 0.28 from the noise alone, which leaves them a score of about 0.11 against 0.18 for (a, b):
    # AIM's score picks (a, b), the largest single cell picks (c, d). Both margins are > 200 in log-odds.
    data, workload = _dependent_pairs()
    config = MWEMConfig(
        rounds=1, select_epsilon=2.0, measure_noise="gaussian", measure_rho=0.0008, measure="marginal",
        select=select, support="sampled", support_size=20_000, support_budget=1.0, delta=DELTA,
    )
    result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(5))
    selected = int(result.diagnostics[0].extra["marginal"])
    assert tuple(workload.domain.attributes[i].name for i in workload.marginals[selected]) == chosen
    assert result.parameters["select"] == select


def test_marginal_selection_needs_marginal_measurements():
    with pytest.raises(ConfigError, match="measures the selected marginal"):
        MWEMConfig(rounds=5, select_epsilon=0.1, measure_epsilon=0.1, select="marginal")


def test_the_closure_lets_a_round_measure_a_pair_inside_a_wide_marginal():
    # The workload is one 4-way marginal of 256 cells; its closure holds (a, b). Under the noise of the test above
    # AIM's score picks the 4-cell (a, b) over the whole wide marginal when the closure is offered.
    data, _ = _dependent_pairs()
    workload = marginal_queries(data.domain, [("a", "b", "c", "d")])
    chosen = {}
    for candidates in ("workload", "closure"):
        config = MWEMConfig(
            rounds=1, select_epsilon=2.0, measure_noise="gaussian", measure_rho=0.0008, measure="marginal",
            select="marginal", candidates=candidates, support="sampled", support_size=20_000, support_budget=1.0,
            delta=DELTA,
        )
        result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(6))
        chosen[candidates] = int(result.diagnostics[0].extra["marginal"])
    assert chosen["workload"] == 0  # the only marginal
    # the closure's marginals in (k, attributes) order: 4 single columns, then (a, b) first of the 6 pairs
    assert chosen["closure"] == 4
