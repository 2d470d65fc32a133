"""Is a planned release worth its budget? The forecast of a plan and its verdict against the baselines.

:func:`forecast_plan` maps a :class:`ReleasePlan` to :mod:`dq_engine.evaluation.forecast`'s model of its mechanism
(public quantities only); :func:`assess_plan` compares it with publishing zeros or uniform data. ``dqrelease plan``
prints both, ``dqrelease run`` refuses a release whose forecast is no better than a baseline unless
``--accept-low-utility`` is given (:func:`dqrelease.mechanisms.dispatch.check_utility`), before any data is read
or any budget charged.

The refusal itself and its advice (a mechanism and an ε whose forecast passes) are in
:mod:`dqrelease.mechanisms.dispatch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dqrelease.mechanisms.base import PlanInputs, ReleasePlan

if TYPE_CHECKING:
    from dq_engine.evaluation.forecast import ErrorForecast, ForecastShape, UtilityVerdict

__all__ = [
    "ACCEPT_FLAG",
    "EPSILON_GRID",
    "AccuracyTargets",
    "Alternative",
    "assess_plan",
    "fit_passes",
    "forecast_plan",
    "forecast_shape",
    "independent_baseline",
    "plan_epsilon",
]

EPSILON_GRID = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""The ε a passing alternative is searched at (after the configured ε itself), smallest first."""

ACCEPT_FLAG = "--accept-low-utility"
"""The ``dqrelease run`` option that publishes a release whose forecast is no better than a baseline."""

@dataclass(frozen=True, kw_only=True)
class AccuracyTargets:
    """What a release must reach (the config's ``[accuracy]``), compared with its forecast.

    Attributes:
        worst_one_way_cell: Largest forecast error of any value's share in any column, or None.
        workload_max: Largest forecast error of any workload query, or None.
    """

    worst_one_way_cell: float | None = None
    workload_max: float | None = None

    def misses(self, forecast: ErrorForecast) -> list[str]:
        """One phrase per target the forecast misses (an unknown figure misses its target)."""
        figures = forecast.figures()
        out = []
        for key, figure_name, label, target in (
            ("worst_one_way_cell", "worst_one_way_cell", "worst one-way cell", self.worst_one_way_cell),
            ("workload_max", "workload_max_error", "workload max", self.workload_max),
        ):
            value = figures[figure_name].value
            if target is not None and (value is None or value > target):
                shown = "unknown" if value is None else f"{value:.3g}"
                out.append(f"{label} {shown} misses accuracy.{key} = {target:g}")
        return out

    def shown(self) -> str:
        """The targets in one phrase."""
        parts = [f"worst one-way cell <= {self.worst_one_way_cell:g}" if self.worst_one_way_cell else "",
                 f"workload max <= {self.workload_max:g}" if self.workload_max else ""]
        return ", ".join(p for p in parts if p) or "none"


def forecast_shape(inputs: PlanInputs, *, rows: int | None = None) -> ForecastShape:
    """The forecast's public shape: of ``inputs.workload``, or approximated from ``N`` and ``M`` without one.

    The approximation spreads the ``N`` queries evenly over the ``M`` marginals of every column and calls no
    marginal complete (so no workload bound is claimed for zeros).
    """
    import numpy as np

    from dq_engine.evaluation.forecast import ForecastShape

    public = inputs.public
    if inputs.workload is not None:
        return ForecastShape.of(inputs.workload, n=public.n, rows=rows)
    domain = public.domain
    sizes = np.where(domain.is_binary, 2, domain.sizes)
    per_marginal = max(1, round(public.n_queries / public.n_marginals))
    return ForecastShape(
        n=public.n, rows=public.n if rows is None else rows, column_sizes=tuple(int(s) for s in sizes),
        marginal_cells=(per_marginal,) * public.n_marginals,
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
    from dq_engine.evaluation import forecast

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
    if plan.mechanism == "independent":
        return forecast.independent_forecast(shape, plan.parameters["rho"])
    if plan.mechanism in ("dualquery", "dqrs", "fem", "sepfem"):
        return forecast.raw_records_forecast(shape, _raw_records(plan), label=f"{plan.mechanism} (raw records)")
    return None


def assess_plan(plan: ReleasePlan, shape: ForecastShape) -> UtilityVerdict | None:
    """The forecast of ``plan`` against zeros, uniform and independent columns at the plan's charged ε.

    None for a mechanism without a model.
    """
    from dq_engine.evaluation.forecast import judge_forecast

    predicted = forecast_plan(plan, shape)
    if predicted is None:
        return None
    return judge_forecast(predicted, shape, independent=independent_baseline(plan, shape))


def independent_baseline(plan: ReleasePlan, shape: ForecastShape) -> ErrorForecast | None:
    """The forecast of independent columns at the ε and δ ``plan`` is charged (None for independent columns)."""
    from dq_engine.errors import DQEngineError
    from dq_engine.evaluation.forecast import independent_forecast
    from dqrelease.mechanisms.independent import independent_rho

    if plan.mechanism == "independent":
        return None
    charged = plan.charged
    delta = charged.delta or plan.parameters.get("delta")  # a pure-epsilon plan: the release's delta
    if not delta:
        return None
    try:
        rho = independent_rho(charged.epsilon, delta, plan.mode)
    except DQEngineError:
        return None
    return independent_forecast(shape, rho)


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


def fit_passes(inputs: PlanInputs, shape: ForecastShape) -> bool | None:
    """Whether the default table fit's forecast passes at ``inputs`` (None when it cannot be configured).

    The forecast of every mechanism that publishes fitted records is the fit's (:func:`forecast_plan`), and the
    fit's configuration depends on public quantities only, so one forecast decides for all of them without the
    (slower) calibration of each mechanism's own plan.
    """
    from dq_engine.errors import DQEngineError
    from dq_engine.evaluation.forecast import independent_forecast, judge_forecast, particles_forecast
    from dqrelease.mechanisms.fit import FitKeys, _fit_config
    from dqrelease.mechanisms.independent import independent_rho

    try:
        config = _fit_config(FitKeys(), inputs)
        public = inputs.public
        independent = independent_forecast(shape, independent_rho(public.epsilon, public.delta, inputs.mode))
    except DQEngineError:
        return None
    return judge_forecast(particles_forecast(shape, config, label="table fit"), shape, independent=independent).passes


def plan_epsilon(inputs: PlanInputs) -> float:
    """The mechanism's target ε (0 when the plan has none)."""
    return 0.0 if inputs.public.epsilon is None else float(inputs.public.epsilon)
