"""Planning FEM, sepFEM, MWEM (universe or particles) and randomized response; dispatch from a plan to the engine.

Plans use public quantities only (:class:`dq_engine.defaults.PublicQuantities`: the public ``n``, the
mechanism's target (ε, δ), the domain, the workload's size) and the same default rules as
``bench/mechanisms.py`` (:mod:`dq_engine.defaults`); keys given in ``[mechanism]`` replace a rule's value
and the budgets are calibrated around them in the config's accounting mode, so the charged cost never
exceeds the target. Mechanisms that cannot run usefully on the domain are refused here, before the data is
read and before any charge:

* **MWEM** keeps one weight per record of the universe and refuses universes above ``2^24`` records
  (:data:`dq_engine.mwem.MAX_UNIVERSE_LOG2`), pointing to ``mwem-particles`` (MWEM on a fixed number of
  resampled particles, no universe limit) or ``dualquery``;
* **randomized response** refuses domains whose universe ``p`` cannot be computed (``log2 U > 1000``) and
  domains where even its best estimate is noise: when the worst-case standard deviation ``1/(2p√n)`` of
  the unbiased estimator exceeds :data:`RR_MAX_ESTIMATE_SD`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dq_engine import Dataset, PureDpEvent, RoundDiagnostics, SynthesisResult, Workload, dqrs, dualquery
from dq_engine.defaults import (
    FEM_ROUNDS_CAP,
    MWEM_PARTICLES_ROUNDS_CAP,
    SEPFEM_ROUNDS_CAP,
    PublicQuantities,
    fem_config,
    mwem_config,
    mwem_particles_config,
    sepfem_config,
)
from dq_engine.errors import AccountingError, DQEngineError, UniverseTooLargeError
from dq_engine.fem import fem, fem_costs, fem_events
from dq_engine.mwem import MAX_UNIVERSE_LOG2, mwem, mwem_costs, mwem_events
from dq_engine.randomized_response import (
    MAX_RR_UNIVERSE_LOG2,
    RandomizedResponseConfig,
    estimate_sd_bound,
    keep_probability,
    randomized_response,
)
from dq_engine.sepfem import sepfem
from dqrelease.config import ReleaseConfig
from dqrelease.errors import ConfigInvalidError
from dqrelease.plan import ReleasePlan, mechanism_budget, oracle_config, oracle_parameters

__all__ = ["RR_LABEL", "RR_MAX_ESTIMATE_SD", "plan_other_mechanism", "run_mechanism"]

RR_MAX_ESTIMATE_SD = 0.5
"""Largest worst-case standard deviation of randomized response's unbiased estimate a release may have.

Answers are fractions in [0, 1]: with a standard deviation above 0.5 a ±2σ interval covers more than the
whole range, so the release would spend its budget on noise.
"""

RR_LABEL = "mechanism E: per-record randomized response"
"""The label of randomized response's privacy event (as :func:`dq_engine.randomized_response` writes it)."""


def _public(config: ReleaseConfig, n: int, workload: Workload) -> PublicQuantities:
    epsilon, delta = mechanism_budget(config)
    return PublicQuantities(
        n=n, epsilon=epsilon, delta=delta, domain=workload.domain, n_queries=len(workload),
        n_marginals=workload.n_marginals,
    )


def _plan_game(config: ReleaseConfig, public: PublicQuantities) -> ReleasePlan:
    """FEM / sepFEM: the rule's T (or mechanism.rounds), ε₀ calibrated to the target, s and η by rule."""
    m = config.mechanism
    mode = config.privacy.accounting
    oracle = oracle_config(config) if "oracle" in m.model_fields_set else None
    build = fem_config if m.name == "fem" else sepfem_config
    engine_config = build(
        public, mode=mode, rounds=m.rounds, epsilon_0=m.epsilon_0, samples=m.samples, noise_scale=m.eta,
        oracle=oracle, workers=m.workers,
    )
    events = tuple(fem_events(engine_config.epsilon_0, engine_config.rounds))
    notes = []
    if m.rounds is None and m.epsilon_0 is None:
        cap = FEM_ROUNDS_CAP if m.name == "fem" else SEPFEM_ROUNDS_CAP
        notes.append(f"T = {engine_config.rounds}: the rule n sqrt(8 rho) / (2 ln 2N) clamped to [10, {cap}]")
    if m.epsilon_0 is None:
        notes.append(
            f"epsilon_0 = {engine_config.epsilon_0:.5g} is the largest per-selection epsilon within "
            f"epsilon = {public.epsilon:.4g} ({mode} accounting)"
        )
    elif m.rounds is None:
        notes.append(
            f"T = {engine_config.rounds} is the largest number of selections within epsilon = {public.epsilon:.4g}"
        )
    parameters = {
        "epsilon_0": engine_config.epsilon_0,
        "noise_scale": engine_config.noise_scale,
        "samples": engine_config.samples,
        "rounds": engine_config.rounds,
        "perturbation": engine_config.perturbation if m.name == "fem" else "separator-laplace",
        "burn_in": engine_config.burn_in,
        "delta": public.delta,
        "workers": engine_config.workers,
        "oracle": oracle_parameters(engine_config.oracle),
    }
    return ReleasePlan(
        mechanism=m.name, n=public.n, engine_config=engine_config, parameters=parameters, events=events,
        costs=fem_costs(list(events), public.delta), mode=mode, notes=notes,
    )


def _plan_mwem(config: ReleaseConfig, public: PublicQuantities) -> ReleasePlan:
    """MWEM over the whole universe (refused above 2^24 records), budgets calibrated to the target."""
    log2 = public.domain.universe_log2
    if log2 > MAX_UNIVERSE_LOG2 + 1e-9:
        raise ConfigInvalidError(
            f"mechanism 'mwem' keeps one weight per record: the schema's domain has 2^{log2:.1f} records, more than "
            f"MWEM's limit of 2^{MAX_UNIVERSE_LOG2}; use mechanism.name = 'mwem-particles' (MWEM on a fixed number "
            "of particles) or 'dualquery' for this schema, or drop or coarsen columns"
        )
    mode = config.privacy.accounting
    engine_config = mwem_config(public, mode=mode, rounds=config.mechanism.rounds)
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
        costs=mwem_costs(list(events), public.delta), mode=mode, notes=notes,
    )


def _plan_mwem_particles(config: ReleaseConfig, public: PublicQuantities) -> ReleasePlan:
    """MWEM on resampled particles (any domain): the benchmark's rule, budgets calibrated to the target."""
    mode = config.privacy.accounting
    rounds = config.mechanism.rounds
    engine_config = mwem_particles_config(public, mode=mode, rounds=rounds)
    events = tuple(mwem_events(engine_config))
    parameters = {
        key: getattr(engine_config, key)
        for key in ("rounds", "select_epsilon", "measure_rho", "measure_noise", "measure", "learning_rate",
                    "replay_sweeps", "final_sweeps", "output", "support", "support_size", "support_budget",
                    "support_mix", "support_moves", "delta")
    }
    notes = []
    if rounds is None:
        notes.append(
            f"T = {engine_config.rounds}: the rule floor(0.63 rho (0.01 n)^2) clamped to "
            f"[8, min(M = {public.n_marginals}, {MWEM_PARTICLES_ROUNDS_CAP})]"
        )
    notes.append(
        f"epsilon = {public.epsilon:.4g} ({mode} accounting): 10% of rho for the prior's noisy one-way marginals, "
        "of the rest 30% for the selections and 70% for Gaussian measurements of the selected marginals; "
        f"{engine_config.support_size} particles, moved using only those noisy results"
    )
    return ReleasePlan(
        mechanism="mwem-particles", n=public.n, engine_config=engine_config, parameters=parameters, events=events,
        costs=mwem_costs(list(events), public.delta), mode=mode, notes=notes,
    )


def _plan_randomized_response(config: ReleaseConfig, public: PublicQuantities) -> ReleasePlan:
    """Mechanism E with the whole target ε (pure), refused where its estimates would be noise."""
    domain, epsilon = public.domain, public.epsilon
    try:
        sd = estimate_sd_bound(epsilon, domain, public.n)
    except UniverseTooLargeError:
        raise ConfigInvalidError(
            f"mechanism 'randomized_response' needs a domain of at most 2^{MAX_RR_UNIVERSE_LOG2:g} records; this "
            f"schema's has 2^{domain.universe_log2:.1f}; drop or coarsen columns, or use mechanism.name = 'dualquery'"
        ) from None
    p = keep_probability(epsilon, domain)
    if sd > RR_MAX_ESTIMATE_SD:
        raise ConfigInvalidError(
            f"mechanism 'randomized_response' would publish noise: with 2^{domain.universe_log2:.1f} records in the "
            f"domain and epsilon = {epsilon:.4g} a record is kept with probability {p:.3g}, so an estimated answer "
            f"has a standard deviation up to {sd:.3g} (limit {RR_MAX_ESTIMATE_SD}); drop or coarsen columns, "
            "raise privacy.epsilon, or use mechanism.name = 'dualquery'"
        )
    engine_config = RandomizedResponseConfig(epsilon=epsilon, delta=public.delta)
    events = (PureDpEvent(epsilon=epsilon, count=1, label=RR_LABEL),)
    parameters = {
        "epsilon": epsilon, "keep_probability": p, "universe_log2": domain.universe_log2,
        "estimate_sd_bound": sd, "delta": public.delta,
    }
    notes = [
        f"each record is kept with probability {p:.4g}, else replaced by a uniform record; the workload's "
        f"unbiased estimates have a standard deviation of at most {sd:.3g}"
    ]
    return ReleasePlan(
        mechanism="randomized_response", n=public.n, engine_config=engine_config, parameters=parameters,
        events=events, costs=mwem_costs(list(events), public.delta), mode=config.privacy.accounting, notes=notes,
    )


def plan_other_mechanism(config: ReleaseConfig, n: int, workload: Workload) -> ReleasePlan:
    """Plan FEM, sepFEM, MWEM, MWEM on particles or randomized response from public quantities only.

    Raises:
        ConfigInvalidError: If the target cannot be met, explicit parameters exceed it, or the mechanism
            cannot run usefully on the schema's domain.
    """
    public = _public(config, n, workload)
    planners = {
        "fem": _plan_game,
        "sepfem": _plan_game,
        "mwem": _plan_mwem,
        "mwem-particles": _plan_mwem_particles,
        "randomized_response": _plan_randomized_response,
    }
    if config.mechanism.name not in planners:
        raise ConfigInvalidError(f"mechanism {config.mechanism.name!r} is not available in the pipeline")
    try:
        return planners[config.mechanism.name](config, public)
    except AccountingError as error:
        raise ConfigInvalidError(f"privacy: {error}") from None
    except DQEngineError as error:
        raise ConfigInvalidError(f"mechanism: {error}") from None


def run_mechanism(
    plan: Any,
    data: Dataset,
    workload: Workload,
    *,
    rng: np.random.Generator,
    progress: Callable[[RoundDiagnostics], None] | None = None,
    true_answers: np.ndarray | None = None,
    dask_address: str | None = None,
) -> SynthesisResult:
    """Run the mechanism the plan describes.

    Args:
        plan: The release plan.
        data: Private dataset.
        workload: The workload.
        rng: The mechanism's generator.
        progress: Per-round callback (public diagnostics only are forwarded to the UI).
        true_answers: Exact answers already computed (partitioned on a cluster), or None (DualQuery/DQRS
            use them; the other mechanisms compute their own).
        dask_address: Scheduler address: FEM's and sepFEM's oracle calls of a round then run on the cluster.
    """
    name = plan.mechanism
    if name in ("dualquery", "dqrs"):
        runner = dualquery if name == "dualquery" else dqrs
        return runner(data, workload, plan.engine_config, rng=rng, progress=progress, true_answers=true_answers)
    if name in ("fem", "sepfem"):
        game = fem if name == "fem" else sepfem
        if dask_address is None:
            return game(data, workload, plan.engine_config, rng=rng, progress=progress)
        from dqrelease.cluster import dask_executor

        with dask_executor(dask_address) as executor:
            return game(data, workload, plan.engine_config, rng=rng, progress=progress, executor=executor)
    if name == "mwem":
        return mwem(data, workload, plan.engine_config, rng=rng, progress=progress)
    if name == "mwem-particles":  # the engine's MWEM with support="sampled"; named as the release chose it
        result = mwem(data, workload, plan.engine_config, rng=rng, progress=progress)
        return dataclasses.replace(result, mechanism=name)
    if name == "randomized_response":
        return randomized_response(data, plan.engine_config, rng=rng)
    raise ConfigInvalidError(f"mechanism {name!r} is not available in the pipeline")
