"""Planning a release's privacy cost from public quantities only.

A plan fixes every mechanism parameter (η, s, T, oracle settings, ...) and the privacy events the run
will produce, *before* the private data is read: the ledger is charged with the plan's cost in the
config's accounting mode, then the mechanism runs. Inputs are the release config, the public domain
(from the schema) and the public number of records ``n`` (declared in the config, or a charged noisy
count's conservative lower bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dq_engine import (
    ComposedCost,
    Domain,
    DQRSConfig,
    DualQueryConfig,
    OracleConfig,
    PrivacyEvent,
    PureDpEvent,
    Workload,
    all_kway_marginals,
    calibrate_rounds,
    compose,
    make_rng,
    marginal_queries,
    random_marginals,
    random_queries,
)
from dq_engine.calibration import mechanism_events
from dq_engine.errors import AccountingError, DQEngineError
from dqrelease.config import ReleaseConfig, WorkloadConfig
from dqrelease.errors import ConfigInvalidError

__all__ = [
    "ReleasePlan",
    "build_workload",
    "count_event",
    "mechanism_budget",
    "noisy_count_lower_bound",
    "oracle_config",
    "oracle_parameters",
    "plan_release",
    "planning_n",
]


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    """Everything decided before the mechanism touches the data.

    Attributes:
        mechanism: Mechanism name.
        n: Number of records the sensitivity analysis uses.
        engine_config: The dq_engine configuration object to run.
        parameters: Public parameters (JSON-friendly).
        events: Privacy events of the mechanism (plus any noisy-count event).
        costs: Cost in each accounting mode.
        mode: The accounting mode charged to the ledger.
    """

    mechanism: str
    n: int
    engine_config: Any
    parameters: dict[str, Any]
    events: tuple[PrivacyEvent, ...]
    costs: dict[str, ComposedCost]
    mode: str
    notes: list[str] = field(default_factory=list)

    @property
    def progress_rounds(self) -> int:
        """Rounds the mechanism reports progress for (FEM's data player plays ``T + 1`` times; RR has none)."""
        rounds = int(self.parameters.get("rounds", 1))
        return rounds + 1 if self.mechanism in ("fem", "sepfem") else rounds

    @property
    def charged(self) -> ComposedCost:
        """The cost charged to the ledger (in the config's accounting mode)."""
        return self.costs[self.mode]

    def as_dict(self) -> dict[str, Any]:
        """Public, JSON-friendly view of the plan."""
        return {
            "mechanism": self.mechanism,
            "n": self.n,
            "parameters": self.parameters,
            "accounting_mode": self.mode,
            "costs": {mode: cost.as_dict() for mode, cost in self.costs.items()},
            "events": [
                {"type": type(e).__name__, "label": e.label, "count": e.count,
                 **{k: getattr(e, k) for k in ("epsilon", "rho") if hasattr(e, k)}}
                for e in self.events
            ],
            "notes": list(self.notes),
        }


def build_workload(settings: WorkloadConfig, domain: Domain) -> Workload:
    """Build the public workload (a seeded public generator; never the release seed).

    Raises:
        ConfigInvalidError: If the workload does not fit the domain.
    """
    rng = make_rng(settings.seed)
    try:
        if settings.kind == "random_marginals":
            return random_marginals(domain, settings.k, settings.count, rng)
        if settings.kind == "random_queries":
            return random_queries(domain, settings.k, settings.count, rng)
        if settings.kind == "all_kway":
            return all_kway_marginals(domain, settings.k)
        return marginal_queries(domain, [tuple(m) for m in settings.marginals])
    except DQEngineError as error:
        raise ConfigInvalidError(f"workload: {error}") from None


def noisy_count_lower_bound(noisy_count: float, *, epsilon: float, failure: float) -> int:
    """A lower bound on ``n`` from a Laplace(1/ε) count that holds with probability ``1 - failure``.

    ``P[Lap(1/ε) > t] = e^{-εt}/2``, so ``n >= n̂ - ln(1/(2·failure))/ε`` except with probability ``failure``.
    """
    return max(1, math.floor(noisy_count - math.log(1.0 / (2.0 * failure)) / epsilon))


def oracle_config(config: ReleaseConfig) -> OracleConfig:
    """The engine's oracle settings from ``[mechanism.oracle]`` (deterministic in seeded runs)."""
    settings = config.mechanism.oracle
    return OracleConfig(
        kind=settings.kind,
        time_limit=settings.time_limit,
        num_workers=settings.num_workers,
        deterministic=config.run.seed_mode == "seeded",
        deterministic_time_limit=settings.deterministic_time_limit,
        max_presolve_iterations=settings.max_presolve_iterations,
        local_time_limit=settings.local_time_limit,
        local_restarts=settings.local_restarts,
        fallback=settings.fallback,
    )


def oracle_parameters(oracle: OracleConfig) -> dict[str, Any]:
    """The oracle settings as JSON-friendly plan parameters."""
    keys = ("kind", "time_limit", "num_workers", "deterministic", "deterministic_time_limit",
            "max_presolve_iterations", "local_time_limit", "local_restarts", "fallback")
    return {k: getattr(oracle, k) for k in keys}


def mechanism_budget(config: ReleaseConfig) -> tuple[float | None, float]:
    """The (ε, δ) the mechanism itself may spend.

    With a declared public ``n`` that is the whole target. With ``n = "noisy"`` the noisy count takes
    ``n_epsilon`` and half of δ (the probability that its lower bound fails), the mechanism the rest; the
    ledger composes the two charges by basic composition.
    """
    privacy = config.privacy
    if privacy.n != "noisy":
        return privacy.epsilon, privacy.delta
    epsilon = None if privacy.epsilon is None else privacy.epsilon - privacy.n_epsilon
    return epsilon, privacy.delta / 2


def count_event(config: ReleaseConfig) -> PureDpEvent:
    """The noisy record count's event (Laplace with sensitivity 1 under add/remove neighbours)."""
    return PureDpEvent(epsilon=config.privacy.n_epsilon, count=1, label="noisy record count (Laplace)")


def planning_n(config: ReleaseConfig, noisy_count: float) -> int:
    """The ``n`` used in the sensitivity analysis after a noisy count.

    Under add/remove neighbours a query answer ``c/n`` moves by at most ``1/min(n, n')`` between
    neighbours, so the plan uses the count's lower bound minus one; it holds except with probability δ/2,
    which is charged with the count.
    """
    lower = noisy_count_lower_bound(noisy_count, epsilon=config.privacy.n_epsilon, failure=config.privacy.delta / 2)
    return max(1, lower - 1)


def _plan_dual_family(config: ReleaseConfig, n: int) -> ReleasePlan:
    m = config.mechanism
    target_epsilon, delta = mechanism_budget(config)
    mode = config.privacy.accounting
    analysis = "advanced_composition" if m.name == "dualquery" else "zcdp"
    common = {"eta": m.eta, "samples": m.samples, "n": n, "free_epsilon": m.free_epsilon, "free_rho": m.free_rho}
    if m.name == "dqrs":
        common["topup_fraction"] = m.topup_fraction

    def total(rounds: int) -> dict[str, ComposedCost]:
        events = mechanism_events(m.name, rounds=rounds, **common)
        return {
            "paper": compose(events, mode="paper", delta=delta, paper_analysis=analysis),
            "tight": compose(events, mode="tight", delta=delta),
        }

    notes = []
    try:
        if m.rounds is not None:
            rounds = m.rounds
            if target_epsilon is not None and total(rounds)[mode].epsilon > target_epsilon:
                raise ConfigInvalidError(
                    f"mechanism.rounds = {rounds} costs epsilon {total(rounds)[mode].epsilon:.4g} > "
                    f"the mechanism's budget {target_epsilon:.4g} ({mode} accounting); lower rounds or omit it"
                )
        else:
            rounds = calibrate_rounds(
                m.name, epsilon=target_epsilon, delta=delta, eta=m.eta, samples=m.samples, n=n, mode=mode,
                topup_fraction=m.topup_fraction, free_epsilon=m.free_epsilon, free_rho=m.free_rho,
            )
            notes.append(f"T = {rounds} is the largest number of rounds within epsilon = {target_epsilon:.4g}")
    except AccountingError as error:
        raise ConfigInvalidError(f"privacy: {error}") from None
    costs = total(rounds)
    shared = {
        "eta": m.eta, "samples": m.samples, "rounds": rounds, "delta": delta,
        "free_policy": m.free_policy, "free_epsilon": m.free_epsilon, "free_noise": m.free_noise,
        "free_rho": m.free_rho, "rows_per_round": m.rows_per_round, "free_scope": m.free_scope,
        "oracle": oracle_config(config),
    }
    engine_config = DQRSConfig(topup_fraction=m.topup_fraction, **shared) if m.name == "dqrs" else DualQueryConfig(
        **shared
    )
    events = tuple(mechanism_events(m.name, rounds=rounds, **common))
    parameters = {k: v for k, v in shared.items() if k != "oracle"}
    parameters["oracle"] = oracle_parameters(engine_config.oracle)
    if m.name == "dqrs":
        parameters["topup_fraction"] = m.topup_fraction
    return ReleasePlan(
        mechanism=m.name, n=n, engine_config=engine_config, parameters=parameters, events=events,
        costs=costs, mode=mode, notes=notes,
    )


def plan_release(config: ReleaseConfig, *, n: int, workload: Workload) -> ReleasePlan:
    """Plan the mechanism run for ``n`` records within :func:`mechanism_budget`.

    Args:
        config: The validated release config.
        n: Public number of records (declared, or :func:`planning_n` of a noisy count).
        workload: The public workload (its domain and size shape the parameter rules of FEM and MWEM).

    Raises:
        ConfigInvalidError: If the parameters cannot meet the target or are inconsistent, or the mechanism
            cannot run on the domain (MWEM's universe limit, randomized response's estimator noise).
    """
    if config.mechanism.name in ("dualquery", "dqrs"):
        return _plan_dual_family(config, n)
    from dqrelease.mechanisms import plan_other_mechanism

    return plan_other_mechanism(config, n, workload)
