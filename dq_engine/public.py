"""The public quantities a parameter rule may look at, and the largest zCDP ρ within a target (ε, δ).

A rule (:mod:`dq_engine.defaults`, the pipeline's plan rules) may look at :class:`PublicQuantities` only: the
public ``n``, the target (ε, δ), the domain, the number of queries ``N`` and of marginals ``M``; never at the data.
"""

from __future__ import annotations

from dataclasses import dataclass

from dq_engine.accounting import approx_dp_from_zcdp
from dq_engine.domain import Domain
from dq_engine.errors import ConfigError

__all__ = ["PublicQuantities", "largest_rho"]


@dataclass(frozen=True, kw_only=True)
class PublicQuantities:
    """Everything a rule may look at: no private value.

    Attributes:
        n: Public number of records (the sensitivity analysis's ``n``).
        epsilon: Target ε of the mechanism, or None when every budget parameter is given explicitly.
        delta: Target δ, in (0, 1).
        domain: Public domain.
        n_queries: Number of positive workload queries ``N``.
        n_marginals: Number of workload marginals ``M``.
    """

    n: int
    epsilon: float | None
    delta: float
    domain: Domain
    n_queries: int
    n_marginals: int

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"n ({self.n}) must be >= 1")
        if self.epsilon is not None and not self.epsilon > 0:
            raise ConfigError(f"epsilon ({self.epsilon}) must be > 0")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta ({self.delta}) must be in (0, 1)")
        if self.n_queries < 1 or self.n_marginals < 1:
            raise ConfigError("the workload must have at least one query and one marginal")

    @property
    def rho(self) -> float:
        """Largest zCDP ρ whose optimal (ε, δ) conversion is within the target (:func:`largest_rho`)."""
        if self.epsilon is None:
            raise ConfigError("this rule needs a target epsilon")
        return largest_rho(self.epsilon, self.delta)


def largest_rho(epsilon: float, delta: float) -> float:
    """Largest ρ with ``approx_dp_from_zcdp(ρ, δ) <= ε`` (80 bisection steps on [0, ε], exact check)."""
    low, high = 0.0, float(epsilon)
    for _ in range(80):
        middle = 0.5 * (low + high)
        if approx_dp_from_zcdp(middle, delta) <= epsilon:
            low = middle
        else:
            high = middle
    return low
