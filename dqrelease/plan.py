"""Planning a release's privacy cost from public quantities only.

A plan fixes every mechanism parameter and the privacy events the run will produce, *before* the private data
is read: the ledger is charged with the plan's cost in the config's accounting mode, then the mechanism runs.
Inputs are the release config, the public domain (from the schema) and the public number of records ``n``
(declared in the config, or a charged noisy count's conservative lower bound). Each mechanism's own rule lives
with the mechanism (:mod:`dqrelease.mechanisms`); this module supplies what every plan shares: the workload,
the mechanism's budget and the noisy count.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from fractions import Fraction
from typing import TYPE_CHECKING

from dqrelease.errors import ConfigInvalidError
from dqrelease.mechanisms import MechanismKeys, PlanInputs, ReleasePlan, plan_mechanism

if TYPE_CHECKING:
    import numpy as np

    from dq_engine.data.domain import Domain
    from dq_engine.data.workload import Workload
    from dq_engine.privacy.accounting import PureDpEvent
    from dqrelease.inputs.config import ReleaseConfig, WorkloadConfig, WorkloadPartConfig
    from dqrelease.mechanisms.utility import AccuracyTargets
    from dqrelease.memory_estimate import MemoryEstimate

__all__ = [
    "accuracy_targets",
    "build_workload",
    "check_release_memory",
    "check_release_utility",
    "count_event",
    "ledger_amounts",
    "mechanism_budget",
    "noisy_count_lower_bound",
    "plan_inputs",
    "plan_release",
    "planning_n",
    "release_memory",
]


def build_workload(settings: WorkloadConfig, domain: Domain) -> Workload:
    """Build the public workload (a seeded public generator; never the release seed).

    The one-part form draws from ``make_rng(seed)``; with ``[[workload.parts]]`` part ``i`` draws from the
    ``i``-th child spawned from it, and the parts are merged by
    :func:`~dq_engine.data.workload.concatenate_workloads` (each query once; the description lists every part's
    size, which ``dqrelease plan`` prints).

    Raises:
        ConfigInvalidError: If a part does not fit the domain.
    """
    from dq_engine.data.workload import concatenate_workloads
    from dq_engine.privacy.rng import make_rng, spawn

    rng = make_rng(settings.seed)
    if settings.parts is None:
        return _build_part(settings, domain, rng, where="workload")
    children = spawn(rng, len(settings.parts))
    parts = [
        _build_part(part, domain, child, where=f"workload.parts[{i}]")
        for i, (part, child) in enumerate(zip(settings.parts, children, strict=True))
    ]
    return concatenate_workloads(parts)


def _build_part(settings: WorkloadPartConfig, domain: Domain, rng: np.random.Generator, *, where: str) -> Workload:
    """One workload part from its config keys (``where`` names it in errors)."""
    from dq_engine.data.workload import (
        MAX_KWAY_MARGINALS,
        kway_marginals,
        marginal_queries,
        random_marginals,
        random_queries,
    )
    from dq_engine.errors import DQEngineError

    try:
        if settings.k > len(domain) and settings.kind != "explicit":
            raise ConfigInvalidError(
                f"{where}: k ({settings.k}) exceeds the schema's {len(domain)} columns; lower k or remove the part"
                + (" (the default workload needs 3 columns: give a [workload] section)" if settings.k == 3 else "")
            )
        if settings.kind == "random_marginals":
            available = math.comb(len(domain), settings.k)
            if settings.count >= available:  # every attribute set: no draw needed, and the description says so
                workload = kway_marginals(domain, settings.k, rng=rng, max_marginals=available)
                return dataclasses.replace(
                    workload, description=f"all {available:,} {settings.k}-way marginals ({settings.count:,} asked for)"
                )
            return random_marginals(domain, settings.k, settings.count, rng)
        if settings.kind == "random_queries":
            return random_queries(domain, settings.k, settings.count, rng)
        if settings.kind == "all_kway":
            limit = settings.max_marginals or MAX_KWAY_MARGINALS
            return kway_marginals(domain, settings.k, rng=rng, max_marginals=limit)
        return marginal_queries(domain, [tuple(m) for m in settings.marginals])
    except DQEngineError as error:
        raise ConfigInvalidError(f"{where}: {error}") from None


def noisy_count_lower_bound(noisy_count: float, *, epsilon: float, failure: float) -> int:
    """A lower bound on ``n`` from a Laplace(1/ε) count that holds with probability ``1 - failure``.

    ``P[Lap(1/ε) > t] = e^{-εt}/2``, so ``n >= n̂ - ln(1/(2·failure))/ε`` except with probability ``failure``.
    """
    return max(1, math.floor(noisy_count - math.log(1.0 / (2.0 * failure)) / epsilon))


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
    from dq_engine.privacy.accounting import PureDpEvent

    return PureDpEvent(epsilon=config.privacy.n_epsilon, count=1, label="noisy record count (Laplace)")


def planning_n(config: ReleaseConfig, noisy_count: float) -> int:
    """The ``n`` used in the sensitivity analysis after a noisy count.

    Under add/remove neighbours a query answer ``c/n`` moves by at most ``1/min(n, n')`` between
    neighbours, so the plan uses the count's lower bound minus one; it holds except with probability δ/2,
    which is charged with the count.
    """
    lower = noisy_count_lower_bound(noisy_count, epsilon=config.privacy.n_epsilon, failure=config.privacy.delta / 2)
    return max(1, lower - 1)


def plan_inputs(config: ReleaseConfig, *, n: int, workload: Workload) -> PlanInputs:
    """The public inputs of the configured mechanism's plan rule (:func:`plan_release`, the utility forecast)."""
    from dq_engine.privacy.public import PublicQuantities
    from dqrelease.inputs.schema import config_constraints

    epsilon, delta = mechanism_budget(config)
    return PlanInputs(
        public=PublicQuantities(
            n=n, epsilon=epsilon, delta=delta, domain=workload.domain, n_queries=len(workload),
            n_marginals=workload.n_marginals,
        ),
        mode=config.privacy.accounting,
        deterministic=config.run.seed_mode == "seeded",
        constraints=config_constraints(config),  # the schema's rules: a mechanism that cannot keep them is refused
        workload=workload,
    )


def check_release_utility(config: ReleaseConfig, plan: ReleasePlan, *, n: int, workload: Workload) -> None:
    """Refuse ``plan`` when its utility forecast is no better than a baseline or misses ``[accuracy]``.

    ``dqrelease run`` calls this before any data is read (declared ``n``) unless ``--accept-low-utility`` is given
    (:func:`dqrelease.mechanisms.dispatch.check_utility`; the forecast assumes ``output.rows`` published rows).

    Raises:
        ConfigInvalidError: One line with the failing figures and a mechanism and ε whose forecast passes.
    """
    from dqrelease.mechanisms.dispatch import check_utility

    epsilon, _ = mechanism_budget(config)
    offset = 0.0 if config.privacy.epsilon is None or epsilon is None else config.privacy.epsilon - epsilon
    check_utility(
        plan, plan_inputs(config, n=n, workload=workload), rows=config.output.rows or n, epsilon_offset=offset,
        keys=config.mechanism, targets=accuracy_targets(config),
    )


def release_memory(config: ReleaseConfig, plan: ReleasePlan, *, n: int, workload: Workload) -> MemoryEstimate:
    """The memory forecast of ``plan`` (:func:`dqrelease.memory_estimate.estimate_release_memory`)."""
    from dqrelease.memory_estimate import estimate_release_memory

    return estimate_release_memory(plan, n=n, domain=workload.domain, workload=workload, rows=config.output.rows or n,
                                   source_format=config.source.format)


def check_release_memory(config: ReleaseConfig, plan: ReleasePlan, *, n: int, workload: Workload) -> MemoryEstimate:
    """Refuse ``plan`` when its memory forecast exceeds the limit (``run.memory_limit_gib``); else return the forecast.

    ``dqrelease plan``, ``dqrelease run`` and the release flow call it before anything is read or charged (declared
    ``n``; with a noisy count, after the count and before the release's charge).

    Raises:
        ConfigInvalidError: One line with the forecast, the limit and the fixes whose forecast fits: the most particles
            of the table fit that fit, the mechanism without its fit, ``auto`` or independent columns, a higher limit.
    """
    from dqrelease.memory_estimate import GIB, memory_limit, shown_bytes

    estimate = release_memory(config, plan, n=n, workload=workload)
    limit = memory_limit(config.run.memory_limit_gib)
    if estimate.total <= limit.bytes:
        return estimate
    fixes = _memory_fixes(config, plan, estimate, n=n, workload=workload, limit=limit.bytes)
    needed = math.ceil(estimate.total / GIB)
    fixes.append(f"run.memory_limit_gib = {needed} on a machine with {shown_bytes(needed * GIB)} to spare")
    raise ConfigInvalidError(
        f"memory: the forecast of {plan.mechanism}{' with its table fit' if plan.fit is not None else ''} is "
        f"{estimate.shown()}, over the limit of {limit.shown()}; set {', or '.join(fixes)}"
    )


def _memory_fixes(
    config: ReleaseConfig, plan: ReleasePlan, estimate: MemoryEstimate, *, n: int, workload: Workload, limit: int
) -> list[str]:
    """Changes of the config whose memory forecast is within ``limit`` (each planned and forecast as it would run)."""
    from dq_engine.errors import DQEngineError
    from dqrelease.errors import ReleaseError
    from dqrelease.memory_estimate import shown_bytes

    keys = config.mechanism
    candidates: list[tuple[str, dict]] = []
    if plan.fit is not None and getattr(keys, "fit", None) is not None:
        particles = estimate.particles_within(limit) // 1000 * 1000
        candidates.append((f"mechanism.fit.particles = {particles}", {"fit": {"particles": particles}}))
        candidates.append(("mechanism.fit.enabled = false", {"fit": {"enabled": False}}))
    for name in ("auto", "independent"):
        if keys.name != name:
            candidates.append((f"mechanism.name = '{name}'", {"name": name}))
    inputs = plan_inputs(config, n=n, workload=workload)
    fixes = []
    for change, update in candidates:
        try:  # the keys as the config would give them (a particle count below the key's minimum is refused)
            candidate = _changed_keys(keys, update)
            planned = plan_mechanism(candidate, inputs)
        except (DQEngineError, ReleaseError, ValueError):
            continue
        forecast = release_memory(config, planned, n=n, workload=workload).total
        if forecast <= limit:
            chosen = f", it chooses {planned.mechanism}" if candidate.name == "auto" else ""
            fixes.append(f"{change} (forecast {shown_bytes(forecast)}{chosen})")
    return fixes


def _changed_keys(keys: MechanismKeys, update: dict) -> MechanismKeys:
    """``keys`` with ``update`` applied (a sub-section's keys merged), validated; another name: its default keys."""
    from dqrelease.mechanisms import MECHANISMS

    if update.get("name", keys.name) != keys.name:
        return MECHANISMS[update["name"]].keys()
    raw = keys.model_dump()
    for key, value in update.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) else value
    return type(keys).model_validate(raw)


def accuracy_targets(config: ReleaseConfig) -> AccuracyTargets:
    """The config's ``[accuracy]`` as the forecast's targets."""
    from dqrelease.mechanisms.utility import AccuracyTargets

    return AccuracyTargets(worst_one_way_cell=config.accuracy.worst_one_way_cell,
                           workload_max=config.accuracy.workload_max)


def plan_release(config: ReleaseConfig, *, n: int, workload: Workload) -> ReleasePlan:
    """Plan the configured mechanism for ``n`` records within :func:`mechanism_budget`.

    Args:
        config: The validated release config.
        n: Public number of records (declared, or :func:`planning_n` of a noisy count).
        workload: The public workload (its domain and size shape the parameter rules).

    Raises:
        ConfigInvalidError: If the parameters cannot meet the target or are inconsistent, or the mechanism
            cannot run on the domain (MWEM's universe limit, randomized response's estimator noise) or cannot keep
            the schema's rules.
    """
    from dq_engine.errors import AccountingError, DQEngineError

    inputs = plan_inputs(config, n=n, workload=workload)
    key = _plan_key(config, inputs)
    if key not in _PLANS:
        try:
            plan = plan_mechanism(config.mechanism, inputs)
        except AccountingError as error:
            raise ConfigInvalidError(f"privacy: {error}") from None
        except DQEngineError as error:
            raise ConfigInvalidError(f"mechanism: {error}") from None
        while len(_PLANS) >= _PLANS_KEPT:
            del _PLANS[next(iter(_PLANS))]
        _PLANS[key] = plan
    return copy.deepcopy(_PLANS[key])  # callers may change their copy


_PLANS: dict[tuple, ReleasePlan] = {}
"""Plans already made in this process, by :func:`_plan_key` (``dqrelease run`` plans before Prefect starts to
refuse early, then the flow plans, then the grant checks the plan: the same work three times otherwise)."""

_PLANS_KEPT = 16


def _plan_key(config: ReleaseConfig, inputs: PlanInputs) -> tuple:
    """Everything a plan rule reads: the mechanism's keys and the public inputs, the workload by content."""
    workload = inputs.workload
    digest = hashlib.sha256()
    if workload is not None:
        digest.update(repr((workload.domain, workload.description)).encode())
        arrays = [workload.marginals, workload.query_marginal, workload.query_values]
        for part in workload.parts:
            digest.update(repr((part.description, part.n_marginals)).encode())
            arrays.append(part.positions)
        for array in arrays:
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
    return (
        config.mechanism.model_dump_json(), inputs.public, inputs.mode, inputs.deterministic, inputs.constraints,
        digest.hexdigest(),
    )


def ledger_amounts(plan: ReleasePlan) -> tuple[Fraction, Fraction, Fraction | None]:
    """The plan's charge as exact ledger amounts ``(ε, δ, ρ)``, never below the exact cost.

    * A pure cost that is the basic composition of the plan's events is that sum, exactly
      (:func:`~dq_engine.privacy.accounting.basic_composition_exact`: each event's ε as the exact value of its
      float), so a pure release whose ε equals the cap fits it;
    * any other ε, and ρ, are the accounting's floats, which are already rounded outward (exact sums rounded up,
      conversions raised by a stated margin: :mod:`dq_engine.privacy.accounting`), charged one float step
      higher still (:func:`~dq_engine.privacy.accounting.rounded_up`);
    * δ is the analysis' input (the configured δ or its share), not a computed value: exact.
    """
    from dq_engine.privacy.accounting import ZCDPEvent, basic_composition_epsilon, basic_composition_exact, rounded_up

    cost = plan.charged
    is_basic_composition = (
        cost.delta == 0 and cost.pure_epsilon is not None and cost.epsilon == cost.pure_epsilon
        and not any(isinstance(event, ZCDPEvent) and event.count and event.rho for event in plan.events)
        and basic_composition_epsilon(list(plan.events)) == cost.epsilon
    )
    epsilon = basic_composition_exact(list(plan.events)) if is_basic_composition else rounded_up(cost.epsilon)
    return epsilon, Fraction(cost.delta), rounded_up(cost.rho)

