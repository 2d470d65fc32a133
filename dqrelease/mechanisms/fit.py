"""The table fit in the pipeline: section ``[mechanism.fit]``, and how a plan makes room for it.

DualQuery, DQRS, FEM and sepFEM publish, by default, their records calibrated against charged noisy marginals
(:mod:`dq_engine.fit.table_fit`): MWEM on particles seeded with the mechanism's records. The fit takes ``share`` of
the target's zCDP budget ρ; the mechanism is planned within what is left, by bisection on the mechanism's own
target ε so that the *combined* cost (the mechanism's events and the fit's, composed) never exceeds the target
in the config's accounting mode. A mechanism that cannot use more than it got (DualQuery and DQRS at their cap on
``T``, on large tables) leaves the rest of the target to the fit, whose share then grows. ``enabled = false``
publishes the mechanism's raw records (the papers' algorithms as printed).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dqrelease.mechanisms.base import PlanInputs, ReleasePlan, RunInputs

__all__ = ["FIT_SHARE", "FitKeys", "plan_with_fit", "run_fit"]

FIT_SHARE = 0.9
"""Default share of ρ for the table fit: the mechanism's records are seeds, and the fit's measurements make single
columns and pairs right. Measured (docs/benchmarks.md, "What the seeds' records add", 5 seeds, DualQuery): on Adult
0.9 beats 0.7 on every figure's median at ε = 0.1 (workload max 0.052 against 0.062, mean two-way TVD 0.084 against
0.096) and on pairs and the workload at ε = 1 (worst one-way cell 0.007 against 0.006, within the seeds' range);
0.5 is worse, and the fit without the records a little worse than with them. Checked on a table it was not chosen
on (private-pgm's Adult encoding with 64 random 3-way marginals). Was 0.7 before 2026-11-28."""

_BISECTION_STEPS = 40
_SHARE_STEPS = 12
"""Bisection steps of the fit's grown share when it is not found at once (:func:`_grown_fit`): within 2^-12."""


class FitKeys(BaseModel):
    """Section ``[mechanism.fit]``: the table fit (MWEM on particles seeded with the mechanism's records)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=True, description="Fit the records to charged noisy marginals (false: publish the raw records)."
    )
    share: float = Field(
        default=FIT_SHARE, gt=0, lt=1, description="Share of the target's zCDP rho spent by the fit."
    )
    seed_fraction: float = Field(
        default=0.5, ge=0, le=1, description="Share of the fit's particles drawn from the mechanism's records."
    )
    particles: int | None = Field(
        default=None, ge=1_000, le=2_000_000, description="Particles of the fit (default 200,000)."
    )
    rounds: int | None = Field(
        default=None, ge=1, le=1_000,
        description="Rounds of the fit (default floor(0.63 rho_fit (0.01 n)^2) in [8, min(M, 40)]).",
    )

    def check_release(self, *, privacy) -> None:
        """An enabled fit needs a target epsilon: its budget is a share of it."""
        if self.enabled and privacy.epsilon is None:
            raise ValueError("the table fit needs privacy.epsilon (its budget is a share of it); set it, or set "
                             "mechanism.fit.enabled = false")


def _target_rho(inputs: PlanInputs) -> float:
    """The largest ρ whose (ε, δ) conversion in the config's accounting mode is within the target.

    Tight mode: the optimal conversion (:func:`dq_engine.privacy.public.largest_rho`); paper mode: the conversion
    ``ε = ρ + 2√(ρ ln(1/δ))`` of Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private
    Synthetic Data Release", i.e. ``ρ = (√(ln(1/δ) + ε) - √ln(1/δ))²``.
    """
    from dq_engine.privacy.accounting import zcdp_from_approx_dp_simple
    from dq_engine.privacy.public import largest_rho

    public = inputs.public
    if inputs.mode == "tight":
        return largest_rho(public.epsilon, public.delta)
    return zcdp_from_approx_dp_simple(public.epsilon, public.delta)


def _fit_config(fit: FitKeys, inputs: PlanInputs) -> Any:
    from dq_engine.mechanisms.defaults import mwem_particles_config
    from dq_engine.privacy.accounting import approx_dp_from_zcdp

    public = inputs.public
    rho_fit = fit.share * _target_rho(inputs)
    if inputs.mode == "tight":
        epsilon_fit = approx_dp_from_zcdp(rho_fit, public.delta)
    else:  # Vietri et al. 2020's conversion, the one paper mode composes with
        epsilon_fit = rho_fit + 2.0 * math.sqrt(rho_fit * math.log(1.0 / public.delta))
    return mwem_particles_config(
        dataclasses.replace(public, epsilon=epsilon_fit), mode=inputs.mode, rounds=fit.rounds,
        support_size=fit.particles, seed_fraction=fit.seed_fraction, track_error=False,
    )


def plan_with_fit(plan: Callable[[Any, PlanInputs], ReleasePlan], keys: Any, inputs: PlanInputs) -> ReleasePlan:
    """Plan the mechanism with a table fit: the fit's share first, the mechanism calibrated around it.

    Raises:
        ConfigError: Without a target ε (the fit's budget is a share of it).
        AccountingError: If no mechanism budget fits next to the fit.
    """
    from dq_engine.errors import AccountingError, ConfigError
    from dq_engine.fit.mwem import selection_words
    from dq_engine.fit.table_fit import fit_events
    from dq_engine.privacy.accounting import combined_costs, within_target

    public, mode = inputs.public, inputs.mode
    if public.epsilon is None:
        raise ConfigError("the table fit needs privacy.epsilon (its budget is a share of it); or set "
                          "mechanism.fit.enabled = false")
    fit = _fit_config(keys.fit, inputs)
    extra = fit_events(fit)

    def attempt(epsilon: float) -> ReleasePlan | str:
        try:
            inner = plan(keys, dataclasses.replace(inputs, public=dataclasses.replace(public, epsilon=epsilon)))
        except AccountingError:
            return "too small"  # not even the smallest run of the mechanism fits this budget
        costs = combined_costs([*inner.events, *extra], public.delta)
        return inner if within_target(costs[mode].epsilon, public.epsilon) else "too large"

    # the mechanism's own target: too small (its rule refuses), feasible, too large (with the fit over the
    # target), in that order as it grows; bisection keeps the largest feasible one
    low, high, best, own_epsilon = 0.0, public.epsilon, None, 0.0
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        found = attempt(middle)
        if found == "too large":
            high = middle
        else:
            low = middle
            if not isinstance(found, str):
                best, own_epsilon = found, middle
    if best is None:
        raise AccountingError(
            f"no {keys.name} run fits next to the table fit within epsilon = {public.epsilon:.4g} ({mode} "
            "accounting); raise privacy.epsilon, lower mechanism.fit.share, or set mechanism.fit.enabled = false"
        )
    share = keys.fit.share
    if _saturated(plan, keys, inputs, best):
        fit, share = _grown_fit(best, keys.fit, inputs)
        extra = fit_events(fit)
    events = (*best.events, *extra)
    costs = combined_costs(list(events), public.delta)
    grown = share != keys.fit.share
    own = "" if grown else f", epsilon = {own_epsilon:.4g} on its own"
    note = (
        f"budget split: the table fit takes {share:.{1 if grown else 0}%} of rho for MWEM on {fit.support_size:,} "
        f"particles ({keys.fit.seed_fraction:.0%} seeded with the {keys.name} records), {fit.rounds} rounds (each "
        f"{selection_words(fit)}), and the rows are sampled from the fitted particles; "
        f"{keys.name} gets the rest{own}. "
        f"Composed in zCDP the two cost epsilon = {costs[mode].epsilon:.4g} within the target epsilon = "
        f"{public.epsilon:.4g} ({mode} accounting): the epsilons of composed steps do not add up"
    )
    if not grown and keys.fit.share == FIT_SHARE:
        note += (f"; {FIT_SHARE:.0%} is the default because the records add little next to the fit's measurements "
                 "(measured: docs/benchmarks.md, \"What the seeds' records add\")")
    if grown:
        note += (f"; {keys.name} cannot use more (T is at its cap, and its rounds cost about {1 - share:.1%} of rho "
                 f"on this many records), so the fit's share grew from {keys.fit.share:.0%} to {share:.1%}")
    parameters = {**best.parameters, "fit": {
        "share": share, "seed_fraction": fit.seed_fraction, "particles": fit.support_size,
        "rounds": fit.rounds, "select": fit.select, "candidates": fit.candidates,
        "final_estimator": fit.final_estimator, "select_epsilon": fit.select_epsilon, "measure_rho": fit.measure_rho,
        "prior_rho": fit.support_budget, "prior_mix": fit.support_mix, "prior_mix_rule": fit.support_mix_rule,
    }}
    return dataclasses.replace(
        best, parameters=parameters, events=events, costs=costs,
        progress_rounds=best.progress_rounds + fit.rounds, notes=[*best.notes, note], fit=fit,
    )


def _saturated(plan: Callable[[Any, PlanInputs], ReleasePlan], keys: Any, inputs: PlanInputs,
               best: ReleasePlan) -> bool:
    """The mechanism given the whole target would run exactly as ``best``: more budget buys it nothing."""
    from dq_engine.errors import AccountingError

    try:
        whole = plan(keys, inputs)
    except AccountingError:
        return False
    return whole.events == best.events


def _grown_fit(best: ReleasePlan, fit: FitKeys, inputs: PlanInputs) -> tuple[Any, float]:
    """The fit with the largest share (from ``fit.share`` up) whose events fit next to ``best``'s in the target.

    In tight accounting the costs compose in zCDP, so the share is first taken as what ``best``'s ρ leaves of the
    target's; one check confirms it. Otherwise (paper accounting, or a share that does not fit) a bisection finds it.
    """
    from dq_engine.fit.table_fit import fit_events
    from dq_engine.privacy.accounting import combined_costs, within_target, zcdp_rho

    public, mode = inputs.public, inputs.mode

    def config(share: float) -> Any:
        return _fit_config(fit.model_copy(update={"share": share}), inputs)

    def fits(candidate: Any) -> bool:
        costs = combined_costs([*best.events, *fit_events(candidate)], public.delta)
        return within_target(costs[mode].epsilon, public.epsilon)

    low, high, chosen = fit.share, 1.0, config(fit.share)
    if mode == "tight":
        left = 1.0 - zcdp_rho(list(best.events), em_bound="bounded_range") / _target_rho(inputs)
        if left > low:
            candidate = config(left)
            if fits(candidate):
                return candidate, left
            high = left
    for _ in range(_SHARE_STEPS):
        middle = 0.5 * (low + high)
        candidate = config(middle)
        if fits(candidate):
            low, chosen = middle, candidate
        else:
            high = middle
    return chosen, low


def run_fit(plan: ReleasePlan, inputs: RunInputs, result: Any) -> Any:
    """Fit the mechanism's ``result`` as the plan says (``dq_engine.fit.table_fit.fit_table``); else unchanged."""
    if plan.fit is None:
        return result
    from dq_engine.fit.table_fit import fit_table
    from dqrelease.runtime.cluster import executor_for

    with executor_for(inputs.dask_address) as executor:  # the particles' move shards go to the workers
        return fit_table(
            inputs.data, inputs.workload, result, plan.fit, grant=inputs.grant, rng=inputs.rng,
            constraints=inputs.constraints, progress=inputs.progress, public_n=plan.n, executor=executor,
        )
