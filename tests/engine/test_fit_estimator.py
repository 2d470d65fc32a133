"""The fit's estimator after the last round: mirror descent on the measurements' Gaussian log-likelihood
(``MWEMConfig.final_estimator = "mirror"``, dq_engine/fit/mwem.py) against the exact maximum-likelihood answer and
against the cyclic sweeps. Every run is seeded; tolerances are stated per assertion.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from dq_engine import Dataset, Domain, make_rng, marginal_queries
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.errors import ConfigError
from dq_engine.fit.mwem import MWEMConfig, _mirror_descent, mwem
from dq_engine.fit.prior import Measurement
from dq_engine.fit.universe import UniverseDistribution
from tests.budgets import grant_for_tests
from tests.engine.test_table_fit import DEPENDENT_SIZES, dependent_columns

DOMAIN = Domain.categorical({"a": 2, "b": 3, "c": 2})
"""12 records: the maximum-likelihood problem is a small quadratic programme over the simplex."""


def _history(index: MarginalIndex, truth: np.ndarray, rng: np.random.Generator) -> list[Measurement]:
    """Noisy measurements of every marginal of ``index`` (cells in fractions), with variances 1e-4 to 4e-3:
    the one-way marginals precise, the pairs noisy, so an estimator that weighs them alike is not the ML one."""
    exact = UniverseDistribution(DOMAIN, index)
    exact.p = truth.reshape(exact.p.shape)
    history = []
    for m in range(index.n_marginals):
        variance = 1e-4 if len(index.attributes[m]) == 1 else 4e-3
        table = exact.table(m)
        history.append(Measurement(m, np.arange(len(table)), table + rng.normal(0, np.sqrt(variance), len(table)),
                                   variance))
    return history


def _loss(history: list[Measurement], tables: dict[int, np.ndarray]) -> float:
    return sum(0.5 * float(np.sum((tables[h.marginal][h.cells] - h.values) ** 2)) / h.variance for h in history)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mirror_descent_reaches_the_maximum_likelihood_marginals_on_a_small_universe(seed: int):
    """The loss depends on the distribution only through its measured marginals and is strictly convex in them, so
    the maximum-likelihood marginals are unique: SLSQP over the 12 records' simplex (tolerance 1e-14) finds them,
    and 3,000 mirror-descent steps without early stopping must reach them within 2e-4 per cell (the noise's standard
    deviation is 1e-2 to 6e-2) and the loss within 2e-4 of it relative (a record whose
    weight the optimum puts at 0 is approached only geometrically)."""
    workload = marginal_queries(DOMAIN, [(0,), (1,), (2,), (0, 1), (1, 2)])
    index = MarginalIndex(workload)
    rng = make_rng(seed)
    truth = rng.dirichlet(np.ones(12))
    history = _history(index, truth, rng)

    def tables_of(p: np.ndarray) -> dict[int, np.ndarray]:
        holder = UniverseDistribution(DOMAIN, index)
        return {m: holder.table(m, p.reshape(holder.p.shape)) for m in range(index.n_marginals)}

    reference = minimize(lambda p: _loss(history, tables_of(p)), np.full(12, 1 / 12), method="SLSQP",
                         bounds=[(0, 1)] * 12, constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
                         options={"ftol": 1e-14, "maxiter": 2_000})
    assert reference.success, reference.message

    distribution = UniverseDistribution(DOMAIN, index)
    config = MWEMConfig(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian",
                        final_sweeps=3_000, final_estimator="mirror")  # no early stop: final_min_sweeps = the cap
    _mirror_descent(history, distribution, config)
    fitted, best = tables_of(distribution.p.ravel()), tables_of(reference.x)
    for m in range(index.n_marginals):
        assert np.abs(fitted[m] - best[m]).max() < 2e-4, (seed, m)
    assert _loss(history, fitted) <= _loss(history, best) * (1 + 2e-4)


def test_mirror_descent_stops_within_the_noise_as_the_sweeps_do():
    """With the sweeps' stopping rule (at least 2 steps, at most 500, a 0.1 % tolerance) the steps stop, within the
    noise or converged, well before the cap; with the minimum at the cap they run to it."""
    workload = marginal_queries(DOMAIN, [(0,), (1,), (2,), (0, 1), (1, 2)])
    index = MarginalIndex(workload)
    rng = make_rng(7)
    history = _history(index, rng.dirichlet(np.ones(12)), rng)
    config = MWEMConfig(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian",
                        final_sweeps=500, final_min_sweeps=2, final_tolerance=1e-3, final_estimator="mirror")
    steps = _mirror_descent(history, UniverseDistribution(DOMAIN, index), config)
    assert 2 <= steps < 100
    config = dataclasses.replace(config, final_min_sweeps=500)
    assert _mirror_descent(history, UniverseDistribution(DOMAIN, index), config) == 500


def test_final_estimator_is_checked():
    with pytest.raises(ConfigError, match="final_estimator"):
        MWEMConfig(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian", final_estimator="pgm")


def _planted(n: int) -> Dataset:
    """The table fit's test table (tests/engine/test_table_fit.py) and a sixth column f that depends on e."""
    rng = make_rng(5)
    columns = dependent_columns(n, rng)
    f = np.where(columns[4] == 1, rng.integers(0, 2, size=n), rng.integers(0, 6, size=n))
    return Dataset.from_codes(Domain.categorical({**DEPENDENT_SIZES, "f": 6}), np.stack([*columns, f], axis=1))


def _mean_tvds(data: Dataset, records: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """Mean one-way and mean two-way TVD of the weighted records against the data."""
    truth = data.codes[np.repeat(np.arange(len(data.counts)), data.counts)]
    sizes = [int(s) for s in data.domain.sizes]

    def tvd(columns: tuple[int, ...]) -> float:
        shape = tuple(sizes[j] for j in columns)
        true, fitted = np.zeros(shape), np.zeros(shape)
        np.add.at(true, tuple(truth[:, j] for j in columns), 1.0 / len(truth))
        np.add.at(fitted, tuple(records[:, j] for j in columns), weights)
        return 0.5 * float(np.abs(true - fitted).sum())

    one = [tvd((j,)) for j in range(len(sizes))]
    two = [tvd(pair) for pair in itertools.combinations(range(len(sizes)), 2)]
    return float(np.mean(one)), float(np.mean(two))


def test_mirror_descent_fits_a_planted_table_closer_than_the_sweeps():
    """MWEM on particles as the registry configures it (10,000 particles; the prior's one-way marginals, whose noise
    differs from the rounds', replayed with them), ε = 1 on 6,000 rows of a planted table, the workload all one-way
    and two-way marginals, seeds 0-5, only the final estimator switched. Measured when written: mean two-way TVD
    0.0219 (mirror) against 0.0239 (sweeps) averaged over the seeds, mean one-way 0.0067 against 0.0077; mirror
    better or level on every seed. Asserted: lower on both averages, and never worse than the sweeps on a seed by
    more than 0.002 (under half the range of the sweeps' mean two-way TVD over the seeds, 0.0047)."""
    from dq_engine.mechanisms.defaults import mwem_particles_config
    from dq_engine.privacy.public import PublicQuantities

    data = _planted(6_000)
    columns = len(data.domain)
    workload = marginal_queries(data.domain, [(j,) for j in range(columns)]
                                + list(itertools.combinations(range(columns), 2)))
    public = PublicQuantities(n=data.n, epsilon=1.0, delta=1e-9, domain=data.domain, n_queries=len(workload),
                              n_marginals=workload.n_marginals)
    base = mwem_particles_config(public, support_size=10_000)
    figures = {}
    for estimator in ("sweeps", "mirror"):
        config = dataclasses.replace(base, final_estimator=estimator)
        figures[estimator] = np.array([
            _mean_tvds(data, result.records, result.weights)
            for result in (mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(seed))
                           for seed in range(6))
        ])
    assert (figures["mirror"].mean(axis=0) < figures["sweeps"].mean(axis=0)).all(), figures
    assert (figures["mirror"] <= figures["sweeps"] + 0.002).all(), figures
