"""Plan or run a registered mechanism by name, and the advice a refused plan gives.

:func:`plan_mechanism` and :func:`run_mechanism` are what ``dqrelease plan`` and ``dqrelease run`` (through the
grant of :mod:`dqrelease.ledger.grants`) call. A refusal -- a mechanism that cannot keep the schema's rules, a domain
too large for it, a forecast no better than publishing zeros or uniform data (:func:`check_utility`) -- names what
would pass through :func:`recommendation`: a mechanism and an ε whose forecast passes (:func:`passing_alternative`:
the smallest ε of :data:`~dqrelease.mechanisms.utility.EPSILON_GRID` at or above the configured one at which a
registered mechanism, tried in :func:`~dqrelease.mechanisms.choice.preference` order, passes). So no refusal
recommends a mechanism that the forecast would refuse in turn. Planning and advising call each other (an advice
plans candidates; a candidate's refusal asks for advice), so they live in one module.
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

from dq_engine.errors import DQEngineError
from dqrelease.errors import ConfigInvalidError, ReleaseError, UnchargedRunError
from dqrelease.mechanisms.base import MechanismGrant, MechanismKeys, PlanInputs, ReleasePlan, RunInputs
from dqrelease.mechanisms.choice import preference
from dqrelease.mechanisms.fit import plan_with_fit, run_fit
from dqrelease.mechanisms.registry import MECHANISMS, mechanism
from dqrelease.mechanisms.utility import (
    ACCEPT_FLAG,
    EPSILON_GRID,
    AccuracyTargets,
    Alternative,
    assess_plan,
    fit_passes,
    forecast_plan,
    forecast_shape,
    plan_epsilon,
)

__all__ = [
    "TARGET_EPSILON_RANGE",
    "check_utility",
    "passing_alternative",
    "plan_mechanism",
    "recommendation",
    "run_mechanism",
    "smallest_epsilon",
]

TARGET_EPSILON_RANGE = (1e-3, 64.0)
"""The ε :func:`smallest_epsilon` searches (a target no ε up to 64 meets is reported as such)."""

_SEARCHING: contextvars.ContextVar[bool] = contextvars.ContextVar("dqrelease_alternative_search", default=False)
"""True while :func:`passing_alternative` plans candidates: their own refusals then do not search again."""


def plan_mechanism(keys: MechanismKeys, inputs: PlanInputs) -> ReleasePlan:
    """Plan ``keys.name`` from public quantities only (engine errors propagate; callers name the section).

    Raises:
        ConfigInvalidError: The schema has rules and the mechanism cannot enforce them (names those that can).
    """
    chosen = mechanism(keys.name)
    constraints = inputs.constraints if inputs.constraints is not None and len(inputs.constraints) else None
    if constraints is not None and not chosen.enforces_constraints:
        raise ConfigInvalidError(
            f"mechanism {chosen.name!r} cannot keep the schema's rules ({', '.join(constraints.rule_names)}): it "
            f"would publish records that break them; use {recommendation(inputs, exclude=(chosen.name,))}, or "
            "remove the rules"
        )
    fit = getattr(keys, "fit", None)
    planned = plan_with_fit(chosen.plan, keys, inputs) if fit is not None and fit.enabled else chosen.plan(keys, inputs)
    return dataclasses.replace(planned, constraints=constraints)


def run_mechanism(grant: MechanismGrant, inputs: RunInputs) -> Any:
    """Run the plan a grant allows on the private data; returns its ``SynthesisResult``.

    The engine spends the plan's events on ``grant.privacy`` (the charged amounts) before it reads the data, so
    the grant pays for one run of its plan (a second run finds the budget spent). The plan's public rules reach
    the engine through :attr:`RunInputs.constraints` (unless the inputs carry them).

    Raises:
        UnchargedRunError: ``grant`` is not a :class:`MechanismGrant` (e.g. a bare plan).
    """
    if not isinstance(grant, MechanismGrant):
        raise UnchargedRunError(
            f"a mechanism runs on private data only with a MechanismGrant, not {type(grant).__name__}: one is issued "
            "after a ledger charge (dqrelease.ledger.grants.grant_after_charge) or for a checked replay"
        )
    plan = grant.plan
    inputs = dataclasses.replace(inputs, grant=grant.privacy)
    if inputs.constraints is None and plan.constraints is not None:
        inputs = dataclasses.replace(inputs, constraints=plan.constraints)
    return run_fit(plan, inputs, mechanism(plan.mechanism).run(plan, inputs))


def passing_alternative(
    inputs: PlanInputs, *, rows: int | None = None, exclude: tuple[str, ...] = ()
) -> Alternative | None:
    """The first (mechanism, ε) whose forecast passes, with the mechanism's default keys.

    ε runs from the configured one up :data:`EPSILON_GRID`; at each, the mechanisms are tried in
    :func:`~dqrelease.mechanisms.choice.preference` order (those that cannot plan are skipped).

    Returns None when nothing passes up to the grid's end, or when called from a plan inside this search.
    """
    if _SEARCHING.get() or inputs.public.epsilon is None:
        return None
    configured = float(inputs.public.epsilon)
    epsilons = [configured, *(e for e in EPSILON_GRID if e > configured)]
    shape = forecast_shape(inputs, rows=rows)
    names = [name for name in preference(inputs) if name not in exclude]
    token = _SEARCHING.set(True)
    try:
        for epsilon in epsilons:
            trial = dataclasses.replace(inputs, public=dataclasses.replace(inputs.public, epsilon=epsilon))
            fitted_passes = fit_passes(trial, shape)
            for name in names:
                if fitted_passes is False and _fitted_by_default(MECHANISMS[name]):
                    continue  # its forecast is the table fit's, which fails here: no need to plan it
                try:
                    plan = plan_mechanism(MECHANISMS[name].keys(), trial)
                except (DQEngineError, ReleaseError, ValueError):
                    continue
                verdict = assess_plan(plan, shape)
                if verdict is not None and verdict.passes:
                    return Alternative(mechanism=name, epsilon=epsilon, verdict=verdict)
    finally:
        _SEARCHING.reset(token)
    return None


def _fitted_by_default(entry) -> bool:
    """Whether the mechanism publishes table-fitted records with its default keys (its forecast is the fit's)."""
    fit = getattr(entry.keys(), "fit", None)
    return fit is not None and fit.enabled


def recommendation(inputs: PlanInputs, *, exclude: tuple[str, ...] = (), epsilon_offset: float = 0.0) -> str:
    """The refusal's advice: a mechanism and ε whose forecast passes, or why none is named.

    Args:
        inputs: The refused plan's public inputs.
        exclude: Mechanisms not to recommend (the refused one).
        epsilon_offset: Added to the mechanism's ε to give ``privacy.epsilon`` (the noisy count's share).
    """
    if _SEARCHING.get():
        return "another mechanism"
    found = passing_alternative(inputs, exclude=exclude)
    if found is None:
        return ("no registered mechanism whose forecast beats publishing zeros or uniform data up to privacy.epsilon "
                f"= {EPSILON_GRID[-1]:g} (drop or coarsen columns, or publish more records)")
    figures = found.verdict.forecast
    return (
        f"mechanism.name = '{found.mechanism}' (default keys) with privacy.epsilon = "
        f"{found.epsilon + epsilon_offset:.4g} (forecast: "
        f"worst one-way cell {figures.worst_one_way_cell.value:.3g}, workload max {figures.workload_max.value:.3g})"
    )


def smallest_epsilon(
    keys: MechanismKeys, inputs: PlanInputs, targets: AccuracyTargets, *, rows: int | None = None
) -> tuple[float, ReleasePlan] | None:
    """The smallest mechanism ε whose forecast meets ``targets`` (3 significant digits, rounded up), and its plan.

    Bisection in log scale over :data:`TARGET_EPSILON_RANGE`: the forecasts fall as ε grows (each plan spends more
    on the same steps, ``tests/forecast`` checks it on a grid), so the first ε that meets is found in 19 plans.
    A plan that cannot be made at some ε (too small a budget) does not meet there. Returns None when even the
    largest ε does not meet the targets.
    """
    shape = forecast_shape(inputs, rows=rows)

    def planned(epsilon: float) -> ReleasePlan | None:
        trial = dataclasses.replace(inputs, public=dataclasses.replace(inputs.public, epsilon=epsilon))
        try:
            plan = plan_mechanism(keys, trial)
        except (DQEngineError, ReleaseError, ValueError):
            return None
        predicted = forecast_plan(plan, shape)
        return plan if predicted is not None and not targets.misses(predicted) else None

    import math

    token = _SEARCHING.set(True)  # the plans' own refusals do not search for advice
    try:
        low, high = TARGET_EPSILON_RANGE
        best = planned(high)
        if best is None:
            return None
        first = planned(low)
        if first is not None:
            return low, first
        for _ in range(16):  # 64 / 1e-3 = 2^16: 16 halvings of the log range leave a factor of 1.0002
            middle = math.sqrt(low * high)
            found = planned(middle)
            if found is None:
                low = middle
            else:
                high, best = middle, found
        shown = float(f"{high:.3g}")
        if shown < high:
            shown = float(f"{high * (1 + 1e-3):.3g}")
        again = planned(shown)
        return (shown, again) if again is not None else (high, best)
    finally:
        _SEARCHING.reset(token)


def check_utility(
    plan: ReleasePlan,
    inputs: PlanInputs,
    *,
    rows: int | None = None,
    epsilon_offset: float = 0.0,
    keys: MechanismKeys | None = None,
    targets: AccuracyTargets | None = None,
) -> None:
    """Refuse ``plan`` when its forecast is no better than a baseline or misses an accuracy target (one line).

    Args:
        plan: The planned release.
        inputs: Its public inputs.
        rows: Published rows (default ``n``).
        epsilon_offset: Added to a mechanism ε to give ``privacy.epsilon`` (the noisy count's share).
        keys: The configured mechanism keys: a missed target names the smallest ε at which they meet it.
        targets: The accuracy targets, or None.

    Raises:
        ConfigInvalidError: With the failing figures and what would pass (a mechanism and ε, or the ε that meets
            the targets).
    """
    verdict = assess_plan(plan, forecast_shape(inputs, rows=rows))
    if verdict is None:
        return
    if not verdict.passes:
        advice = recommendation(inputs, epsilon_offset=epsilon_offset)
        raise ConfigInvalidError(
            f"low utility: the forecast of {verdict.forecast.label} at epsilon = {plan_epsilon(inputs):.4g}: "
            f"{'; '.join(verdict.failures)}; use {advice}, or rerun with {ACCEPT_FLAG} to publish it anyway"
        )
    misses = [] if targets is None else targets.misses(verdict.forecast)
    if not misses:
        return
    found = None if keys is None else smallest_epsilon(keys, inputs, targets, rows=rows)
    if found is None:
        fix = (f"no privacy.epsilon up to {TARGET_EPSILON_RANGE[1] + epsilon_offset:g} meets them with this mechanism"
               if keys is not None else "raise privacy.epsilon")
    else:
        fix = f"the smallest privacy.epsilon whose forecast meets them is {found[0] + epsilon_offset:.3g}"
    raise ConfigInvalidError(
        f"accuracy target missed: the forecast of {verdict.forecast.label} at epsilon = {plan_epsilon(inputs):.4g}: "
        f"{'; '.join(misses)}; {fix}; raise privacy.epsilon, relax [accuracy], or rerun with {ACCEPT_FLAG} to "
        "publish it anyway"
    )
