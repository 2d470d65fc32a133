"""MWEM over the whole universe and MWEM on particles in the pipeline: keys, plan rule and run.

* ``mwem`` -- MWEM (Hardt, Ligett & McSherry 2012, Algorithm 1): multiplicative weights over every record of
  the domain. It keeps one weight per record and is refused at plan time above ``2^24`` records
  (:data:`dq_engine.fit.mwem.MAX_UNIVERSE_LOG2`), naming a mechanism whose forecast passes
  (:func:`dqrelease.mechanisms.dispatch.recommendation`).
* ``mwem-particles`` -- MWEM on 200,000 particles (any domain size): noisy one-way marginals give the
  particles' prior, each round selects a marginal with the exponential mechanism and measures it with Gaussian
  noise, and the particles are resampled and moved using only those noisy results
  (:func:`dq_engine.mechanisms.defaults.mwem_particles_config`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import Field

from dqrelease.mechanisms.base import Mechanism, MechanismKeys, PlanInputs, ReleasePlan, RunInputs

__all__ = ["MWEM", "MWEM_PARTICLES", "MWEMKeys", "MWEMParticlesKeys"]

class _MWEMFamilyKeys(MechanismKeys):
    def check_release(self, *, privacy, output) -> None:
        """Budgets are calibrated to the target epsilon: it is required."""
        if privacy.epsilon is None:
            raise ValueError(f"mechanism {self.name!r} needs privacy.epsilon (its budgets are calibrated to it)")


class MWEMKeys(_MWEMFamilyKeys):
    """``[mechanism]`` of ``name = "mwem"``."""

    name: Literal["mwem"] = "mwem"
    rounds: int | None = Field(default=None, ge=1, le=10_000, description="Rounds T (default 15).")


class MWEMParticlesKeys(_MWEMFamilyKeys):
    """``[mechanism]`` of ``name = "mwem-particles"``."""

    name: Literal["mwem-particles"] = "mwem-particles"
    rounds: int | None = Field(
        default=None, ge=1, le=10_000, description="Rounds T (default floor(0.63 rho (0.01 n)^2) in [8, min(M, 40)])."
    )


def _plan_mwem(keys: MWEMKeys, inputs: PlanInputs) -> ReleasePlan:
    from dq_engine.errors import UniverseTooLargeError
    from dq_engine.fit.mwem import MAX_UNIVERSE_LOG2, mwem_events
    from dq_engine.mechanisms.defaults import mwem_config
    from dq_engine.privacy.accounting import mwem_costs
    from dqrelease.mechanisms.dispatch import recommendation

    public, mode = inputs.public, inputs.mode
    log2 = public.domain.universe_log2
    if log2 > MAX_UNIVERSE_LOG2 + 1e-9:
        raise UniverseTooLargeError(
            f"mechanism 'mwem' keeps one weight per record: the schema's domain has 2^{log2:.1f} records, more than "
            f"MWEM's limit of 2^{MAX_UNIVERSE_LOG2}; use {recommendation(inputs, exclude=('mwem',))}, or drop or "
            "coarsen columns"
        )
    engine_config = mwem_config(public, mode=mode, rounds=keys.rounds)
    events = tuple(mwem_events(engine_config))
    parameters = {
        key: getattr(engine_config, key)
        for key in ("rounds", "select_epsilon", "measure_epsilon", "measure_noise", "measure", "learning_rate",
                    "replay_sweeps", "output", "support", "delta")
    }
    notes = [
        f"select and measure budgets are an even split of epsilon = {public.epsilon:.4g} over "
        f"{engine_config.rounds} rounds ({mode} accounting); universe 2^{log2:.1f} records"
    ]
    return ReleasePlan(
        mechanism="mwem", n=public.n, engine_config=engine_config, parameters=parameters, events=events,
        costs=mwem_costs(list(events), public.delta), mode=mode, progress_rounds=engine_config.rounds, notes=notes,
    )


def _plan_particles(keys: MWEMParticlesKeys, inputs: PlanInputs) -> ReleasePlan:
    from dq_engine.fit.mwem import mwem_events, selection_words
    from dq_engine.mechanisms.defaults import (
        MWEM_PARTICLES_MEASURE_ALL_CAP,
        MWEM_PARTICLES_ROUNDS_CAP,
        MWEM_PARTICLES_SELECT_SHARE,
        mwem_particles_config,
    )
    from dq_engine.privacy.accounting import mwem_costs

    public, mode = inputs.public, inputs.mode
    engine_config = mwem_particles_config(public, mode=mode, rounds=keys.rounds)
    events = tuple(mwem_events(engine_config))
    parameters = {
        key: getattr(engine_config, key)
        for key in ("rounds", "select_epsilon", "measure_rho", "measure_noise", "measure", "learning_rate",
                    "replay_sweeps", "final_sweeps", "final_min_sweeps",
                    "final_tolerance", "output", "support", "support_size",
                    "support_budget", "support_mix", "support_mix_rule", "support_moves", "select", "candidates",
                    "final_estimator", "delta")
    }
    notes = []
    measures_all = engine_config.select == "all"
    if keys.rounds is None:
        notes.append(
            f"T = M = {engine_config.rounds}: the rule floor(0.63 rho (0.01 n)^2) allows a round for each of the "
            f"workload's M marginals, more than the {MWEM_PARTICLES_ROUNDS_CAP} selected rounds' cap allows (M <= "
            f"{MWEM_PARTICLES_MEASURE_ALL_CAP}), so each is measured and none selected"
            if measures_all else
            f"T = {engine_config.rounds}: the rule floor(0.63 rho (0.01 n)^2) clamped to "
            f"[8, min(M = {public.n_marginals}, {MWEM_PARTICLES_ROUNDS_CAP})]"
        )
    split = ("the rest for Gaussian measurements" if measures_all else
             f"of the rest {MWEM_PARTICLES_SELECT_SHARE:.0%} for the selections and "
             f"{1 - MWEM_PARTICLES_SELECT_SHARE:.0%} for Gaussian measurements of the selected marginals")
    notes.append(
        f"epsilon = {public.epsilon:.4g} ({mode} accounting): 20% of rho for the prior's noisy one-way marginals "
        f"(replayed in the fit), {split} (each round {selection_words(engine_config)}); "
        f"{engine_config.support_size} particles, moved using only those noisy results"
    )
    return ReleasePlan(
        mechanism="mwem-particles", n=public.n, engine_config=engine_config, parameters=parameters, events=events,
        costs=mwem_costs(list(events), public.delta), mode=mode, progress_rounds=engine_config.rounds, notes=notes,
    )


def _run(plan: ReleasePlan, inputs: RunInputs):
    from dq_engine.fit.mwem import mwem
    from dqrelease.runtime.cluster import executor_for

    with executor_for(inputs.dask_address) as executor:  # the particles' move shards go to the workers
        result = mwem(
            inputs.data, inputs.workload, plan.engine_config, grant=inputs.grant, rng=inputs.rng,
            progress=inputs.progress, constraints=inputs.constraints, executor=executor,
        )
    return dataclasses.replace(result, mechanism=plan.mechanism)  # 'mwem-particles' is the engine's sampled support


MWEM = Mechanism(
    name="mwem",
    summary=(
        "multiplicative weights over every record of the domain; refused at plan time above 2^24 records "
        "(use mwem-particles or dualquery)"
    ),
    reference="MWEM (Hardt, Ligett & McSherry 2012, Algorithm 1)",
    keys=MWEMKeys, plan=_plan_mwem, run=_run, enforces_constraints=True,
)
MWEM_PARTICLES = Mechanism(
    name="mwem-particles",
    summary=(
        "MWEM on 200,000 particles (any domain size): noisy one-way marginals as the prior, exponential-mechanism "
        "selections, Gaussian measurements, particles resampled and moved using only the noisy results"
    ),
    reference="MWEM (Hardt, Ligett & McSherry 2012) on resample-move particles",
    keys=MWEMParticlesKeys, plan=_plan_particles, run=_run, enforces_constraints=True,
)
