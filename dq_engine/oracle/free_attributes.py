"""Policies for *free* attributes: those no sampled query touches (DualQuery paper §6.4).

* ``zero`` -- binary attributes 0 (the paper's choice for sparse real data); a categorical attribute
  takes its first value (code 0) so that the record stays valid.
* ``random`` -- uniform over the attribute's values (the paper's choice for dense synthetic data).
* ``dp-marginal`` -- a value drawn from a *noisy* one-way marginal of the attribute (the principled variant
  the paper's footnote 6 suggests). The noisy marginals are measured once per run with the Laplace
  mechanism; their cost is a privacy event charged like any other (see :func:`noisy_one_way_marginals`).

The policy only fills attributes the oracle leaves unconstrained, so it never changes the objective.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from dq_engine.accounting import PureDpEvent
from dq_engine.data import Dataset
from dq_engine.domain import Domain
from dq_engine.errors import ConfigError

__all__ = ["FreeAttributeFiller", "FreePolicy", "noisy_one_way_marginals"]

FreePolicy = Literal["zero", "random", "dp-marginal"]


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


class FreeAttributeFiller:
    """Fills free attributes of a best response according to a policy.

    Args:
        domain: Public domain.
        policy: ``"zero"``, ``"random"`` or ``"dp-marginal"``.
        marginals: Noisy one-way marginals (required for ``"dp-marginal"``).
    """

    def __init__(self, domain: Domain, policy: FreePolicy, marginals: list[np.ndarray] | None = None) -> None:
        if policy not in ("zero", "random", "dp-marginal"):
            raise ConfigError(f"free-attribute policy ({policy!r}) must be 'zero', 'random' or 'dp-marginal'")
        if policy == "dp-marginal" and marginals is None:
            raise ConfigError("the dp-marginal policy needs noisy one-way marginals")
        self.domain = domain
        self.policy = policy
        if marginals is not None:
            self._cumulative = [np.cumsum(p) for p in marginals]

    def fill(self, codes: np.ndarray, free: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Return ``codes`` with the attributes listed in ``free`` set by the policy."""
        codes = codes.copy()
        if len(free) == 0:
            return codes
        if self.policy == "zero":
            codes[free] = 0
        elif self.policy == "random":
            codes[free] = (rng.random(len(free)) * self.domain.sizes[free]).astype(np.int64)
        else:
            draws = rng.random(len(free))
            for attribute, u in zip(free, draws, strict=True):
                cumulative = self._cumulative[attribute]
                codes[attribute] = min(int(np.searchsorted(cumulative, u * cumulative[-1], side="right")),
                                       len(cumulative) - 1)
        return codes
