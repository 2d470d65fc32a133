"""Policies for *free* attributes: those no sampled query touches (DualQuery paper §6.4).

* ``zero`` -- binary attributes 0 (the paper's choice for sparse real data); a categorical attribute
  takes its first value (code 0) so that the record stays valid.
* ``random`` -- uniform over the attribute's values (the paper's choice for dense synthetic data).
* ``dp-marginal`` -- a value drawn from a *noisy* one-way marginal of the attribute (the principled variant
  the paper's footnote 6 suggests). The noisy marginals are measured once per run, with the Laplace mechanism
  under pure ε (:func:`noisy_one_way_marginals`) or the Gaussian mechanism under ρ-zCDP
  (:func:`gaussian_one_way_marginals`, the one that stays useful with tens of thousands of attributes); their
  cost is a privacy event charged like any other.

The policy only fills attributes the oracle leaves unconstrained, so it never changes the objective.

With public constraints (:class:`~dq_engine.constraints.Constraints`) the filled record stays feasible: the free
attributes that some rule names are drawn again while the record breaks a rule (rejection, at most
:data:`REJECTION_TRIES` draws: accepted draws follow the policy's distribution conditioned on feasibility), and a
record still infeasible after that is repaired towards the oracle's record, which is feasible
(:meth:`~dq_engine.constraints.Constraints.repair`).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dq_engine.accounting import PureDpEvent, ZCDPEvent
from dq_engine.constraints import Constraints
from dq_engine.data import Dataset
from dq_engine.domain import Domain
from dq_engine.errors import ConfigError

__all__ = [
    "REJECTION_TRIES",
    "FreeAttributeFiller",
    "FreeNoise",
    "FreePolicy",
    "FreeScope",
    "check_free_settings",
    "gaussian_marginal_sigma",
    "gaussian_one_way_marginals",
    "gaussian_sensitivity_squared",
    "noisy_one_way_marginals",
]

FreePolicy = Literal["zero", "random", "dp-marginal"]
FreeNoise = Literal["laplace", "gaussian"]
FreeScope = Literal["untouched", "slack"]

REJECTION_TRIES = 20
"""Draws of the free rule attributes before an infeasible filled record is repaired instead."""


def check_free_settings(
    *, policy: FreePolicy, noise: FreeNoise, epsilon: float, rho: float, rows_per_round: int, scope: FreeScope
) -> None:
    """Check the free-attribute settings of DualQuery and DQRS together (also used by release configs).

    Raises:
        ConfigError: If the policy, noise, budgets, rows per round and scope do not fit together.
    """
    _check_free_budget(policy, noise, epsilon, rho)
    _check_rows_per_round(rows_per_round, policy)
    if scope not in ("untouched", "slack"):
        raise ConfigError(f"free_scope ({scope!r}) must be 'untouched' or 'slack'")


def _check_rows_per_round(rows: int, policy: FreePolicy) -> None:
    """Check the rows-per-round setting (shared by DualQuery and DQRS).

    Raises:
        ConfigError: If ``rows`` is not a positive integer, or is above 1 with the ``zero`` policy (whose
            rows would all be the same record).
    """
    if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
        raise ConfigError(f"rows_per_round ({rows!r}) must be an integer >= 1")
    if rows > 1 and policy == "zero":
        raise ConfigError(
            "rows_per_round > 1 needs free attributes drawn at random (free_policy 'random' or 'dp-marginal'); "
            "with 'zero' every row is the same record, so set rows_per_round to 1"
        )


def _check_free_budget(policy: FreePolicy, noise: FreeNoise, epsilon: float, rho: float) -> None:
    """Check that exactly the budget the free-attribute policy spends is set (shared by DualQuery and DQRS).

    Raises:
        ConfigError: If the policy, noise and budgets do not fit together.
    """
    if noise not in ("laplace", "gaussian"):
        raise ConfigError(f"free_noise ({noise!r}) must be 'laplace' or 'gaussian'")
    gaussian = policy == "dp-marginal" and noise == "gaussian"
    if policy == "dp-marginal" and not gaussian and not epsilon > 0:
        raise ConfigError("free_policy 'dp-marginal' needs free_epsilon > 0")
    if gaussian and not (rho > 0 and math.isfinite(rho)):
        raise ConfigError("free_policy 'dp-marginal' with free_noise 'gaussian' needs free_rho > 0")
    if policy != "dp-marginal" and epsilon != 0:
        raise ConfigError("free_epsilon is only used by free_policy 'dp-marginal'; set it to 0")
    if gaussian and epsilon != 0:
        raise ConfigError("free_noise 'gaussian' spends free_rho, not free_epsilon; set free_epsilon to 0")
    if not gaussian and rho != 0:
        raise ConfigError("free_rho is only used by free_policy 'dp-marginal' with free_noise 'gaussian'; set it to 0")


def noisy_one_way_marginals(
    data: Dataset, *, epsilon: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], PureDpEvent]:
    """ε-DP one-way marginals of every attribute (Laplace mechanism), as probability vectors.

    Under replace-one neighbours one record changes two cells of each attribute's histogram, so the L1
    sensitivity of all ``m`` histograms together is ``2m``; each cell gets ``Laplace(2m/ε)`` noise.
    Noisy counts are clipped at 0 and normalised (post-processing); an all-zero result becomes uniform.

    Returns:
        The probability vectors and the privacy event to charge (one ε-DP invocation).
    """
    if not epsilon > 0:
        raise ConfigError(f"free-attribute epsilon ({epsilon}) must be > 0 for the dp-marginal policy")
    counts = data.one_way_counts()
    scale = 2.0 * len(counts) / epsilon
    marginals = []
    for histogram in counts:
        noisy = np.clip(histogram + rng.laplace(0.0, scale, size=histogram.shape), 0.0, None)
        total = noisy.sum()
        marginals.append(noisy / total if total > 0 else np.full(histogram.shape, 1.0 / len(histogram)))
    event = PureDpEvent(epsilon=epsilon, count=1, label="noisy one-way marginals for free attributes")
    return marginals, event


def gaussian_sensitivity_squared(domain: Domain) -> int:
    """Squared L2 sensitivity, in counts, of the cells :func:`gaussian_one_way_marginals` measures.

    Replace-one neighbours (``n`` public): one record moves from value ``a`` to value ``b`` of each attribute
    where the two records differ, so each attribute's histogram changes by ``-1`` in one cell and ``+1`` in
    another. For an attribute with ``k > 2`` values all ``k`` cells are measured: squared change ``2``. For a
    binary attribute only the count of ones is measured (the count of zeros is ``n`` minus it, public
    post-processing): squared change ``1``. Summed over attributes that all differ, the worst case is
    ``(#binary) + 2·(#non-binary)``; for ``d`` binary attributes the L2 sensitivity is ``√d`` counts, i.e.
    ``√d/n`` on proportions (``√(2d)/n`` if both cells of each binary table were measured).
    """
    sizes = np.asarray(domain.sizes)
    return int(np.sum(np.where(sizes == 2, 1, np.where(sizes == 1, 0, 2))))  # a 1-value attribute never changes


def gaussian_marginal_sigma(domain: Domain, *, n: int, rho: float) -> float:
    """Standard deviation of the noise on each measured proportion: ``√(Δ²/(2ρ)) / n``.

    The Gaussian mechanism with L2 sensitivity ``Δ`` and noise ``N(0, σ²)`` per coordinate is
    ``Δ²/(2σ²)``-zCDP (Bun & Steinke 2016, Prop. 1.6); ``σ = Δ/√(2ρ)`` in counts.
    """
    if not rho > 0:
        raise ConfigError(f"free-attribute rho ({rho}) must be > 0 for the Gaussian dp-marginal policy")
    return float(np.sqrt(gaussian_sensitivity_squared(domain) / (2.0 * rho)) / n)


def gaussian_one_way_marginals(
    data: Dataset, *, rho: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], ZCDPEvent]:
    """ρ-zCDP one-way marginals of every attribute (Gaussian mechanism), as probability vectors.

    Binary attribute: noisy proportion of ones ``p̃ = c/n + N(0, σ²)`` clipped into [0, 1], marginal
    ``(1 - p̃, p̃)``. Other attributes: every cell gets ``N(0, (σn)²)`` on its count; clipped at 0 and
    normalised (uniform if all cells clip). ``σ`` comes from :func:`gaussian_marginal_sigma` (sensitivity
    stated in :func:`gaussian_sensitivity_squared`); clipping and normalising are post-processing.

    Returns:
        The probability vectors and the privacy event to charge (one ρ-zCDP invocation).
    """
    sigma = gaussian_marginal_sigma(data.domain, n=data.n, rho=rho)
    counts = data.one_way_counts()
    sizes = np.asarray(data.domain.sizes)
    marginals: list[np.ndarray] = [np.empty(0)] * len(counts)
    binary = np.nonzero(sizes == 2)[0]
    if len(binary):
        ones = np.array([counts[j][1] for j in binary], dtype=np.float64) / data.n
        noisy = np.clip(ones + rng.normal(0.0, sigma, size=len(binary)), 0.0, 1.0)
        for j, p in zip(binary, noisy, strict=True):
            marginals[j] = np.array([1.0 - p, p])
    for j in np.nonzero(sizes != 2)[0]:
        histogram = counts[j]
        noisy = np.clip(histogram + rng.normal(0.0, sigma * data.n, size=histogram.shape), 0.0, None)
        total = noisy.sum()
        marginals[j] = noisy / total if total > 0 else np.full(histogram.shape, 1.0 / len(histogram))
    event = ZCDPEvent(rho=rho, count=1, label="Gaussian one-way marginals for free attributes")
    return marginals, event


class FreeAttributeFiller:
    """Fills free attributes of a best response according to a policy.

    Args:
        domain: Public domain.
        policy: ``"zero"``, ``"random"`` or ``"dp-marginal"``.
        marginals: Noisy one-way marginals (required for ``"dp-marginal"``).
        constraints: Public rules the filled records must keep (see the module docstring), or None.
    """

    def __init__(
        self,
        domain: Domain,
        policy: FreePolicy,
        marginals: list[np.ndarray] | None = None,
        *,
        constraints: Constraints | None = None,
    ) -> None:
        if policy not in ("zero", "random", "dp-marginal"):
            raise ConfigError(f"free-attribute policy ({policy!r}) must be 'zero', 'random' or 'dp-marginal'")
        if policy == "dp-marginal" and marginals is None:
            raise ConfigError("the dp-marginal policy needs noisy one-way marginals")
        self.domain = domain
        self.policy = policy
        self.constraints = constraints if constraints is not None and len(constraints) else None
        if marginals is not None:
            # cumulative sums padded with +inf to one table, so that a whole set of free attributes is drawn
            # in one vectorised searchsorted (a Python loop costs ~0.3 s per round at 100,000 attributes)
            width = max(len(p) for p in marginals)
            self._cumulative = np.full((len(marginals), width), np.inf)
            self._last = np.empty(len(marginals))
            for j, p in enumerate(marginals):
                cumulative = np.cumsum(p)
                self._cumulative[j, : len(p)] = cumulative
                self._last[j] = cumulative[-1]

    def fill(self, codes: np.ndarray, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Return ``codes`` with the attributes listed in ``free`` set by the policy.

        With constraints, ``codes`` must be feasible and so is the result (see the module docstring).
        """
        reference = codes
        codes = codes.copy()
        if len(free) == 0:
            return codes
        codes[free] = self._draw(free, rng)
        if self.constraints is None or self.constraints.feasible(codes):
            return codes
        on_rule = free[np.isin(free, self.constraints.attributes)]  # the other free attributes cannot break a rule
        for _ in range(REJECTION_TRIES - 1):
            codes[on_rule] = self._draw(on_rule, rng)
            if self.constraints.feasible(codes):
                return codes
        return self.constraints.repair(codes, reference, on_rule)

    def _draw(self, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One value per listed attribute, from the policy."""
        if self.policy == "zero":
            return np.zeros(len(free), dtype=np.int64)
        if self.policy == "random":
            return (rng.random(len(free)) * self.domain.sizes[free]).astype(np.int64)
        draws = rng.random(len(free)) * self._last[free]
        # searchsorted(cumulative, u · total, side="right") = number of cumulative sums <= u · total
        index = (self._cumulative[free] <= draws[:, None]).sum(axis=1)
        return np.minimum(index, self.domain.sizes[free] - 1)
