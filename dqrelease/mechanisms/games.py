"""FEM and sepFEM in the pipeline: keys, plan rule and run.

Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release",
Algorithms 1-3.

Both play the primal game: each round selects a query with the exponential mechanism (ε₀ per selection) and
the data player answers with follow-the-perturbed-leader records from the CP-SAT oracle; the release is the
union of the per-round samples. The rule (:func:`dq_engine.mechanisms.defaults.game_config`) sets T, s and η from public
quantities and calibrates ε₀ to the target; keys given replace the rule's values.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dq_engine.privacy.accounting import PAPER_ZCDP
from dqrelease.mechanisms.base import (
    Mechanism,
    MechanismKeys,
    OracleKeys,
    PlanInputs,
    ReleasePlan,
    RunInputs,
    oracle_config,
    oracle_parameters,
)
from dqrelease.mechanisms.fit import FitKeys

__all__ = ["FEM", "SEPFEM", "FEMKeys", "SepFEMKeys"]


class _GameKeys(MechanismKeys):
    """Keys shared by FEM and sepFEM."""

    eta: float | None = Field(
        default=None, gt=0, le=100, description="Perturbation scale (default 1.0 for FEM, 0.5 for sepFEM)."
    )
    samples: int | None = Field(
        default=None, ge=1, le=10_000, description="Oracle calls per round (default clamp(1500 // (T + 1), 4, 50))."
    )
    rounds: int | None = Field(
        default=None, ge=1, le=100_000,
        description="Rounds T (default n sqrt(8 rho) / (2 ln 2N) in [10, 120] for FEM, [10, 100] for sepFEM).",
    )
    epsilon_0: float | None = Field(
        default=None, gt=0, le=100,
        description="epsilon of each query selection; calibrated to privacy.epsilon if omitted.",
    )
    workers: int = Field(
        default=1, ge=1, le=64,
        description="Processes for a round's oracle calls (on Dask the cluster runs them instead).",
    )
    oracle: OracleKeys = Field(
        default_factory=OracleKeys,
        description="Section [mechanism.oracle]; without it: CP-SAT alone, 1 worker, deterministic limit 0.2 per call.",
    )
    fit: FitKeys = Field(default_factory=FitKeys, description="Section [mechanism.fit]: the table fit.")

    def check_release(self, *, privacy, output) -> None:
        """Without a target epsilon both rounds and epsilon_0 must be given."""
        self.fit.check_release(privacy=privacy)
        if privacy.epsilon is None and (self.rounds is None or self.epsilon_0 is None):
            raise ValueError(f"mechanism {self.name!r} needs privacy.epsilon, or both mechanism.rounds and epsilon_0")


class FEMKeys(_GameKeys):
    """``[mechanism]`` of ``name = "fem"``."""

    name: Literal["fem"] = "fem"


class SepFEMKeys(_GameKeys):
    """``[mechanism]`` of ``name = "sepfem"``."""

    name: Literal["sepfem"] = "sepfem"


def _plan(keys: FEMKeys | SepFEMKeys, inputs: PlanInputs) -> ReleasePlan:
    from dq_engine.mechanisms.defaults import FEM_ROUNDS_CAP, SEPFEM_ROUNDS_CAP, ftpl_oracle, game_config
    from dq_engine.mechanisms.fem import fem_events
    from dq_engine.privacy.accounting import fem_costs

    public, mode = inputs.public, inputs.mode
    oracle = None
    if keys.oracle.model_fields_set:  # the FTPL default, with the keys given replacing it
        oracle = oracle_config(keys.oracle, deterministic=inputs.deterministic, base=ftpl_oracle())
    engine_config = game_config(
        keys.name, public, mode=mode, rounds=keys.rounds, epsilon_0=keys.epsilon_0, samples=keys.samples,
        noise_scale=keys.eta, oracle=oracle, workers=keys.workers,
    )
    events = tuple(fem_events(engine_config.epsilon_0, engine_config.rounds))
    notes = []
    if keys.rounds is None and keys.epsilon_0 is None:
        cap = FEM_ROUNDS_CAP if keys.name == "fem" else SEPFEM_ROUNDS_CAP
        notes.append(f"T = {engine_config.rounds}: the rule n sqrt(8 rho) / (2 ln 2N) clamped to [10, {cap}]")
    if keys.epsilon_0 is None:
        notes.append(
            f"epsilon_0 = {engine_config.epsilon_0:.5g} is the largest per-selection epsilon within "
            f"epsilon = {public.epsilon:.4g} ({mode} accounting)"
        )
    elif keys.rounds is None:
        notes.append(
            f"T = {engine_config.rounds} is the largest number of selections within epsilon = {public.epsilon:.4g}"
        )
    parameters = {
        "epsilon_0": engine_config.epsilon_0,
        "noise_scale": engine_config.noise_scale,
        "samples": engine_config.samples,
        "rounds": engine_config.rounds,
        "perturbation": engine_config.perturbation if keys.name == "fem" else "separator-laplace",
        "burn_in": engine_config.burn_in,
        "delta": public.delta,
        "workers": engine_config.workers,
        "oracle": oracle_parameters(engine_config.oracle),
    }
    return ReleasePlan(
        mechanism=keys.name, n=public.n, engine_config=engine_config, parameters=parameters, events=events,
        costs=fem_costs(list(events), public.delta), mode=mode, progress_rounds=engine_config.rounds + 1,
        notes=notes,
    )


def _run(plan: ReleasePlan, inputs: RunInputs):
    from dq_engine.mechanisms.fem import fem
    from dq_engine.mechanisms.sepfem import sepfem
    from dqrelease.runtime.cluster import executor_for

    game = fem if plan.mechanism == "fem" else sepfem
    with executor_for(inputs.dask_address) as executor:
        return game(
            inputs.data, inputs.workload, plan.engine_config, grant=inputs.grant, rng=inputs.rng,
            progress=inputs.progress, executor=executor, constraints=inputs.constraints,
        )


FEM = Mechanism(
    name="fem",
    summary=(
        "exponential-mechanism query selection, follow-the-perturbed-leader records; publishes the union of the "
        "per-round samples"
    ),
    reference=f"FEM ({PAPER_ZCDP}; Algorithms 1-2)",
    keys=FEMKeys, plan=_plan, run=_run, has_oracle=True, enforces_constraints=True,
)
SEPFEM = Mechanism(
    name="sepfem",
    summary="FEM with Laplace-weighted separator queries as the perturbation",
    reference=f"sepFEM ({PAPER_ZCDP}; Algorithm 3)",
    keys=SepFEMKeys, plan=_plan, run=_run, has_oracle=True, enforces_constraints=True,
)
