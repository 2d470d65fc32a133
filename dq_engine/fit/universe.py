"""The whole-universe distribution of MWEM: ``A`` with one weight per record of the domain.

With ``support="universe"`` (MWEM as published, :mod:`dq_engine.fit.mwem`) the data player's distribution ``A``
holds one float per record, as a dense tensor of shape ``domain.sizes`` (:class:`UniverseDistribution`); when public
rules forbid most records it is the list of feasible records instead, a
:class:`~dq_engine.fit.particles.ParticleDistribution` that is never moved or resampled (:func:`universe_distribution`).
Infeasible records have weight 0 either way.
"""

from __future__ import annotations

import math

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.domain import Domain
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.fit.particles import ParticleDistribution

__all__ = ["SPARSE_FEASIBLE_SHARE", "UniverseDistribution", "universe_distribution"]


class UniverseDistribution:
    """``A`` as a dense tensor over every record of the universe (infeasible records at weight 0)."""

    def __init__(
        self, domain: Domain, index: MarginalIndex, constraints: Constraints | None = None,
        forbidden: np.ndarray | None = None,
    ) -> None:
        self.domain = domain
        self.index = index
        shape = tuple(int(s) for s in domain.sizes)
        self.p = np.full(shape, 1.0 / math.prod(shape))
        if constraints is not None and len(constraints):  # uniform over the feasible records
            self.p[constraints.forbidden_mask() if forbidden is None else forbidden] = 0.0
            self.p /= self.p.sum()

    def table(self, m: int, weights: np.ndarray | None = None) -> np.ndarray:
        """Marginal ``m`` of ``A`` (of ``weights``, if given) in C order (sums over blocks of the other axes)."""
        weights = self.p if weights is None else weights
        sizes = weights.shape
        shape: list[int] = []
        axes: list[int] = []
        previous = 0
        for a in self.index.attributes[m].tolist():
            shape.append(math.prod(sizes[previous:a]))
            axes.append(len(shape) - 1)
            shape.append(sizes[a])
            previous = a + 1
        shape.append(math.prod(sizes[previous:]))
        axes.append(len(shape) - 1)
        return weights.reshape(shape).sum(axis=tuple(axes)).ravel()

    def _broadcast(self, m: int, factor: np.ndarray) -> np.ndarray:
        shape = [1] * len(self.domain)
        for a in self.index.attributes[m]:
            shape[a] = int(self.domain.sizes[a])
        return factor.reshape(shape)

    def apply(self, m: int, cells: np.ndarray, values: np.ndarray, learning_rate: float) -> np.ndarray:
        """``A(x) ← A(x) exp(λ (m_c - A_c))`` for ``x`` in a measured cell ``c`` of marginal ``m``.

        Returns the residuals ``m_c - A_c`` before the update.
        """
        table = self.table(m)
        residual = values - table[cells]
        log_factor = np.zeros_like(table)
        log_factor[cells] = learning_rate * residual
        self.p *= self._broadcast(m, np.exp(log_factor - log_factor.max()))
        self.p /= self.p.sum()
        return residual

    def weights_after(self, factors: dict[int, np.ndarray]) -> np.ndarray:
        """The weights ``A(x) · exp(Σ_m factors[m][cell_m(x)])``, normalised, without changing ``A``."""
        log = np.zeros(self.p.shape)
        for m, factor in factors.items():
            log = log + self._broadcast(m, factor)
        weights = self.p * np.exp(log - log.max())
        return weights / weights.sum()

    def set_weights(self, weights: np.ndarray, factors: dict[int, np.ndarray]) -> None:
        """Make ``weights`` (from :meth:`weights_after`) ``A``'s (the universe keeps no ``θ``)."""
        self.p = weights

    def snapshot(self) -> np.ndarray:
        """A copy of the weights (for ``output="average"`` and the final records)."""
        return self.p.copy()

    def records(self, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The records of ``probabilities`` (a snapshot) with their probabilities, the smallest dropped."""
        flat = probabilities.ravel()
        keep = np.flatnonzero(flat >= 1e-6 / flat.size)  # drops at most 1e-6 of the mass (post-processing)
        largest = int(self.domain.sizes.max())
        dtype = np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else np.uint32
        codes = np.stack(np.unravel_index(keep, self.p.shape), axis=1).astype(dtype)
        return codes, flat[keep] / flat[keep].sum()


SPARSE_FEASIBLE_SHARE = 0.125
"""Below this share of feasible records, MWEM over the universe keeps only the feasible records (see below)."""


def universe_distribution(
    domain: Domain, index: MarginalIndex, constraints: Constraints | None, rng: np.random.Generator
) -> UniverseDistribution | ParticleDistribution:
    """``A`` over the universe: a dense tensor, or the list of feasible records when rules forbid most records.

    The list is the same distribution (every infeasible record has weight 0 in the tensor and stays 0 under the
    multiplicative updates), so MWEM is unchanged; its marginals are weighted counts over the listed records
    instead of sums over the whole tensor, which is cheaper when fewer than
    :data:`SPARSE_FEASIBLE_SHARE` of the records are feasible (Adult's rule columns: 3 %). The listed records are
    never moved or resampled (no refresh is called in universe mode).
    """
    if constraints is None or not len(constraints):
        return UniverseDistribution(domain, index, constraints)
    forbidden = constraints.forbidden_mask()
    if forbidden.mean() < 1 - SPARSE_FEASIBLE_SHARE:
        return UniverseDistribution(domain, index, constraints, forbidden)
    largest = int(domain.sizes.max())
    dtype = np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else np.uint32
    feasible = np.argwhere(~forbidden).astype(dtype)
    uniform = [np.full(int(size), 1.0 / int(size)) for size in domain.sizes]
    return ParticleDistribution(feasible, uniform, index, rng, constraints=constraints)

