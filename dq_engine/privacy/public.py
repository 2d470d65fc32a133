"""The public quantities a parameter rule may look at, and the largest zCDP ρ within a target (ε, δ).

A rule (:mod:`dq_engine.mechanisms.defaults`, the pipeline's plan rules) may look at :class:`PublicQuantities` only: the
public ``n``, the target (ε, δ), the domain, the number of queries ``N`` and of marginals ``M``; never at the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dq_engine.data.domain import Domain
from dq_engine.errors import ConfigError
from dq_engine.privacy.accounting import approx_dp_from_zcdp, zcdp_from_approx_dp_simple

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
    """Largest ρ with ``approx_dp_from_zcdp(ρ, δ) <= ε``: 80 bisection steps on ``[0, ε]``, exact check.

    The result is the plain bisection's, bit for bit; only the number of conversions (each a numeric search in
    OpenDP, a few milliseconds) is smaller, about 13 instead of 55. The conversion grows with ρ, so a step
    whose midpoint is at most a ρ already checked to fit, or at least one checked not to, needs no conversion:
    :func:`_bracket` first finds two such ρ a float apart (false position from the simple conversion's ρ,
    which always fits), and the bisection converts only midpoints between them.
    """
    epsilon = float(epsilon)
    fits, too_large = _bracket(epsilon, delta)
    low, high = 0.0, epsilon
    for _ in range(80):
        middle = 0.5 * (low + high)
        if middle <= fits or (middle < too_large and approx_dp_from_zcdp(middle, delta) <= epsilon):
            low = middle
        else:
            high = middle
    return low


_BRACKET_STEPS = 60
"""Most conversions :func:`_bracket` makes (it usually needs 10-16)."""


def _bracket(epsilon: float, delta: float) -> tuple[float, float]:
    """A ρ that fits within ``epsilon`` and one that does not (``inf`` when ρ = ε fits), close together.

    False position with the Illinois modification on ``g(ρ) = approx_dp_from_zcdp(ρ, δ) - ε``, started from
    ``[ρ_simple, ε]`` where ``ρ_simple`` solves ``ρ + 2√(ρ ln(1/δ)) = ε`` (the simple conversion bounds the
    optimal one from above, so it fits; checked anyway). Once ``g`` is exactly 0 the next float up is tried.
    """
    low = zcdp_from_approx_dp_simple(epsilon, delta)
    g_low = approx_dp_from_zcdp(low, delta) - epsilon
    if g_low > 0:
        low, g_low = 0.0, -epsilon
    high = epsilon
    g_high = approx_dp_from_zcdp(high, delta) - epsilon
    if g_high <= 0:
        return high, math.inf
    side = 0
    for _ in range(_BRACKET_STEPS):
        if math.nextafter(low, math.inf) >= high:
            break
        if g_low == 0.0:
            x = math.nextafter(low, math.inf)
        else:
            x = (low * g_high - high * g_low) / (g_high - g_low)
            if not low < x < high:
                x = 0.5 * (low + high)
        g = approx_dp_from_zcdp(x, delta) - epsilon
        if g <= 0:
            low, g_low = x, g
            if side == -1:
                g_high /= 2
            side = -1
        else:
            high, g_high = x, g
            if side == 1:
                g_low /= 2
            side = 1
    return low, high
