"""The table fit: DualQuery's records calibrated against charged noisy marginals (dq_engine/fit/table_fit.py).

The test table has strongly dependent columns (b copies a, c follows a) and skewed single columns, so raw
DualQuery's few best responses are visibly wrong on single columns and have few distinct rows, while the fitted
table must get both right. Tolerances are stated per assertion; every run is seeded.
"""

from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import numpy as np
import pytest

from dq_engine import Dataset, Domain, DualQueryConfig, dualquery, make_rng, marginal_queries, random_queries
from dq_engine.errors import ConfigError
from dq_engine.fit.mwem import MWEMConfig, mwem
from dq_engine.fit.table_fit import fit_events, fit_table, fit_workload
from dq_engine.mechanisms.defaults import mwem_particles_config
from dq_engine.privacy.accounting import combined_costs, compose, rounded_up
from dq_engine.privacy.public import PublicQuantities
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism
from tests.budgets import grant_for_tests, study_grant

N = 6_000


DEPENDENT_SIZES = {"a": 4, "b": 4, "c": 3, "d": 5, "e": 2}


def dependent_columns(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The columns of :data:`DEPENDENT_SIZES`: b copies a 90 % of the time, c is a function of a, d and e skewed."""
    a = rng.choice(4, size=n, p=[0.55, 0.25, 0.15, 0.05])
    b = np.where(rng.random(n) < 0.9, a, rng.integers(0, 4, size=n))
    c = np.minimum(a, 2)
    d = rng.choice(5, size=n, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    e = (rng.random(n) < 0.2).astype(np.int64)
    return [a, b, c, d, e]


@pytest.fixture(scope="module")
def dependent_table() -> Dataset:
    columns = dependent_columns(N, make_rng(5))
    return Dataset.from_codes(Domain.categorical(DEPENDENT_SIZES), np.stack(columns, axis=1))


def _workload(domain: Domain):
    m = len(domain)
    return marginal_queries(domain, [(j,) for j in range(m)] + list(itertools.combinations(range(m), 2)))


def _worst_one_way_cell(data: Dataset, rows: np.ndarray) -> float:
    truth = data.codes[np.repeat(np.arange(len(data.counts)), data.counts)]
    worst = 0.0
    for j, size in enumerate(data.domain.sizes):
        true = np.bincount(truth[:, j], minlength=size) / len(truth)
        published = np.bincount(rows[:, j], minlength=size) / len(rows)
        worst = max(worst, float(np.abs(true - published).max()))
    return worst


def test_default_dualquery_release_has_many_distinct_rows_and_right_single_columns(dependent_table: Dataset, tmp_path):
    # the registry's default DualQuery (table fit on) against the raw records (fit off), same epsilon and seed
    data = dependent_table
    workload = _workload(data.domain)
    public = PublicQuantities(
        n=data.n, epsilon=1.0, delta=1e-9, domain=data.domain, n_queries=len(workload),
        n_marginals=workload.n_marginals,
    )
    inputs = PlanInputs(public=public, mode="tight", deterministic=True)
    small_fit = {"particles": 20_000, "rounds": 8}
    fitted_keys = MECHANISMS["dualquery"].keys(samples=50, fit=small_fit)
    raw_keys = MECHANISMS["dualquery"].keys(samples=50, fit={"enabled": False})

    fitted_plan = plan_mechanism(fitted_keys, inputs)
    raw_plan = plan_mechanism(raw_keys, inputs)
    assert fitted_plan.charged.epsilon <= 1.0 and raw_plan.charged.epsilon <= 1.0
    inputs = RunInputs(data=data, workload=workload, rng=make_rng(1))
    fitted = run_mechanism(study_grant(fitted_plan, tmp_path / "fitted"), inputs)
    raw = run_mechanism(study_grant(raw_plan, tmp_path / "raw"), dataclasses.replace(inputs, rng=make_rng(1)))
    fitted_rows = fitted.sample_rows(data.n, make_rng(2))
    raw_rows = raw.sample_rows(data.n, make_rng(2))

    # raw: one record per round; fitted: rows sampled from 20,000 weighted particles
    assert len(np.unique(raw_rows, axis=0)) <= raw_plan.parameters["rounds"]
    assert len(np.unique(fitted_rows, axis=0)) >= 100  # the domain has 480 records; the data uses about 200
    # single columns: Gaussian one-way noise at rho ~ 0.0021 is ~0.3% per cell here; 0.03 leaves room for the fit
    assert _worst_one_way_cell(data, fitted_rows) <= 0.03
    assert _worst_one_way_cell(data, raw_rows) > 0.03  # so the assertion above can fail without the fit


def test_fitted_plan_charges_mechanism_and_fit_events_composed_within_the_target(dependent_table: Dataset):
    data = dependent_table
    workload = _workload(data.domain)
    for mode in ("tight", "paper"):
        for epsilon in (0.3, 1.0, 3.0):
            public = PublicQuantities(
                n=data.n, epsilon=epsilon, delta=1e-9, domain=data.domain, n_queries=len(workload),
                n_marginals=workload.n_marginals,
            )
            plan = plan_mechanism(MECHANISMS["dqrs"].keys(samples=50), PlanInputs(
                public=public, mode=mode, deterministic=True))
            assert plan.fit is not None
            recomputed = combined_costs(list(plan.events), 1e-9)[mode]
            assert recomputed.epsilon == plan.charged.epsilon <= epsilon
            # as the ledger charges it (rounded up one float step) it still fits a cap equal to the target
            assert rounded_up(plan.charged.epsilon) <= Fraction(epsilon)
            # the fit's own events are part of the charge
            fit_only = compose(fit_events(plan.fit), mode="tight", delta=1e-9)
            assert 0 < fit_only.rho < recomputed.rho


def test_fit_workload_is_the_release_workload_when_it_is_small_and_complete(dependent_table: Dataset):
    domain = dependent_table.domain
    complete = _workload(domain)
    assert fit_workload(complete) is complete
    conjunctions = random_queries(domain, 3, 50, make_rng(0))  # single cells, not whole marginals
    fallback = fit_workload(conjunctions)
    m = len(domain)
    assert fallback.n_marginals == m + m * (m - 1) // 2
    assert set(np.unique((fallback.marginals >= 0).sum(axis=1)).tolist()) == {1, 2}


def test_particles_are_seeded_with_the_mechanism_records(dependent_table: Dataset):
    # every particle drawn from one seed record, no moves, a negligible learning rate: the output is that record
    data = dependent_table
    workload = _workload(data.domain)
    seed = np.array([[3, 0, 2, 4, 1]])
    config = MWEMConfig(
        rounds=1, select_epsilon=0.01, measure_rho=0.001, measure_noise="gaussian", measure="marginal",
        learning_rate=1e-12, support="sampled", support_size=500, support_budget=0.001, seed_fraction=1.0,
        replay_prior=False, track_error=False,
    )
    result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(3), seeds=seed)
    assert np.array_equal(np.unique(result.records, axis=0), seed)


def test_fit_table_keeps_the_mechanism_events_first_and_numbers_fit_rounds_after(dependent_table: Dataset):
    data = dependent_table
    workload = _workload(data.domain)
    raw = dualquery(data, workload, DualQueryConfig(eta=1.0, samples=30, rounds=4, delta=1e-9),
                    grant=grant_for_tests(), rng=make_rng(4))
    public = PublicQuantities(
        n=data.n, epsilon=0.5, delta=1e-9, domain=data.domain, n_queries=len(workload),
        n_marginals=workload.n_marginals,
    )
    config = mwem_particles_config(public, rounds=3, support_size=5_000, seed_fraction=0.5, track_error=False)
    seen = []
    fitted = fit_table(data, workload, raw, config, grant=grant_for_tests(), rng=make_rng(5),
                       progress=lambda d: seen.append(d.round))
    assert fitted.events[: len(raw.events)] == raw.events
    assert len(fitted.events) == len(raw.events) + len(fit_events(config))
    assert seen == [5, 6, 7]
    assert [d.round for d in fitted.diagnostics] == [1, 2, 3, 4, 5, 6, 7]
    assert fitted.weights is not None and abs(float(fitted.weights.sum()) - 1.0) < 1e-9


def test_fit_table_refuses_a_universe_config(dependent_table: Dataset):
    data = dependent_table
    workload = _workload(data.domain)
    raw = dualquery(data, workload, DualQueryConfig(eta=1.0, samples=10, rounds=2, delta=1e-9),
                    grant=grant_for_tests(), rng=make_rng(6))
    universe = MWEMConfig(rounds=2, select_epsilon=0.1, measure_epsilon=0.1)
    with pytest.raises(ConfigError, match="support must be 'sampled'"):
        fit_table(data, workload, raw, universe, grant=grant_for_tests(), rng=make_rng(7))


@pytest.mark.parametrize(
    ("vector", "expected"),
    [
        ([0.5, 0.5], [0.5, 0.5]),  # already on the simplex
        ([1.2, -0.1, -0.1], [1.0, 0.0, 0.0]),  # by hand: theta = 0.2
        ([0.6, 0.3, 0.2], [0.6 - 0.1 / 3, 0.3 - 0.1 / 3, 0.2 - 0.1 / 3]),  # theta = 0.1 / 3, nothing cut
        ([0.3, -0.2, 0.3, 0.4], [0.3, 0.0, 0.3, 0.4]),  # theta = 0: the positive part sums to 1 already
    ],
)
def test_simplex_projection_by_hand(vector, expected):
    from dq_engine.fit.prior import simplex_projection

    assert simplex_projection(np.array(vector)) == pytest.approx(expected, abs=1e-12)


def test_the_priors_one_way_estimate_keeps_a_dominant_values_share():
    """A 100-value column with 95 % of the rows on one value (capital-loss on Adult), noisy counts (seeded, ε = 1):
    clipping at 0 and renormalising would move the positive noise of the 99 nearly empty cells onto them (about
    50 cells x 29 rows here, so a share near 0.89), taking it from the dominant value; the simplex projection with
    the pooled estimate of n does not. Tolerance: 0.005 on the dominant share, over three seeds."""
    from dq_engine.fit.prior import sample_support

    rng = np.random.default_rng(3)
    n, size = 20_000, 100
    column = np.where(rng.random(n) < 0.95, 0, rng.integers(1, size, n))
    others = [rng.integers(0, k, n) for k in (2, 3, 4)]
    domain = Domain.categorical({"capital_loss": size, "b": 2, "c": 3, "d": 4})
    data = Dataset.from_codes(domain, np.stack([column, *others], axis=1))
    workload = marginal_queries(domain, [(0,), (1,), (2,), (3,)])
    public = PublicQuantities(
        n=n, epsilon=1.0, delta=1e-9, domain=domain, n_queries=len(workload), n_marginals=workload.n_marginals
    )
    config = mwem_particles_config(public, mode="tight", support_size=1_000)
    assert config.support_budget > 0
    for seed in range(3):
        _, _, estimates = sample_support(data, config, make_rng(seed))
        assert abs(estimates[0][0] - float(np.mean(column == 0))) < 0.005
        assert estimates[0].sum() == pytest.approx(1.0, abs=1e-12)


def test_a_column_no_workload_marginal_uses_is_published_from_its_noisy_one_way_marginal():
    """The workload asks only about (a, b); column d (40 % on one value, 5 values) is published too. Before
    2026-11-29 the prior measured only the workload's columns, so d came out uniform (its top share 0.2, 0.2 off);
    now every column's one-way marginal is measured and d's shares are within 0.02 of the data's (seeded, ε = 1,
    6,000 rows: the noise on a share is about 0.002)."""
    data = Dataset.from_codes(Domain.categorical(DEPENDENT_SIZES), np.stack(dependent_columns(N, make_rng(4)), axis=1))
    workload = marginal_queries(data.domain, [("a", "b")])
    public = PublicQuantities(
        n=N, epsilon=1.0, delta=1e-9, domain=data.domain, n_queries=len(workload), n_marginals=workload.n_marginals
    )
    config = mwem_particles_config(public, mode="tight", support_size=20_000)
    result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(5))
    rows = result.sample_rows(N, make_rng(6))
    codes = np.repeat(data.codes, data.counts, axis=0)
    for column in (2, 3, 4):  # c, d and e: in no workload marginal
        truth = np.bincount(codes[:, column], minlength=data.domain.sizes[column]) / N
        published = np.bincount(rows[:, column], minlength=data.domain.sizes[column]) / N
        assert np.abs(published - truth).max() < 0.02


def test_seed_records_do_not_set_a_column_the_workload_never_asks_about():
    """The table fit's particles start half from seed records; here every seed record has d = 4 and e = 1, values
    the data holds on 5 % and 20 % of its rows. The workload asks only about (a, b), so no round measures d or e;
    the prior's one-way measurement of every column is replayed on them, and the fitted shares come within 0.02 of
    the data's (seeded, ε = 1, 6,000 rows). Before 2026-11-29 the seeds' values stayed: d = 4 on about half the
    published rows."""
    data = Dataset.from_codes(Domain.categorical(DEPENDENT_SIZES), np.stack(dependent_columns(N, make_rng(4)), axis=1))
    workload = marginal_queries(data.domain, [("a", "b")])
    public = PublicQuantities(
        n=N, epsilon=1.0, delta=1e-9, domain=data.domain, n_queries=len(workload), n_marginals=workload.n_marginals
    )
    config = mwem_particles_config(public, mode="tight", support_size=20_000, seed_fraction=0.5)
    seeds = np.repeat(np.array([[0, 0, 0, 4, 1]]), 50, axis=0)
    result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(5), seeds=seeds)
    rows = result.sample_rows(N, make_rng(6))
    codes = np.repeat(data.codes, data.counts, axis=0)
    for column in (3, 4):
        truth = np.bincount(codes[:, column], minlength=data.domain.sizes[column]) / N
        published = np.bincount(rows[:, column], minlength=data.domain.sizes[column]) / N
        assert np.abs(published - truth).max() < 0.02


@pytest.mark.slow
def test_the_fits_final_sweeps_converge_on_a_wide_skewed_table():
    """24 columns of 6 values, 60 % of the rows one repeated record (KDD99's shape in small), chained columns;
    workload all 1-way and 2-way marginals (300), ε = 10 so the noise is small. After the 40 rounds the cyclic MW
    updates have not converged: with 10 final sweeps over the history the worst one-way cell of the fit was
    0.011-0.012 on these seeds, with the default's 100 it is 0.0026-0.0039. Tolerance 0.006 on each of 2 seeds."""
    from dq_engine.mechanisms.defaults import MWEM_PARTICLES_FINAL_SWEEPS

    k, size, n = 24, 6, 20_000
    rng = np.random.default_rng(7)
    base = rng.integers(0, size, k)
    codes = np.empty((n, k), dtype=np.int64)
    codes[:, 0] = rng.integers(0, size, n)
    for j in range(1, k):
        codes[:, j] = np.where(rng.random(n) < 0.7, codes[:, j - 1], rng.integers(0, size, n))
    codes[rng.random(n) < 0.6] = base
    domain = Domain.categorical({f"c{j}": size for j in range(k)})
    data = Dataset.from_codes(domain, codes)
    workload = _workload(domain)
    public = PublicQuantities(
        n=n, epsilon=10.0, delta=1e-9, domain=domain, n_queries=len(workload), n_marginals=workload.n_marginals
    )
    config = mwem_particles_config(public, support_size=20_000)
    assert config.final_sweeps == MWEM_PARTICLES_FINAL_SWEEPS
    for seed in range(2):
        result = mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(seed))
        weights = result.weights / result.weights.sum()
        for j in range(k):
            fitted = np.bincount(result.records[:, j], weights=weights, minlength=size)
            assert np.abs(fitted - np.bincount(codes[:, j], minlength=size) / n).max() < 0.006, (seed, j)


def test_final_sweeps_stop_at_the_first_sweep_within_the_noise_and_not_before_the_minimum():
    """A fake history of 2 measurements (3 values each, noise variance 1/64) whose residuals halve at every sweep,
    starting at 1: a sweep's discrepancy is the mean of residual² / variance, 64, 16, 4, 1, ... so the 4th sweep
    is the first within the noise. With a minimum of 6 the sweeps go on to 6; without early stopping, to the cap."""
    from dq_engine.fit.mwem import _final_sweeps
    from dq_engine.fit.prior import Measurement

    def history():
        return [Measurement(m, np.arange(3), np.zeros(3), 1 / 64) for m in range(2)]

    def fake(past_count: int):
        calls = []

        def apply(past):
            calls.append(past.marginal)
            return np.full(3, 1.0 / 2 ** ((len(calls) - 1) // past_count))

        return apply, calls

    base = dict(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian", final_sweeps=20)
    for minimum, expected in [(0, 4), (1, 4), (6, 6), (None, 20)]:
        apply, calls = fake(2)
        assert _final_sweeps(history(), apply, MWEMConfig(**base, final_min_sweeps=minimum)) == expected
        assert len(calls) == 2 * expected
    with pytest.raises(ConfigError, match="final_min_sweeps"):
        MWEMConfig(**base, final_min_sweeps=21)


def test_final_sweeps_stop_once_a_sweep_gains_less_than_the_tolerance():
    """Discrepancies that stay above 1: a plateau (1.001 at every sweep, as on ADULT-64's millions of nearly
    empty noisy cells) stops at the minimum under a 0.1 % tolerance, but runs to the cap without one; a steady
    5 % gain a sweep (as on KDD99) is not converged and runs to the cap; a gain that falls under 0.1 % at the
    8th sweep stops there."""
    from dq_engine.fit.mwem import _final_sweeps
    from dq_engine.fit.prior import Measurement

    def run(discrepancies, tolerance, minimum=3):
        history = [Measurement(0, np.arange(1), np.zeros(1), 1.0)]
        sweeps = iter(discrepancies)
        config = MWEMConfig(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian",
                            final_sweeps=len(discrepancies), final_min_sweeps=minimum, final_tolerance=tolerance)
        return _final_sweeps(history, lambda past: np.array([np.sqrt(next(sweeps))]), config)

    assert run([1.001] * 20, 1e-3) == 3
    assert run([1.001] * 20, 0.0) == 20
    assert run([2.0 * 0.95**k for k in range(12)], 1e-3) == 12
    slowing = [2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3995, 1.399, 1.3985]
    assert run(slowing, 1e-3) == 8
    with pytest.raises(ConfigError, match="final_tolerance"):
        MWEMConfig(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian", final_tolerance=1.0)


def test_final_sweeps_go_on_while_a_small_measurement_is_still_far_from_its_noise():
    """A wide measurement (1,000 cells, on a plateau 1.001 above its noise, as a measured 3-way marginal of near-empty
    cells) and a one-way one (4 cells, discrepancy 9 at the first sweep, falling 10 % a sweep). The cells' mean is
    ruled by the wide one: it gains less than 0.1 % from the 15th sweep on, where the cells' mean alone stopped the
    sweeps with the one-way measurement still 2.1 times its noise. The measurements' mean, (1.001 + 9 x 0.9^k) / 2
    at sweep k + 1, falls by more than 0.1 % a sweep until it is within the noise: 9 x 0.9^21 = 0.985, so at the
    22nd sweep it is 0.993, and the sweeps stop there."""
    from dq_engine.fit.mwem import _final_sweeps
    from dq_engine.fit.prior import Measurement

    wide = Measurement(0, np.arange(1_000), np.zeros(1_000), 1.0)
    narrow = Measurement(1, np.arange(4), np.zeros(4), 1.0)
    counts = {0: 0, 1: 0}

    def apply(past):
        k = counts[past.marginal]
        counts[past.marginal] += 1
        if past.marginal == 0:
            return np.full(1_000, np.sqrt(1.001))
        return np.full(4, np.sqrt(9.0 * 0.9**k))

    config = MWEMConfig(rounds=1, select_epsilon=1.0, measure_rho=1.0, measure_noise="gaussian", final_sweeps=100,
                        final_min_sweeps=3, final_tolerance=1e-3)
    sweeps = _final_sweeps([wide, narrow], apply, config)
    assert sweeps == 22 and counts[1] == 22
    # without the one-way measurement (the cells' mean alone) the plateau stops at the minimum
    counts.update({0: 0, 1: 0})
    assert _final_sweeps([wide], apply, config) == 3


def test_the_default_fit_stops_its_final_sweeps_at_the_minimum_when_the_noise_is_large(dependent_table: Dataset):
    """ε = 0.05 on 6,000 rows: every measured cell has noise of several percent, which the fit reaches within the
    first sweeps, so the default's sweeps stop at their minimum (10); at ε = 100 the noise is tiny and they go on."""
    from dq_engine.mechanisms.defaults import MWEM_PARTICLES_FINAL_MIN_SWEEPS

    workload = _workload(dependent_table.domain)
    runs = {}
    for epsilon in (0.05, 100.0):
        public = PublicQuantities(
            n=N, epsilon=epsilon, delta=1e-9, domain=dependent_table.domain, n_queries=len(workload),
            n_marginals=workload.n_marginals,
        )
        config = mwem_particles_config(public, support_size=5_000)
        runs[epsilon] = mwem(dependent_table, workload, config, grant=grant_for_tests(),
                             rng=make_rng(1)).parameters["final_sweeps_run"]
    assert runs[0.05] == MWEM_PARTICLES_FINAL_MIN_SWEEPS
    assert runs[100.0] > MWEM_PARTICLES_FINAL_MIN_SWEEPS
