"""DQRS: DualQuery with rejection sampling.

Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release",
Algorithm 4.

Round ``t`` best-responds to the sample set ``S_t`` exactly like DualQuery, then builds ``S_{t+1}``:

1. every carried sample ``q ∈ S_t`` is kept with probability
   ``Q̂^{t+1}_q / Q^t_q = e^{-η-γ_t} exp(η A(x^t, q))`` where ``A(x, q) = q(D) - q(x)`` (our sign
   convention, :mod:`dq_engine.privacy.mw`; the paper writes ``exp(-η A_D)`` with ``A_D = q(x) - q(D)``), and
   ``γ_t = 1/(2 t^{2/3})``; by Lemma 20 each kept sample is distributed as ``Q^{t+1}``;
2. ``s̃_t = ⌈(2γ_t + 4η) s⌉`` fresh samples are drawn from ``Q^{t+1}``; when ``2γ_t + 4η >= 1`` (always for
   ``η >= 1/4``) that would be at least DualQuery's ``s`` plus the rejection step's cost, so such a round draws
   ``s`` fresh samples from ``Q^{t+1}`` and rejects nothing, exactly like DualQuery
   (:func:`dq_engine.privacy.theorems.dqrs_rejects`);
3. **top-up** (the case the paper leaves open): if fewer than ``s`` samples are in the pool, up to
   ``r_t = ⌈f s̃_t⌉`` further fresh samples are drawn from ``Q^{t+1}``; the ``r_t`` reserved draws are
   charged in every round whether used or not, so the budget is fixed before the run; if even the reserve
   does not suffice (probability at most ``(e/4)^{s̃_t}``, Lemma 21) the round proceeds with fewer than ``s``
   samples and is counted as *short* (privacy is unaffected; only accuracy may suffer);
4. if the pool holds more than ``s`` samples, a uniformly random subset of ``s`` is kept.

Every pool element is an independent draw from ``Q^{t+1}`` and the subset choice is independent of the
values, so ``S_{t+1}`` is ``|S_{t+1}|`` i.i.d. samples of ``Q^{t+1}`` (tested with a chi-square test).

Privacy: :func:`dq_engine.privacy.theorems.dqrs_events` (proof of Theorem 17), reported in zCDP as the
paper does (paper mode) and with the tight analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload
from dq_engine.errors import ConfigError
from dq_engine.mechanisms.dualquery import DualQueryConfig, ProgressCallback, RoundLoop
from dq_engine.oracle import FreeNoise, FreePolicy, FreeScope, OracleConfig
from dq_engine.privacy.exact_sampling import bernoulli_exp
from dq_engine.privacy.grant import PrivacyGrant
from dq_engine.privacy.mw import QueryDistribution, SampledQueries
from dq_engine.privacy.theorems import dqrs_fresh_samples, dqrs_gamma, dqrs_rejects, dqrs_topup_reserve
from dq_engine.results import SynthesisResult

__all__ = ["DQRSConfig", "dqrs", "resample"]


@dataclass(frozen=True, kw_only=True)
class DQRSConfig:
    """Parameters of DQRS.

    Attributes:
        eta: MW learning rate η > 0.
        samples: Target sample-set size ``s``.
        rounds: Number of rounds ``T``.
        topup_fraction: Reserve ``f`` in [0, 1]: up to ``⌈f s̃_t⌉`` extra fresh draws per round, always charged.
        delta: δ for reporting (ε, δ) costs.
        free_policy: Free-attribute policy.
        free_epsilon: Pure ε of the Laplace one-way marginals (``dp-marginal`` with ``laplace`` noise only).
        free_noise: ``laplace`` (default) or ``gaussian`` noise on the ``dp-marginal`` one-way marginals.
        free_rho: zCDP ρ of the Gaussian one-way marginals (``dp-marginal`` with ``gaussian`` noise only).
        rows_per_round: Rows published per round (see :class:`dq_engine.mechanisms.dualquery.DualQueryConfig`).
        free_scope: ``untouched`` or ``slack`` (see :class:`dq_engine.mechanisms.dualquery.DualQueryConfig`).
        oracle: Oracle settings.
        track_error: Record internal error-so-far per round.
    """

    eta: float
    samples: int
    rounds: int
    topup_fraction: float = 0.25
    delta: float = 1e-6
    free_policy: FreePolicy = "random"
    free_epsilon: float = 0.0
    free_noise: FreeNoise = "laplace"
    free_rho: float = 0.0
    rows_per_round: int = 1
    free_scope: FreeScope = "untouched"
    oracle: OracleConfig = field(default_factory=OracleConfig)
    track_error: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.topup_fraction <= 1:
            raise ConfigError(f"topup_fraction ({self.topup_fraction}) must be in [0, 1]")
        self.as_dualquery()  # validates the shared fields

    def as_dualquery(self) -> DualQueryConfig:
        """The shared round settings, as a DualQuery configuration."""
        return DualQueryConfig(
            eta=self.eta, samples=self.samples, rounds=self.rounds, delta=self.delta,
            free_policy=self.free_policy, free_epsilon=self.free_epsilon, free_noise=self.free_noise,
            free_rho=self.free_rho, rows_per_round=self.rows_per_round,
            free_scope=self.free_scope, oracle=self.oracle,
            track_error=self.track_error,
        )


def resample(
    carried: SampledQueries,
    payoff: np.ndarray,
    following: QueryDistribution,
    *,
    eta: float,
    gamma: float,
    fresh: int,
    reserve: int,
    target: int,
    rng: np.random.Generator,
) -> tuple[SampledQueries, dict[str, float]]:
    """Build ``S_{t+1}`` from ``S_t`` (steps 1-4 of the module docstring).

    Args:
        carried: ``S_t``.
        payoff: ``q(D) - q(x^t)`` for every positive query (a negation's payoff is the opposite).
        following: ``Q^{t+1}`` (already updated with ``payoff``).
        eta: η.
        gamma: γ_t.
        fresh: ``s̃_t``.
        reserve: ``r_t``, the most top-up draws allowed.
        target: ``s``.
        rng: Generator.

    Returns:
        The new sample set and public counters (accepted, fresh, top-up used, short).
    """
    signed_payoff = np.where(carried.negated, -payoff[carried.index], payoff[carried.index])
    # exact Bernoulli(exp(-η - γ + η·payoff)) per carried draw (dq_engine.privacy.exact_sampling), not a float
    # comparison
    log_accept = np.minimum(-eta - gamma + eta * signed_payoff, 0.0)  # ≤ -γ ≤ 0 up to float rounding
    kept = carried.take(np.nonzero(bernoulli_exp(log_accept, rng))[0])
    pool = kept.concat(following.sample(fresh, rng))
    topup = min(max(0, target - len(pool)), reserve)
    if topup:
        pool = pool.concat(following.sample(topup, rng))
    short = len(pool) < target
    if len(pool) > target:
        pool = pool.take(np.sort(rng.choice(len(pool), size=target, replace=False)))
    counters = {"accepted": float(len(kept)), "fresh": float(fresh), "topup": float(topup), "short": float(short)}
    return pool, counters


def dqrs(
    data: Dataset,
    workload: Workload,
    config: DQRSConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    true_answers: np.ndarray | None = None,
    constraints: Constraints | None = None,
) -> SynthesisResult:
    """Run DQRS (Vietri et al. 2020, Algorithm 4) and return the ``T`` best responses.

    Args:
        data: Private dataset.
        workload: Positive queries (closed under negation internally).
        config: Parameters.
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator.
        progress: Called after every round with its diagnostics.
        true_answers: Precomputed exact answers of the workload (optional).
        constraints: Public rules; every published row keeps them (None: no rules).
    """
    shared = config.as_dualquery()
    loop = RoundLoop(
        data, workload, shared, rng, true_answers, constraints=constraints, grant=grant, mechanism="dqrs",
        topup_fraction=config.topup_fraction,
    )
    samples = loop.distribution.sample(config.samples, rng)  # S_1 from the uniform Q^1: free
    extra: dict[str, float] = {}
    for t in range(1, config.rounds + 1):
        loop.play(t, samples, extra)
        if progress is not None:
            progress(loop.diagnostics[-1])
        if t == config.rounds:
            break
        if not dqrs_rejects(config.eta, t):  # 2γ_t + 4η >= 1: a DualQuery step (never more fresh draws than s)
            samples = loop.distribution.sample(config.samples, rng)
            extra = {"accepted": 0.0, "fresh": float(config.samples), "topup": 0.0, "short": 0.0}
            continue
        samples, extra = resample(
            samples,
            loop.last_payoff,
            loop.distribution,
            eta=config.eta,
            gamma=dqrs_gamma(t),
            fresh=dqrs_fresh_samples(config.eta, config.samples, t),
            reserve=dqrs_topup_reserve(config.eta, config.samples, t, config.topup_fraction),
            target=config.samples,
            rng=rng,
        )
    return loop.result("dqrs", loop.events, paper_analysis="zcdp", topup_fraction=config.topup_fraction)
