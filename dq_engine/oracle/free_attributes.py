"""Policies for *free* attributes: those no sampled query touches (DualQuery paper §6.4).

* ``zero`` -- binary attributes 0 (the paper's choice for sparse real data); a categorical attribute
  takes its first value (code 0) so that the record stays valid.
* ``random`` -- uniform over the attribute's values (the paper's choice for dense synthetic data).
* ``dp-marginal`` -- a value drawn from a *noisy* one-way marginal of the attribute (the principled variant
  the paper's footnote 6 suggests). The noisy marginals are measured once per run, with the exact discrete
  Laplace mechanism under pure ε (:func:`noisy_one_way_marginals`) or the exact discrete Gaussian mechanism
  under ρ-zCDP (:func:`gaussian_one_way_marginals`, the one that stays useful with tens of thousands of
  attributes), on integer counts (:mod:`dq_engine.privacy.noise`), with the sensitivities of the dataset's
  neighbouring relation; their cost is a privacy event charged like any other. Drawing a value from the
  noisy marginals is post-processing and uses ordinary float sampling.

The policy only fills attributes the oracle leaves unconstrained, so it never changes the objective.

With public constraints (:class:`~dq_engine.data.constraints.Constraints`) the filled record stays feasible: the free
attributes of every rule component the record breaks (:attr:`~dq_engine.data.constraints.Constraints.components`: no
rule links two of them, so feasibility factorises over them) are drawn again, at most :data:`REJECTION_TRIES`
times (rejection: an accepted component follows the policy's distribution conditioned on feasibility), and a
record still infeasible after that is repaired towards the oracle's record, which is feasible
(:meth:`~dq_engine.data.constraints.Constraints.repair`).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.errors import ConfigError
from dq_engine.privacy.accounting import PureDpEvent, ZCDPEvent
from dq_engine.privacy.noise import discrete_gaussian, discrete_laplace

__all__ = [
    "REJECTION_TRIES",
    "FreeAttributeFiller",
    "FreeNoise",
    "FreePolicy",
    "FreeScope",
    "check_free_settings",
    "gaussian_count_sigma",
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
    """ε-DP one-way marginals of every attribute (exact discrete Laplace mechanism), as probability vectors.

    Every cell count of every attribute's histogram gets discrete Laplace noise
    (:func:`dq_engine.privacy.noise.discrete_laplace`) of scale ``Δ₁/ε``. Under replace-one neighbours one record
    changes two cells of each attribute's histogram, so ``Δ₁ = 2m`` for ``m`` attributes; under add/remove
    neighbours (``data.neighbouring == "add-remove"``) it changes one cell of each, ``Δ₁ = m``. Noisy counts
    are clipped at 0 and normalised by their own (noisy) total, post-processing; an all-zero result becomes
    uniform.

    Returns:
        The probability vectors and the privacy event to charge (one ε-DP invocation).
    """
    if not epsilon > 0:
        raise ConfigError(f"free-attribute epsilon ({epsilon}) must be > 0 for the dp-marginal policy")
    counts = data.one_way_counts()
    cells_per_record = 1 if data.neighbouring == "add-remove" else 2
    noisy = discrete_laplace(np.concatenate(counts), scale=cells_per_record * len(counts) / epsilon, rng=rng)
    ends = np.cumsum([len(histogram) for histogram in counts])
    marginals = [_normalised(block) for block in np.split(noisy, ends[:-1])]
    event = PureDpEvent(epsilon=epsilon, count=1, label="noisy one-way marginals for free attributes")
    return marginals, event


def _normalised(noisy_counts: np.ndarray) -> np.ndarray:
    """Clip noisy counts at 0 and divide by their total (uniform if every cell clips): post-processing."""
    clipped = np.clip(noisy_counts, 0, None).astype(np.float64)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(clipped.shape, 1.0 / len(clipped))


def gaussian_sensitivity_squared(domain: Domain, *, neighbouring: str = "replace-one") -> int:
    """Squared L2 sensitivity, in counts, of the cells :func:`gaussian_one_way_marginals` measures.

    Replace-one neighbours (``n`` public): one record moves from value ``a`` to value ``b`` of each attribute
    where the two records differ, so each attribute's histogram changes by ``-1`` in one cell and ``+1`` in
    another. For an attribute with ``k > 2`` values all ``k`` cells are measured: squared change ``2``. For a
    binary attribute only the count of ones is measured (the count of zeros is ``n`` minus it, public
    post-processing): squared change ``1``. Summed over attributes that all differ, the worst case is
    ``(#binary) + 2·(#non-binary)``; for ``d`` binary attributes the L2 sensitivity is ``√d`` counts, i.e.
    ``√d/n`` on proportions (``√(2d)/n`` if both cells of each binary table were measured).

    Add/remove neighbours (``n`` private): every cell of every attribute with at least two values is measured
    (the zeros of a binary attribute too: ``n`` is not public, so it cannot be subtracted) and one record
    changes one cell of each by 1: squared change ``1`` per attribute, ``#(attributes with ≥ 2 values)``.
    A one-value attribute is never measured (its marginal is ``[1]``).
    """
    sizes = np.asarray(domain.sizes)
    if neighbouring == "add-remove":
        return int(np.sum(sizes >= 2))
    if neighbouring != "replace-one":
        raise ConfigError(f"neighbouring ({neighbouring!r}) must be 'replace-one' or 'add-remove'")
    return int(np.sum(np.where(sizes == 2, 1, np.where(sizes == 1, 0, 2))))  # a 1-value attribute never changes


def gaussian_count_sigma(domain: Domain, *, rho: float, neighbouring: str = "replace-one") -> float:
    """Noise parameter ``σ = √(Δ²/(2ρ))`` in counts of every measured cell (discrete Gaussian).

    The discrete Gaussian mechanism with integer-valued L2 sensitivity ``Δ`` and parameter ``σ`` per coordinate
    is ``Δ²/(2σ²)``-zCDP (Canonne, Kamath & Steinke 2020, Theorem 4), as the continuous one is (Bun & Steinke
    2016, Prop. 1.6).
    """
    if not rho > 0:
        raise ConfigError(f"free-attribute rho ({rho}) must be > 0 for the Gaussian dp-marginal policy")
    return float(np.sqrt(gaussian_sensitivity_squared(domain, neighbouring=neighbouring) / (2.0 * rho)))


def gaussian_marginal_sigma(domain: Domain, *, n: int, rho: float, neighbouring: str = "replace-one") -> float:
    """Standard deviation parameter of the noise on each measured proportion: ``√(Δ²/(2ρ)) / n``.

    For reporting (``n`` public); the noise itself is added to counts (:func:`gaussian_count_sigma`).
    """
    return gaussian_count_sigma(domain, rho=rho, neighbouring=neighbouring) / n


def gaussian_one_way_marginals(
    data: Dataset, *, rho: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], ZCDPEvent]:
    """ρ-zCDP one-way marginals of every attribute (exact discrete Gaussian mechanism), as probability vectors.

    Counts get discrete Gaussian noise (:func:`dq_engine.privacy.noise.discrete_gaussian`) with ``σ`` from
    :func:`gaussian_count_sigma` (sensitivity stated in :func:`gaussian_sensitivity_squared`, for the
    dataset's neighbouring relation).

    * Replace-one (``n`` public): a binary attribute's noisy count of ones ``c̃`` gives ``p̃ = c̃/n`` clipped
      into [0, 1] and the marginal ``(1 - p̃, p̃)``; other attributes: every cell measured, clipped at 0 and
      normalised by the noisy total.
    * Add/remove (``n`` private): every cell of every attribute with two or more values is measured, clipped
      at 0 and normalised by its noisy total: nothing is divided by the private ``n``.

    Clipping and normalising are post-processing; a histogram whose cells all clip becomes uniform.

    Returns:
        The probability vectors and the privacy event to charge (one ρ-zCDP invocation).
    """
    sigma = gaussian_count_sigma(data.domain, rho=rho, neighbouring=data.neighbouring)
    counts = data.one_way_counts()
    sizes = np.asarray(data.domain.sizes)
    marginals: list[np.ndarray] = [np.ones(1)] * len(counts)  # one-value attributes: [1], never measured
    ones_only = np.flatnonzero(sizes == 2) if data.neighbouring == "replace-one" else np.zeros(0, dtype=np.int64)
    if len(ones_only):
        ones = discrete_gaussian(np.array([counts[j][1] for j in ones_only]), sigma=sigma, rng=rng)
        proportions = np.clip(ones / data.n, 0.0, 1.0)
        for j, p in zip(ones_only, proportions, strict=True):
            marginals[j] = np.array([1.0 - p, p])
    whole = np.setdiff1d(np.flatnonzero(sizes >= 2), ones_only)
    if len(whole):
        noisy = discrete_gaussian(np.concatenate([counts[j] for j in whole]), sigma=sigma, rng=rng)
        ends = np.cumsum(sizes[whole])
        for j, block in zip(whole, np.split(noisy, ends[:-1]), strict=True):
            marginals[j] = _normalised(block)
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
        constraints = self.constraints
        is_free = np.zeros(len(self.domain), dtype=bool)
        is_free[free] = True
        free_in = [component[is_free[component]] for component in constraints.components]
        for _ in range(REJECTION_TRIES - 1):
            broken = constraints.broken_components(codes)[0]
            if not broken.any():
                return codes
            redraw = np.concatenate([free_in[c] for c in np.flatnonzero(broken)])
            codes[redraw] = self._draw(redraw, rng)
        if constraints.feasible(codes):
            return codes
        return constraints.repair(codes, reference, np.concatenate(free_in))

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
