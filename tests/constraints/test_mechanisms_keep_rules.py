"""Every engine mechanism that takes constraints publishes no record breaking them (seeded, small table).

Each test first runs the mechanism without the rules on the same seeded table and asserts that it does publish
breaking records (so the test can fail), then with the rules and asserts that none is published.
"""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import all_kway_marginals, make_rng
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.errors import InfeasibleConstraintsError
from dq_engine.fit.mwem import MWEMConfig, mwem
from dq_engine.fit.particles import ParticleDistribution
from dq_engine.fit.prior import sample_support
from dq_engine.fit.universe import UniverseDistribution
from dq_engine.mechanisms.dqrs import DQRSConfig, dqrs
from dq_engine.mechanisms.dualquery import DualQueryConfig, dualquery
from dq_engine.mechanisms.fem import FEMConfig, fem
from dq_engine.mechanisms.sepfem import SepFEMConfig, sepfem
from dq_engine.oracle import OracleConfig
from dq_engine.oracle.feasible import with_witness
from tests.budgets import grant_for_tests

ORACLE = OracleConfig(kind="portfolio", deterministic=True, num_workers=1, deterministic_time_limit=0.2)
FTPL = OracleConfig(kind="cpsat", deterministic=True, num_workers=1, deterministic_time_limit=0.2)

RUNS = {
    "dualquery": lambda data, workload, rng, constraints: dualquery(
        data, workload, DualQueryConfig(eta=0.5, samples=40, rounds=25, rows_per_round=4, oracle=ORACLE),
        grant=grant_for_tests(), rng=rng, constraints=constraints),
    "dualquery-dp-marginal-slack": lambda data, workload, rng, constraints: dualquery(
        data, workload, DualQueryConfig(eta=0.5, samples=40, rounds=25, rows_per_round=4, oracle=ORACLE,
                                        free_policy="dp-marginal", free_noise="gaussian", free_rho=0.5,
                                        free_scope="slack"),
        grant=grant_for_tests(), rng=rng, constraints=constraints),
    "dqrs": lambda data, workload, rng, constraints: dqrs(
        data, workload, DQRSConfig(eta=0.5, samples=40, rounds=25, rows_per_round=2, oracle=ORACLE),
        grant=grant_for_tests(), rng=rng, constraints=constraints),
    "fem": lambda data, workload, rng, constraints: fem(
        data, workload, FEMConfig(epsilon_0=0.05, noise_scale=1.0, samples=5, rounds=8, oracle=FTPL),
        grant=grant_for_tests(), rng=rng, constraints=constraints),
    "sepfem": lambda data, workload, rng, constraints: sepfem(
        data, workload, SepFEMConfig(epsilon_0=0.05, noise_scale=0.5, samples=5, rounds=8, oracle=FTPL),
        grant=grant_for_tests(), rng=rng, constraints=constraints),
    "mwem": lambda data, workload, rng, constraints: mwem(
        data, workload, MWEMConfig(rounds=10, select_epsilon=0.1, measure_epsilon=0.1), grant=grant_for_tests(),
        rng=rng, constraints=constraints),
    "mwem-particles": lambda data, workload, rng, constraints: mwem(
        data, workload, MWEMConfig(rounds=10, select_epsilon=0.1, measure_rho=0.01, measure_noise="gaussian",
                                   support="sampled", support_size=4000, support_budget=0.01, support_moves=2,
                                   measure="marginal"),
        grant=grant_for_tests(), rng=rng, constraints=constraints),
}


def _published(result) -> np.ndarray:
    """The records a release could publish: every record with positive weight."""
    if result.weights is None:
        return result.records
    return result.records[np.asarray(result.weights) > 0]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_mechanism_publishes_no_record_breaking_a_rule(name, census_data, census_rules):
    workload = all_kway_marginals(census_data.domain, 2)
    run = RUNS[name]
    unconstrained = _published(run(census_data, workload, make_rng(1), None))
    assert not census_rules.feasible(unconstrained).all(), "the unconstrained run must break a rule for this test"
    constrained = _published(run(census_data, workload, make_rng(1), census_rules))
    assert len(constrained) > 0
    assert census_rules.feasible(constrained).all()


def test_mwem_universe_gives_infeasible_records_zero_weight(census_data, census_rules):
    workload = all_kway_marginals(census_data.domain, 2)
    index = MarginalIndex(workload)
    distribution = UniverseDistribution(census_data.domain, index, census_rules)
    forbidden = census_rules.forbidden_mask()
    assert forbidden.any()
    assert np.all(distribution.p[forbidden] == 0)
    assert np.allclose(distribution.p[~forbidden], 1.0 / (~forbidden).sum())  # uniform over the feasible records
    for m in range(index.n_marginals):  # updates keep the zeros and renormalise over the feasible records
        cells = np.arange(int(index.n_cells[m]))
        distribution.apply(m, cells, np.full(len(cells), 1.0 / len(cells)), 0.5)
    assert np.all(distribution.p[forbidden] == 0)
    assert distribution.p.sum() == pytest.approx(1.0)
    result = mwem(census_data, workload, MWEMConfig(rounds=5, select_epsilon=0.5, measure_epsilon=0.5),
                  grant=grant_for_tests(), rng=make_rng(2), constraints=census_rules)
    assert census_rules.feasible(result.records).all() and np.sum(result.weights) == pytest.approx(1.0)


@pytest.mark.parametrize("output", ["final", "average"])
def test_mwem_universe_as_a_list_of_feasible_records_is_the_same_mechanism(census_data, census_rules, monkeypatch,
                                                                           output):
    """The list of feasible records (used when rules forbid most records) gives the dense tensor's result."""
    import sys

    universe_module = sys.modules["dq_engine.fit.universe"]  # where MWEM's universe distribution is chosen
    workload = all_kway_marginals(census_data.domain, 2)
    config = MWEMConfig(rounds=6, select_epsilon=0.5, measure_epsilon=0.5, output=output)
    results = {}
    for form, share in (("dense", 0.0), ("list", 1.0)):
        monkeypatch.setattr(universe_module, "SPARSE_FEASIBLE_SHARE", share)
        results[form] = mwem(census_data, workload, config, grant=grant_for_tests(), rng=make_rng(9),
                             constraints=census_rules)
    dense, listed = results["dense"], results["list"]
    assert census_rules.feasible(listed.records).all()
    # same selections and measurements; the weights agree to float rounding (the tensor also drops records
    # below 1e-6 of the mass: none here)
    order = lambda r: np.lexsort(np.asarray(r.records).T[::-1])  # noqa: E731
    np.testing.assert_array_equal(np.asarray(dense.records)[order(dense)], np.asarray(listed.records)[order(listed)])
    np.testing.assert_allclose(np.asarray(dense.weights)[order(dense)], np.asarray(listed.weights)[order(listed)],
                               rtol=1e-9, atol=1e-12)


def _feasible_start(data, rules, rng: np.random.Generator, size: int):
    """Pairwise marginal index, uniform priors and ``size`` uniform records repaired to keep ``rules``."""
    index = MarginalIndex(all_kway_marginals(data.domain, 2))
    priors = [np.full(int(s), 1.0 / s) for s in data.domain.sizes]
    constraints = with_witness(rules)
    start = np.stack([rng.integers(0, s, size) for s in data.domain.sizes], axis=1)
    return index, priors, rules.repair(start, constraints.witness_codes, rules.attributes)


def test_particles_stay_feasible_under_metropolis_hastings_moves(census_data, census_rules):
    rng = make_rng(6)
    index, priors, start = _feasible_start(census_data, census_rules, rng, 3000)
    particles = ParticleDistribution(start.copy(), priors, index, rng, constraints=census_rules)
    for m in range(index.n_marginals):  # measurements that pull towards children who are married
        cells = np.arange(int(index.n_cells[m]))
        particles.apply(m, cells, rng.random(len(cells)), 2.0)
    particles.refresh(3)
    assert census_rules.feasible(particles.codes).all()
    assert (particles.codes != start).any()  # the moves did move particles
    free = ParticleDistribution(start.copy(), priors, index, make_rng(6))
    for m in range(index.n_marginals):
        cells = np.arange(int(index.n_cells[m]))
        free.apply(m, cells, make_rng(m).random(len(cells)), 2.0)
    free.refresh(3)
    assert not census_rules.feasible(free.codes).all()  # without the rules the same moves break them


@pytest.mark.parametrize("rules", [False, True])
def test_particle_marginals_follow_the_moved_particles(census_data, census_rules, rules):
    """After MH moves every marginal (measured or not, cached before the moves) is that of the current particles."""
    rng = make_rng(8)
    index, priors, start = _feasible_start(census_data, census_rules, rng, 2000)
    particles = ParticleDistribution(start, priors, index, rng, constraints=census_rules if rules else None)
    for round_ in range(3):
        for m in range(index.n_marginals):  # every marginal's cells cached, as MWEM's selection does
            particles.table(m)
        measured = round_ % index.n_marginals  # one marginal more is measured each round
        cells = np.arange(int(index.n_cells[measured]))
        particles.apply(measured, cells, rng.random(len(cells)) / len(cells), 1.0)
        particles.refresh(2)
        for m in range(index.n_marginals):
            expected = np.bincount(index.cells(m, particles.codes), weights=particles.p,
                                   minlength=int(index.n_cells[m]))
            np.testing.assert_allclose(particles.table(m), expected, rtol=0, atol=1e-12)


def test_particles_must_start_feasible(census_data, census_rules):
    index = MarginalIndex(all_kway_marginals(census_data.domain, 1))
    priors = [np.full(int(s), 1.0 / s) for s in census_data.domain.sizes]
    with pytest.raises(InfeasibleConstraintsError, match="every particle must keep the constraints"):
        ParticleDistribution(np.array([[0, 1, 0, 0, 0]]), priors, index, make_rng(0), constraints=census_rules)


def test_particle_prior_is_the_prior_conditioned_on_feasibility(census_data, census_rules):
    """Uniform prior: the rule component's values are uniform over its feasible joint values (exact draw)."""
    config = MWEMConfig(rounds=1, select_epsilon=0.1, measure_epsilon=0.1, support="sampled", support_size=60_000)
    particles = sample_support(census_data, config, make_rng(9), constraints=with_witness(census_rules))[0]
    assert census_rules.feasible(particles).all()
    component = census_rules.components[0]
    assert component.tolist() == [0, 1, 2, 3]
    values, feasible = census_rules.component_records(0)
    allowed = values[feasible]
    index = {tuple(v): i for i, v in enumerate(allowed.tolist())}
    counts = np.bincount([index[tuple(v)] for v in particles[:, component].tolist()], minlength=len(allowed))
    expected = len(particles) / len(allowed)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    # 55 feasible values (54 degrees of freedom): the 99.9 % quantile of chi-square(54) is 94.5
    assert len(allowed) == 55 and chi2 < 94.5
    assert len(np.unique(particles[:, 4])) == 3  # the free attribute is untouched by the conditioning
