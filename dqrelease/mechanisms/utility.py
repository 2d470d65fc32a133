"""Is a planned release worth its budget? The forecast of a plan, its verdict, and a passing alternative.

:func:`forecast_plan` maps a :class:`ReleasePlan` to :mod:`dq_engine.forecast`'s model of its mechanism (public
quantities only); :func:`assess_plan` compares it with publishing zeros or uniform data. ``dqrelease plan``
prints both, ``dqrelease run`` refuses a release whose forecast is no better than a baseline unless
``--accept-low-utility`` is given (:func:`check_utility`), before any data is read or any budget charged.

Every refusal that recommends a mechanism goes through :func:`recommendation`, which names a mechanism and an ε
whose forecast passes (:func:`passing_alternative`: the smallest ε of :data:`EPSILON_GRID` at or above the
configured one at which a registered mechanism, tried in :func:`dqrelease.mechanisms.auto.preference` order,
passes). So no refusal recommends a mechanism that the forecast would refuse in turn.
"""

from __future__ import annotations

import contextvars
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dqrelease.mechanisms.base import PlanInputs, ReleasePlan

if TYPE_CHECKING:
    from dq_engine.forecast import ErrorForecast, ForecastShape, UtilityVerdict

__all__ = [
    "ACCEPT_FLAG",
    "EPSILON_GRID",
    "Alternative",
    "assess_plan",
    "check_utility",
    "forecast_plan",
    "forecast_shape",
    "passing_alternative",
    "recommendation",
]

EPSILON_GRID = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""The ε a passing alternative is searched at (after the configured ε itself), smallest first."""

ACCEPT_FLAG = "--accept-low-utility"
"""The ``dqrelease run`` option that publishes a release whose forecast is no better than a baseline."""

_SEARCHING: contextvars.ContextVar[bool] = contextvars.ContextVar("dqrelease_alternative_search", default=False)
"""True while :func:`passing_alternative` plans candidates: their own refusals then do not search again."""


def forecast_shape(inputs: PlanInputs, *, rows: int | None = None) -> ForecastShape:
    """The forecast's public shape: of ``inputs.workload``, or approximated from ``N`` and ``M`` without one.

    The approximation spreads the ``N`` queries evenly over the ``M`` marginals of every column and calls no
    marginal complete (so no workload bound is claimed for zeros).
    """
    import numpy as np

    from dq_engine.forecast import ForecastShape

    public = inputs.public
    if inputs.workload is not None:
        return ForecastShape.of(inputs.workload, n=public.n, rows=rows)
    domain = public.domain
    sizes = np.where(domain.is_binary, 2, domain.sizes)
    per_marginal = max(1, round(public.n_queries / public.n_marginals))
    return ForecastShape(
        n=public.n, rows=public.n if rows is None else rows, column_sizes=tuple(int(s) for s in sizes),
        workload_columns=len(domain), marginal_cells=(per_marginal,) * public.n_marginals,
        complete=(False,) * public.n_marginals, n_queries=public.n_queries,
    )


def _raw_records(plan: ReleasePlan) -> int:
    """Records a game mechanism publishes without the table fit (one or more per round)."""
    parameters = plan.parameters
    per_round = parameters.get("rows_per_round", 1) if plan.mechanism in ("dualquery", "dqrs") else parameters.get(
        "samples", 1)
    return int(parameters["rounds"]) * int(per_round)


def forecast_plan(plan: ReleasePlan, shape: ForecastShape) -> ErrorForecast | None:
    """The forecast of ``plan``'s published rows, or None for a mechanism without a model."""
    from dq_engine import forecast

    if plan.fit is not None:
        return forecast.particles_forecast(shape, plan.fit, label=f"{plan.mechanism} + table fit")
    if plan.mechanism == "mwem-particles":
        return forecast.particles_forecast(shape, plan.engine_config, label=plan.mechanism)
    if plan.mechanism == "mwem":
        return forecast.universe_forecast(shape, plan.engine_config, label=plan.mechanism)
    if plan.mechanism == "randomized_response":
        return forecast.randomized_response_forecast(
            shape, keep_probability=plan.parameters["keep_probability"],
            estimate_sd=plan.parameters["estimate_sd_bound"], label=plan.mechanism,
        )
    if plan.mechanism in ("dualquery", "dqrs", "fem", "sepfem"):
        return forecast.raw_records_forecast(shape, _raw_records(plan), label=f"{plan.mechanism} (raw records)")
    return None


def assess_plan(plan: ReleasePlan, shape: ForecastShape) -> UtilityVerdict | None:
    """The forecast of ``plan`` against zeros and uniform (None for a mechanism without a model)."""
    from dq_engine.forecast import judge_forecast

    predicted = forecast_plan(plan, shape)
    return None if predicted is None else judge_forecast(predicted, shape)


@dataclass(frozen=True, kw_only=True)
class Alternative:
    """A mechanism and a target ε whose forecast beats the baselines.

    Attributes:
        mechanism: Its ``mechanism.name`` (default keys).
        epsilon: The mechanism's target ε.
        verdict: Its forecast and verdict.
    """

    mechanism: str
    epsilon: float
    verdict: UtilityVerdict


def passing_alternative(
    inputs: PlanInputs, *, rows: int | None = None, exclude: tuple[str, ...] = ()
) -> Alternative | None:
    """The first (mechanism, ε) whose forecast passes, with the mechanism's default keys.

    ε runs from the configured one up :data:`EPSILON_GRID`; at each, the mechanisms are tried in
    :func:`~dqrelease.mechanisms.auto.preference` order (those that cannot plan are skipped).

    Returns None when nothing passes up to the grid's end, or when called from a plan inside this search.
    """
    if _SEARCHING.get() or inputs.public.epsilon is None:
        return None
    from dq_engine.errors import DQEngineError
    from dqrelease.errors import ReleaseError
    from dqrelease.mechanisms import MECHANISMS, plan_mechanism
    from dqrelease.mechanisms.auto import preference

    configured = float(inputs.public.epsilon)
    epsilons = [configured, *(e for e in EPSILON_GRID if e > configured)]
    shape = forecast_shape(inputs, rows=rows)
    names = [name for name in preference(inputs) if name not in exclude]
    token = _SEARCHING.set(True)
    try:
        for epsilon in epsilons:
            trial = dataclasses.replace(inputs, public=dataclasses.replace(inputs.public, epsilon=epsilon))
            fitted_passes = _fit_passes(trial, shape)
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


def _fit_passes(inputs: PlanInputs, shape: ForecastShape) -> bool | None:
    """Whether the default table fit's forecast passes at ``inputs`` (None when it cannot be configured).

    The forecast of every mechanism that publishes fitted records is the fit's (:func:`forecast_plan`), and the
    fit's configuration depends on public quantities only, so one forecast decides for all of them without the
    (slower) calibration of each mechanism's own plan.
    """
    from dq_engine.errors import DQEngineError
    from dq_engine.forecast import judge_forecast, particles_forecast
    from dqrelease.mechanisms.fit import FitKeys, _fit_config

    try:
        config = _fit_config(FitKeys(), inputs)
    except DQEngineError:
        return None
    return judge_forecast(particles_forecast(shape, config, label="table fit"), shape).passes


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


def check_utility(
    plan: ReleasePlan, inputs: PlanInputs, *, rows: int | None = None, epsilon_offset: float = 0.0
) -> None:
    """Refuse ``plan`` when its forecast is no better than zeros or uniform (one line, names a passing choice).

    Raises:
        ConfigInvalidError: With the failing figures and :func:`recommendation` of a passing alternative.
    """
    from dqrelease.errors import ConfigInvalidError

    verdict = assess_plan(plan, forecast_shape(inputs, rows=rows))
    if verdict is None or verdict.passes:
        return
    advice = recommendation(inputs, epsilon_offset=epsilon_offset)
    raise ConfigInvalidError(
        f"low utility: the forecast of {verdict.forecast.label} at epsilon = {plan_epsilon(inputs):.4g}: "
        f"{'; '.join(verdict.failures)}; use {advice}, or rerun with {ACCEPT_FLAG} to publish it anyway"
    )


def plan_epsilon(inputs: PlanInputs) -> float:
    """The mechanism's target ε (0 when the plan has none)."""
    return 0.0 if inputs.public.epsilon is None else float(inputs.public.epsilon)
