r"""Per-record randomized response over the record domain, with unbiased estimators.

Mechanism E of the paper "minimax distortion of query-set-independent mechanisms" (our copy names no authors).

The paper (§IV-A, eq. (10)-(11)) releases a synthetic database ``Y`` whose rows are independent, row ``i``
drawn from ``P[Y_i = y] = e^{-ε·1[y ≠ x_i]} / g(ε)`` with ``g(ε) = 1 + (U - 1) e^{-ε}`` over the record
universe of size ``U``. It is ε-DP (Lemma 1): changing one row changes one factor of the product by at
most ``e^ε`` and leaves the normaliser unchanged. It is also ε-DP in the *local* model.

**Sampling without enumeration.** The row distribution equals: keep ``x_i`` with probability

    p = (1 - e^{-ε}) / (1 + (U - 1) e^{-ε}),

otherwise replace it by a record drawn uniformly from the whole universe (possibly ``x_i`` itself):
then ``P[Y_i = y ≠ x_i] = (1 - p)/U = e^{-ε}/g(ε)`` and ``P[Y_i = x_i] = p + (1 - p)/U = 1/g(ε)``.
A uniform record of a product universe is one independent uniform value per attribute, so the cost is
``O(n · m)`` whatever ``U`` is.

**Estimators.** For a counting query ``q(x) = (1/n) Σ_i φ(x_i)``, ``E[q(Y)] = p q(x) + (1 - p) C/U`` with
``C = |{v : φ(v) = 1}|``; the unbiased estimator (the paper's eq. (12), written with ``p``) is

    q̂ᵘ(Y) = (q(Y) - (1 - p) C/U) / p = g(ε) q(Y)/(1 - e^{-ε}) - e^{-ε} C/(1 - e^{-ε}),

and the *proper* estimator (eq. (14)) rounds it to the nearest possible answer, a multiple of ``1/n`` in
[0, 1]. For a k-way marginal query ``C/U`` is the product of ``1/|attribute|`` (the uniform baseline's
answer). The estimators' variance grows like ``1/(n p²)``: with ``U`` far above ``e^ε`` the answers are
useless although the sampler still runs.

**Exact sampling.** The keep decision is an exact Bernoulli(``p``) draw
(:func:`dq_engine.privacy.exact_sampling.bernoulli_real`: a uniform compared with rigorous rational bounds on ``p``,
computed from the integer ``U`` and correctly rounded decimal ``e^{-ε}``, refined until the comparison is
decided) and a replacement record is one exact uniform integer per attribute (``Generator.integers``); the
float ``p`` below is only reported and used by the estimators (post-processing).

**Size limit.** ``U`` enters the reported ``p`` in floating point from ``log2 U``; we refuse
``log2 U > 1000`` (``U e^{-ε}`` would overflow a double) with
:class:`~dq_engine.errors.UniverseTooLargeError`. The synthetic output ``E`` is the ``n`` randomized
records themselves; estimator answers are a separate function (:func:`estimate_answers`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dq_engine.data.answers import uniform_answers
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import Workload
from dq_engine.errors import ConfigError, UniverseTooLargeError
from dq_engine.privacy.accounting import PureDpEvent, mwem_costs
from dq_engine.privacy.exact_sampling import bernoulli_real, exp_interval
from dq_engine.privacy.grant import PrivacyGrant, require_grant
from dq_engine.results import SynthesisResult

__all__ = [
    "MAX_RR_UNIVERSE_LOG2",
    "RandomizedResponseConfig",
    "estimate_answers",
    "estimate_sd_bound",
    "keep_probability",
    "randomized_response",
]

MAX_RR_UNIVERSE_LOG2 = 1000.0
"""Largest universe (log2 of the number of records) for which ``p`` is computed."""


@dataclass(frozen=True, kw_only=True)
class RandomizedResponseConfig:
    """Parameters of mechanism E.

    Attributes:
        epsilon: Pure ε of the release (> 0).
        delta: δ used only to report the (never smaller) zCDP-converted cost next to the pure ε.
    """

    epsilon: float
    delta: float = 1e-6

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ConfigError(f"epsilon ({self.epsilon}) must be finite and > 0")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta ({self.delta}) must be in (0, 1)")


def _check_universe(domain: Domain) -> None:
    if domain.universe_log2 > MAX_RR_UNIVERSE_LOG2:
        raise UniverseTooLargeError(
            f"randomized response needs log2 of the universe size <= {MAX_RR_UNIVERSE_LOG2:g}; this domain has "
            f"{domain.universe_log2:.1f}; drop or coarsen attributes"
        )


def keep_probability(epsilon: float, domain: Domain) -> float:
    """``p = (1 - e^{-ε}) / (1 + (U - 1) e^{-ε})``, computed in log space (``U`` = universe size)."""
    _check_universe(domain)
    log_u = domain.universe_log2 * math.log(2.0)
    # (U - 1) e^{-ε} = e^{log U - ε} (1 - 1/U)
    spread = math.exp(log_u - epsilon) * -math.expm1(-log_u)
    return -math.expm1(-epsilon) / (1.0 + spread)


def _keep_probability_bounds(epsilon: float, domain: Domain) -> Callable[[int], tuple[Fraction, Fraction]]:
    """Rigorous rational bounds on ``p = (1 - e^{-ε}) / (1 + (U - 1) e^{-ε})`` (ε the exact float, ``U`` exact).

    ``p`` decreases in ``e^{-ε}`` (its derivative is ``-U / (1 + (U - 1)e^{-ε})²``), so bounds on ``e^{-ε}``
    give bounds on ``p`` with the ends swapped.
    """
    _check_universe(domain)
    universe = math.prod(int(size) for size in domain.sizes)
    exponent = -Fraction(epsilon)

    def bounds(digits: int) -> tuple[Fraction, Fraction]:
        low, high = exp_interval(exponent, digits)
        return (1 - high) / (1 + (universe - 1) * high), (1 - low) / (1 + (universe - 1) * low)

    return bounds


def estimate_sd_bound(epsilon: float, domain: Domain, n: int) -> float:
    """Largest standard deviation of the unbiased estimate ``q̂ᵘ`` of any counting query: ``1 / (2 p √n)``.

    ``q(Y)`` is the mean of ``n`` independent indicators, so its variance is at most ``1/(4n)``, and
    ``q̂ᵘ = (q(Y) - (1 - p) C/U) / p`` divides its deviation by ``p``. The bound depends on public
    quantities only (ε, the domain, ``n``), so it can decide whether a release is worth its budget before
    the data is read.

    Raises:
        UniverseTooLargeError: If ``log2 U > 1000``.
    """
    if n < 1:
        raise ConfigError(f"n ({n}) must be >= 1")
    return 1.0 / (2.0 * keep_probability(epsilon, domain) * math.sqrt(n))


def randomized_response(
    data: Dataset, config: RandomizedResponseConfig, *, grant: PrivacyGrant, rng: np.random.Generator
) -> SynthesisResult:
    """Release ``n`` randomized records (mechanism E), in random order.

    Args:
        data: Private dataset (codes layout or sparse binary).
        config: ε (and δ for reporting).
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator.

    Raises:
        UniverseTooLargeError: If ``log2 U > 1000``.
    """
    domain = data.domain
    p = keep_probability(config.epsilon, domain)
    events = [PureDpEvent(epsilon=config.epsilon, count=1, label="mechanism E: per-record randomized response")]
    require_grant(grant, mechanism="randomized response").spend(events, mechanism="randomized response")
    records = data.to_codes()
    replaced = np.flatnonzero(~bernoulli_real(_keep_probability_bounds(config.epsilon, domain), len(records), rng))
    records[replaced] = rng.integers(0, domain.sizes, size=(len(replaced), len(domain)))
    records = records[rng.permutation(records.shape[0])]
    return SynthesisResult(
        mechanism="randomized_response",
        domain=domain,
        records=records,
        parameters={"epsilon": config.epsilon, "keep_probability": p, "universe_log2": domain.universe_log2},
        events=tuple(events),
        costs=mwem_costs(events, config.delta),
        n=data.n,
    )


def estimate_answers(
    result: SynthesisResult, workload: Workload, *, proper: bool = False
) -> np.ndarray:
    """The paper's estimator answers of a workload from mechanism E's output.

    Args:
        result: Output of :func:`randomized_response` (its ``parameters["epsilon"]`` is used).
        workload: Counting queries (k-way marginal queries) over the same domain.
        proper: False for the unbiased estimator ``q̂ᵘ`` (eq. (12)); True for the proper estimator
            ``q̂`` (eq. (14)): ``q̂ᵘ`` rounded to the nearest multiple of ``1/n`` in [0, 1].

    Returns:
        One estimate per positive query, shape ``(N,)``.
    """
    if result.mechanism != "randomized_response":
        raise ConfigError(f"estimate_answers needs a randomized_response result, got {result.mechanism!r}")
    if result.domain != workload.domain:
        raise ConfigError("the result and the workload are over different domains")
    p = keep_probability(float(result.parameters["epsilon"]), workload.domain)
    observed = MarginalIndex(workload).answers(result.records)
    unbiased = (observed - (1.0 - p) * uniform_answers(workload)) / p
    if not proper:
        return unbiased
    n = result.records.shape[0]
    return np.clip(np.round(unbiased * n), 0, n) / n
