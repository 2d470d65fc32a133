"""Resample-then-move of the particles before rows are published (``ParticleDistribution.rejuvenate``)."""

from __future__ import annotations

import itertools

import numpy as np

from dq_engine import Dataset, Domain, all_kway_marginals, make_rng
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.fit.mwem import MWEMConfig, mwem
from dq_engine.fit.particles import ParticleDistribution
from tests.budgets import grant_for_tests

SIZES = (3, 4, 2)


def _pulled(particles: int, seed: int) -> tuple[ParticleDistribution, MarginalIndex, list[np.ndarray]]:
    """Uniform particles pulled hard towards a few cells of the first pair marginal (weights then sit on few)."""
    domain = Domain.categorical({f"a{i}": s for i, s in enumerate(SIZES)})
    index = MarginalIndex(all_kway_marginals(domain, 2))
    priors = [np.full(s, 1.0 / s) for s in SIZES]
    rng = make_rng(seed)
    codes = np.stack([rng.integers(0, s, particles) for s in SIZES], axis=1)
    distribution = ParticleDistribution(codes, priors, index, rng)
    cells = np.arange(int(index.n_cells[0]))
    target = np.zeros(len(cells))
    target[[0, 5]] = 0.5  # two cells of (a0, a1) hold all the mass
    for _ in range(4):
        distribution.apply(0, cells, target, 3.0)
    return distribution, index, priors


def _exact_pair_table(distribution: ParticleDistribution, index: MarginalIndex, priors: list[np.ndarray]) -> np.ndarray:
    """Marginal 0 of ``A ∝ P0 exp(Σ θ)`` over the whole 24-record universe (what the particles represent)."""
    universe = np.array(list(itertools.product(*[range(s) for s in SIZES])))
    log_a = sum(np.log(priors[j][universe[:, j]]) for j in range(len(SIZES)))
    for m, theta in distribution.theta.items():
        log_a = log_a + theta[index.cells(m, universe)]
    a = np.exp(log_a - log_a.max())
    return np.bincount(index.cells(0, universe), weights=a / a.sum(), minlength=int(index.n_cells[0]))


def test_rejuvenation_leaves_equal_weights_that_still_represent_the_fitted_distribution():
    distribution, index, priors = _pulled(20_000, seed=3)
    assert distribution.effective_size() < 0.25 * 20_000  # the pull made the weights degenerate
    exact = _exact_pair_table(distribution, index, priors)
    distribution.rejuvenate(4)
    assert distribution.effective_size() == 20_000  # equal weights
    # Tolerance 0.02 per cell: with 20,000 equally weighted particles a cell's Monte Carlo standard error is below
    # 0.0036 (plus the MH chain's correlation after 4 sweeps), so a kernel with the wrong target fails by far more.
    np.testing.assert_allclose(distribution.table(0), exact, atol=0.02)


def test_mwem_with_final_moves_publishes_equally_weighted_moved_particles():
    rng = make_rng(11)
    domain = Domain.categorical({f"c{i}": 5 for i in range(8)})
    codes = np.column_stack([rng.integers(0, 5, 4_000) for _ in range(8)])
    codes[:, 1] = codes[:, 0]  # one strong pair the fit learns
    data = Dataset.from_codes(domain, codes)
    workload = all_kway_marginals(domain, 2)

    def shares(final_moves: int) -> np.ndarray:
        config = MWEMConfig(rounds=6, select_epsilon=0.5, measure_rho=0.5, measure_noise="gaussian",
                            measure="marginal", learning_rate=2.0, final_sweeps=20, support="sampled",
                            support_size=4_000, support_budget=0.2, support_mix=0.2, support_moves=1,
                            final_moves=final_moves, replay_prior=True, delta=1e-6)
        result = mwem(data, workload, config, rng=make_rng(5), grant=grant_for_tests())
        assert result.parameters["final_moves"] == final_moves
        return np.asarray(result.weights) * 4_000  # a record's weight in particles

    # After the final sweeps the weights are the fit's (no record holds a whole number of particles' share); with
    # final moves every particle weighs 1/4,000 and a record's weight is the number of particles equal to it.
    assert not np.allclose(shares(0), np.round(shares(0)))
    moved = shares(3)
    np.testing.assert_allclose(moved, np.round(moved), atol=1e-6)
