"""The noisy one-way prior of MWEM on particles, and the noisy counts every MWEM measurement is made of.

With ``support="sampled"`` (:mod:`dq_engine.fit.mwem`) the particles are drawn from a prior ``P0``: a product of
per-attribute distributions, uniform or mixed with the attribute's noisy one-way marginal (:func:`sample_support`,
projected onto the simplex by :func:`simplex_projection`), conditioned on the public rules; a share of them may be
replaced by seed records (:func:`replace_with_seeds`). The prior's noisy one-way marginals can be replayed as
measurements (:func:`prior_measurements`). Every measurement, the prior's and each round's, is integer counts plus
exact discrete Laplace or Gaussian noise (:func:`noisy_counts`, scale :func:`noise_scale`, variance
:func:`noise_variance`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.privacy.noise import discrete_gaussian, discrete_laplace

__all__ = [
    "SUPPORT_REJECTION_TRIES",
    "Measurement",
    "MixRule",
    "NoiseKind",
    "PriorSettings",
    "feasible_particles",
    "noise_scale",
    "noise_variance",
    "noisy_counts",
    "prior_measurements",
    "prior_sensitivities",
    "projected_one_way_marginals",
    "redraw_infeasible",
    "replace_with_seeds",
    "sample_support",
    "simplex_projection",
    "uniform_share",
]

NoiseKind = Literal["laplace", "gaussian"]


class PriorSettings(Protocol):
    """What the prior reads of an MWEM configuration (:class:`dq_engine.fit.mwem.MWEMConfig` has these fields)."""

    measure_noise: NoiseKind
    support_size: int
    support_budget: float
    support_mix: float
    support_mix_rule: MixRule


# ---------------------------------------------------------------------- noisy counts
def noise_scale(kind: NoiseKind, *, l1: float, l2: float, budget: float) -> float:
    """Scale, in counts, of :func:`noisy_counts`'s noise: Laplace ``l1/ε`` (ε-DP) or Gaussian ``σ = l2/√(2ρ)``."""
    if kind == "laplace":
        return l1 / budget
    return l2 / math.sqrt(2.0 * budget)


def noise_variance(kind: NoiseKind, *, l1: float, l2: float, budget: float) -> float:
    """Variance, in counts², of :func:`noisy_counts`'s noise.

    That of the continuous Laplace or Gaussian it discretises (the discrete one's is within ``1/12`` of it).
    """
    scale = noise_scale(kind, l1=l1, l2=l2, budget=budget)
    return 2.0 * scale**2 if kind == "laplace" else scale**2


def prior_sensitivities(data: Dataset, k: int) -> tuple[float, float]:
    """L1 and L2 sensitivities, in counts, of the one-way marginals of ``k`` attributes measured together."""
    cells_per_record = 1 if data.neighbouring == "add-remove" else 2
    return float(cells_per_record * k), math.sqrt(cells_per_record * k)


def noisy_counts(
    kind: NoiseKind, counts: np.ndarray, *, l1: float, l2: float, budget: float, rng: np.random.Generator
) -> np.ndarray:
    """Integer counts plus exact noise (:mod:`dq_engine.privacy.noise`), ``l1``/``l2`` the sensitivities in counts.

    Discrete Laplace of scale ``l1/ε`` (ε-DP) or discrete Gaussian with ``σ = l2/√(2ρ)`` (ρ-zCDP).
    """
    scale = noise_scale(kind, l1=l1, l2=l2, budget=budget)
    if kind == "laplace":
        return discrete_laplace(counts, scale=scale, rng=rng)
    return discrete_gaussian(counts, sigma=scale, rng=rng)


# ---------------------------------------------------------------------- the prior and the particles' start
def sample_support(
    data: Dataset,
    config: PriorSettings,
    rng: np.random.Generator,
    *,
    constraints: Constraints | None = None,
) -> tuple[np.ndarray, list[np.ndarray], dict[int, np.ndarray]]:
    """Draw the particles of ``support="sampled"`` from the prior ``P0``.

    Returns the particles, ``P0``'s factors and the noisy one-way marginals (normalised) that the prior mixes in,
    by attribute (empty without a prior budget).

    Every attribute is drawn from ``λ · uniform + (1 - λ) ·`` its noisy one-way marginal, ``λ`` by
    :func:`uniform_share` (``support_mix`` for every attribute, or less where the noise is small), including the
    attributes no workload marginal uses: the published table holds them too, and a uniform column where the data
    holds one value on 80 % of its rows is further from the data than any DP table of independent columns (what MST
    and AIM avoid by measuring every one-way marginal; docs/decisions.md). The
    noisy one-way marginals are measured once, all together, with exact noise on the counts (L1 sensitivity
    ``2k``, L2 ``√(2k)`` counts for ``k`` attributes under replace-one, ``k`` and ``√k`` under add/remove,
    ``data.neighbouring``), divided by one estimate of ``n`` (the columns' noisy totals averaged, weighted by the
    inverse of their variance) and projected onto the probability simplex (:func:`simplex_projection`;
    post-processing); with ``support_budget = 0`` every attribute is uniform.

    The projection, not clipping at 0 and renormalising: in a column where one value holds most rows (capital-loss
    = 0 for 95 % of Adult), clipping keeps the positive noise of every nearly empty cell and the renormalisation
    takes that mass from the dominant value, a bias that grows with the number of values; the projection
    subtracts one threshold from every cell, so the dominant value keeps its share (docs/decisions.md,
    "The prior's one-way marginals are projected onto the simplex").

    With ``constraints`` (carrying a witness) the particles are feasible and follow ``P0`` conditioned on
    feasibility: a rule component small enough to list is drawn from ``P0`` restricted to its feasible values; a
    larger one is redrawn while broken (rejection, at most :data:`SUPPORT_REJECTION_TRIES` times), and the few
    particles still infeasible after that are repaired towards the witness.
    """
    domain = data.domain
    priors = [np.full(int(size), 1.0 / size) for size in domain.sizes]
    estimates: dict[int, np.ndarray] = {}
    if config.support_budget > 0:
        attributes = list(range(len(domain.sizes)))
        estimates, total = _one_way_estimates(data, attributes, kind=config.measure_noise,
                                              budget=config.support_budget, rng=rng)
        l1, l2 = prior_sensitivities(data, len(attributes))
        sigma = noise_scale(config.measure_noise, l1=l1, l2=l2, budget=config.support_budget) / max(total, 1.0)
        for a, estimate in estimates.items():
            mix = uniform_share(len(estimate), sigma, cap=config.support_mix, rule=config.support_mix_rule)
            priors[a] = mix * priors[a] + (1 - mix) * estimate
    columns = [rng.choice(len(prior), size=config.support_size, p=prior) for prior in priors]
    particles = np.stack(columns, axis=1).astype(np.int64)
    if constraints is not None and len(constraints):
        particles = feasible_particles(particles, priors, constraints, rng)
    return particles, priors, estimates


def projected_one_way_marginals(
    data: Dataset, attributes: list[int], *, kind: NoiseKind, budget: float, rng: np.random.Generator
) -> dict[int, np.ndarray]:
    """The one-way marginals of ``attributes`` measured once, all together, as probability vectors.

    Exact noise on the counts (:func:`noisy_counts`; sensitivities :func:`prior_sensitivities`), divided by one
    estimate of ``n`` (the columns' noisy totals averaged, weighted by the inverse of their variance) and projected
    onto the probability simplex (:func:`simplex_projection`). An attribute whose estimate cannot be formed (every
    noisy total at most 0) gets the uniform vector. One privacy event of ``budget`` (ε or ρ by ``kind``).
    """
    return _one_way_estimates(data, attributes, kind=kind, budget=budget, rng=rng)[0]


def _one_way_estimates(
    data: Dataset, attributes: list[int], *, kind: NoiseKind, budget: float, rng: np.random.Generator
) -> tuple[dict[int, np.ndarray], float]:
    """:func:`projected_one_way_marginals` and the estimate of ``n`` they were divided by (0 without attributes)."""
    if not attributes:
        return {}, 0.0
    counts = data.one_way_counts()
    l1, l2 = prior_sensitivities(data, len(attributes))
    noisy = noisy_counts(
        kind, np.concatenate([counts[a] for a in attributes]), l1=l1, l2=l2, budget=budget, rng=rng,
    )
    ends = np.cumsum([len(counts[a]) for a in attributes])
    blocks = [block.astype(np.float64) for block in np.split(noisy, ends[:-1])]
    # every column's counts sum to n: the noisy totals, weighted by the inverse of their variance (that of a
    # sum of ``cells`` equally noisy counts), estimate it better than any one column's
    weights = np.array([1.0 / len(block) for block in blocks])
    total = float(np.dot(weights, [block.sum() for block in blocks]) / weights.sum())
    return {
        int(a): simplex_projection(block / total) if total > 0 else np.full(len(block), 1.0 / len(block))
        for a, block in zip(attributes, blocks, strict=True)
    }, total


MixRule = Literal["fixed", "noise"]


def uniform_share(values: int, sigma: float, *, cap: float, rule: MixRule) -> float:
    """Weight of the uniform distribution in the prior factor of an attribute with ``values`` values.

    ``"fixed"``: ``cap`` for every attribute. ``"noise"``: ``min(cap, (σ · values)²)``, where ``σ`` is the standard
    deviation of the noise on one cell of the noisy one-way marginal, as a fraction of ``n``. ``σ · values`` is
    that noise against the mass of a uniform cell, ``1 / values``: where it is small the noisy marginal knows every
    value's share and uniform mass only puts particles, and later published rows, where the data has none (pairs
    of many-valued columns then look dependent in the published table); where it is near 1 the projection zeroes
    values that hold rows and the uniform mass keeps them reachable (docs/decisions.md, "The prior mixes in
    uniform mass by the noise"). Public: ``σ`` comes from the budget, the sensitivities and the noisy estimate of
    ``n``.
    """
    if rule == "fixed":
        return cap
    return min(cap, (sigma * values) ** 2)


def simplex_projection(vector: np.ndarray) -> np.ndarray:
    """The Euclidean projection of ``vector`` onto the probability simplex (Duchi et al. 2008, Fig. 1).

    ``max(v - θ, 0)`` with the one threshold ``θ`` that makes the result sum to 1.
    """
    values = np.asarray(vector, dtype=np.float64)
    ordered = np.sort(values)[::-1]
    excess = np.cumsum(ordered) - 1.0
    ranks = np.arange(1, len(values) + 1)
    last = np.flatnonzero(ordered - excess / ranks > 0)[-1]
    theta = excess[last] / (last + 1)
    return np.maximum(values - theta, 0.0)


SUPPORT_REJECTION_TRIES = 50
"""Redraws of an infeasible particle's rule attributes before it is repaired towards the witness."""


def feasible_particles(
    particles: np.ndarray, priors: list[np.ndarray], constraints: Constraints, rng: np.random.Generator
) -> np.ndarray:
    """Draw every rule component from the product ``priors`` conditioned on feasibility (see :func:`sample_support`).

    A component whose joint values can be listed (:meth:`Constraints.component_records`) is drawn exactly: one
    draw per particle from ``P0`` restricted to the component's feasible values and renormalised. Larger ones are
    redrawn by rejection, and what is left infeasible after that is repaired towards the witness
    (:func:`redraw_infeasible`).
    """
    for c in range(len(constraints.components)):
        listed = constraints.component_records(c)
        if listed is None:
            continue
        values, feasible = listed
        attributes = constraints.components[c]
        weight = np.prod([priors[a][values[:, j]] for j, a in enumerate(attributes)], axis=0) * feasible
        if weight.sum() > 0:  # the prior has mass on some feasible value (else rejection and repair below)
            particles[:, attributes] = values[rng.choice(len(values), size=len(particles), p=weight / weight.sum())]
    return redraw_infeasible(particles, priors, constraints, rng)


def redraw_infeasible(
    particles: np.ndarray, priors: list[np.ndarray], constraints: Constraints, rng: np.random.Generator
) -> np.ndarray:
    """Redraw the broken components of infeasible particles from ``priors`` (rejection), then repair the rest.

    At most :data:`SUPPORT_REJECTION_TRIES` redraws; particles still infeasible after them are repaired towards the
    constraints' witness.
    """
    bad = np.flatnonzero(~constraints.feasible(particles))
    for _ in range(SUPPORT_REJECTION_TRIES):
        if len(bad) == 0:
            return particles
        broken = constraints.broken_components(particles[bad])
        for c, component in enumerate(constraints.components):
            rows = bad[broken[:, c]]
            for a in component:
                particles[rows, a] = rng.choice(len(priors[a]), size=len(rows), p=priors[a])
        bad = bad[~constraints.feasible(particles[bad])]
    if len(bad):
        particles[bad] = constraints.repair(particles[bad], constraints.witness_codes, constraints.attributes)
    return particles


def replace_with_seeds(
    particles: np.ndarray, seeds: np.ndarray, weights: np.ndarray | None, fraction: float, rng: np.random.Generator
) -> None:
    """Overwrite the first ``fraction`` of the particles with draws from ``seeds`` (by weight)."""
    count = round(fraction * len(particles))
    if count == 0 or len(seeds) == 0:
        return
    p = None if weights is None else np.asarray(weights, dtype=np.float64) / np.sum(weights)
    particles[:count] = np.asarray(seeds)[rng.choice(len(seeds), size=count, p=p)]


# ---------------------------------------------------------------------- the prior as measurements
@dataclass(frozen=True)
class Measurement:
    """A noisy measurement of cells of a workload marginal, in fractions: a round's, or a prior one-way marginal's."""

    marginal: int
    cells: np.ndarray
    values: np.ndarray
    variance: float
    """Noise variance of each value (fractions²)."""


def prior_measurements(
    estimates: dict[int, np.ndarray], index: MarginalIndex, variance: float
) -> list[Measurement]:
    """The prior's noisy one-way marginals as measurements of the workload's one-way marginals (if it has them)."""
    out = []
    for m in range(index.n_marginals):
        attributes = index.attributes[m]
        if len(attributes) == 1 and int(attributes[0]) in estimates:
            cells = index.query_cells[m]
            out.append(Measurement(m, cells, estimates[int(attributes[0])][cells], variance))
    return out
