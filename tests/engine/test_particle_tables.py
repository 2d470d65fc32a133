"""Every marginal of the particles at once (``ParticleDistribution.tables``), over the distinct particles if few."""

from __future__ import annotations

import numpy as np

from dq_engine import Domain, all_kway_marginals, make_rng
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import concatenate_workloads
from dq_engine.fit.particles import DISTINCT_VIEW_SHARE, ParticleDistribution

SIZES = (3, 4, 2, 5)


def _distribution(codes: np.ndarray, seed: int) -> tuple[ParticleDistribution, MarginalIndex]:
    domain = Domain.categorical({f"a{i}": s for i, s in enumerate(SIZES)})
    index = MarginalIndex(concatenate_workloads([all_kway_marginals(domain, 1), all_kway_marginals(domain, 2)]))
    priors = [np.full(s, 1.0 / s) for s in SIZES]
    rng = make_rng(seed)
    distribution = ParticleDistribution(codes, priors, index, rng)
    cells = np.arange(int(index.n_cells[5]))
    distribution.apply(5, cells, np.linspace(0.0, 2.0 / len(cells), len(cells)), 2.0)  # unequal weights
    return distribution, index


def _codes(particles: int, distinct: int, seed: int) -> np.ndarray:
    rng = make_rng(seed)
    pool = np.stack([rng.integers(0, s, distinct) for s in SIZES], axis=1)
    return pool[rng.integers(0, distinct, particles)]


def test_tables_over_few_distinct_particles_are_every_particles_tables() -> None:
    """10,000 particles that are copies of at most 50 rows: the same tables up to the order of the sums."""
    distribution, index = _distribution(_codes(10_000, 50, seed=1), seed=2)
    assert distribution._distinct_view().used
    tables = distribution.tables()
    assert len(tables) == index.n_marginals
    for m, table in enumerate(tables):
        np.testing.assert_allclose(table, distribution.table(m), rtol=0, atol=1e-13)
        assert table.shape == (int(index.n_cells[m]),)


def test_tables_over_many_distinct_particles_count_every_particle() -> None:
    """Particles that are mostly distinct: the view is not used and the tables are :meth:`table`'s bytes."""
    universe = np.stack(np.unravel_index(np.arange(int(np.prod(SIZES))), SIZES), axis=1)
    codes = universe[make_rng(3).permutation(len(universe))[:100]]  # 100 distinct records of 120
    distribution, _ = _distribution(codes, seed=4)
    distinct = len(np.unique(codes, axis=0))
    assert distinct > DISTINCT_VIEW_SHARE * len(codes)
    assert not distribution._distinct_view().used
    for m, table in enumerate(distribution.tables()):
        assert table.tobytes() == distribution.table(m).tobytes()


def test_the_view_follows_moves_and_resampling() -> None:
    """After a refresh (resample and Metropolis-Hastings moves) the tables are those of the moved particles."""
    distribution, _ = _distribution(_codes(5_000, 40, seed=5), seed=6)
    before = distribution._distinct_view()
    distribution.p = np.where(np.arange(5_000) < 100, 1.0, 1e-9)
    distribution.p /= distribution.p.sum()  # the effective size is far below half: the refresh resamples
    distribution.refresh(2)
    assert distribution._distinct_view() is not before
    for m, table in enumerate(distribution.tables()):
        np.testing.assert_allclose(table, distribution.table(m), rtol=0, atol=1e-13)
