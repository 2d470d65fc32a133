"""Independent columns in the pipeline: keys, plan rule and run.

Every column's one-way marginal measured once with Gaussian noise (the whole ρ of the target), and the rows
published with independent columns (:mod:`dq_engine.mechanisms.independent`). It publishes no dependence between
columns, so it never invents any: on a table of few rows, or at a small ε, it is the table a synthesizer must beat,
and ``auto`` chooses it where its forecast wins (:mod:`dqrelease.mechanisms.auto`). The schema's rules are kept:
rows that break one are redrawn from the product conditioned on the rules.
"""

from __future__ import annotations

from typing import Literal

from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs

__all__ = ["INDEPENDENT", "IndependentKeys", "independent_rho"]


class IndependentKeys(MechanismKeys):
    """``[mechanism]`` of ``name = "independent"`` (no other key)."""

    name: Literal["independent"] = "independent"

    def check_release(self, *, privacy, output) -> None:
        """Its ρ is the whole target's: a target epsilon is required."""
        if privacy.epsilon is None:
            raise ValueError("mechanism 'independent' needs privacy.epsilon (its one measurement spends all of it)")


def independent_rho(epsilon: float, delta: float, mode: str) -> float:
    """The largest ρ whose charge in ``mode`` is within ``(epsilon, delta)`` (the one measurement's budget).

    The optimal conversion's ρ (:func:`dq_engine.privacy.public.largest_rho`), lowered by relative steps of
    ``2^-40`` while the rounded-up charge exceeds the target (at most 64 steps; the conversion already fits, the
    steps absorb the ledger's outward rounding).

    Raises:
        AccountingError: If no positive ρ fits.
    """
    from dq_engine.errors import AccountingError
    from dq_engine.mechanisms.independent import IndependentConfig, independent_events
    from dq_engine.privacy.accounting import mwem_costs, within_target
    from dq_engine.privacy.public import largest_rho

    rho = largest_rho(epsilon, delta)
    for _ in range(64):
        if rho > 0:
            cost = mwem_costs(independent_events(IndependentConfig(rho=rho, rows=1, delta=delta)), delta)[mode]
            if within_target(cost.epsilon, epsilon):
                return rho
        rho *= 1.0 - 2.0**-40
    raise AccountingError(f"no positive budget of independent columns fits epsilon = {epsilon} at delta = {delta}")


def _plan(keys: IndependentKeys, inputs: PlanInputs) -> ReleasePlan:
    import math

    from dq_engine.mechanisms.independent import IndependentConfig, independent_events
    from dq_engine.privacy.accounting import mwem_costs

    public = inputs.public
    rho = independent_rho(public.epsilon, public.delta, inputs.mode)
    engine_config = IndependentConfig(rho=rho, rows=public.n, delta=public.delta)
    events = tuple(independent_events(engine_config))
    columns = len(public.domain)
    sigma = math.sqrt(columns / rho)  # counts: L2 sensitivity sqrt(2m) under replace-one, sigma = l2 / sqrt(2 rho)
    parameters = {"rho": rho, "rows": public.n, "columns": columns, "noise_sd_counts": sigma, "delta": public.delta}
    notes = [
        f"all of rho = {rho:.4g} on one Gaussian measurement of the {columns} columns' one-way marginals "
        f"(standard deviation {sigma:.3g} counts per value); the columns of the published rows are independent: "
        "no dependence between them is published"
    ]
    return ReleasePlan(
        mechanism="independent", n=public.n, engine_config=engine_config, parameters=parameters, events=events,
        costs=mwem_costs(list(events), public.delta), mode=inputs.mode, notes=notes,
    )


def _run(plan: ReleasePlan, inputs: RunInputs):
    from dq_engine.mechanisms.independent import independent_columns

    return independent_columns(
        inputs.data, plan.engine_config, grant=inputs.grant, rng=inputs.rng, constraints=inputs.constraints
    )


INDEPENDENT = Mechanism(
    name="independent",
    summary=(
        "every column's noisy one-way marginal (one Gaussian measurement), published as rows with independent "
        "columns: no dependence is published, so none is invented; auto chooses it where its forecast wins"
    ),
    reference="the independent-columns baseline (as MST's and AIM's graphical models treat unmeasured columns)",
    keys=IndependentKeys, plan=_plan, run=_run, needs_public_n=False, enforces_constraints=True,
)
