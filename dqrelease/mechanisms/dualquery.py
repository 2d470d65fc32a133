"""DualQuery and DQRS in the pipeline: keys, plan rule (T calibrated to the target) and run.

* ``dualquery`` -- DualQuery (Gaboardi, Arias, Hsu, Roth & Wu 2014, "Dual Query: Practical Private Query Release for
  High Dimensional Data", Algorithm 2): multiplicative weights over the workload's queries, one CP-SAT best-response
  record per round; privacy by Theorems 4.2/4.3 (paper mode) or zCDP (tight mode).
* ``dqrs`` -- DualQuery with rejection sampling (Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient
  Algorithms for Private Synthetic Data Release", Algorithm 4, Theorem 17): samples of earlier rounds are reused by
  rejection sampling.

``T`` is the largest number of rounds whose cost in the config's accounting mode is within the mechanism's
target (:func:`dq_engine.privacy.calibration.calibrate_rounds`), unless ``rounds`` is given (then it is checked).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

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

__all__ = [
    "DEFAULT_ETA", "DEFAULT_SAMPLES", "DQRS", "DUALQUERY", "MIN_ROUNDS", "ROUNDS_CAP", "DQRSKeys", "DualQueryKeys",
]

DEFAULT_ETA = 1.0
"""η when none is given (the shipped examples' value; Gaboardi et al. 2014 use 0.4-2.0)."""
DEFAULT_SAMPLES = (300, 200, 100, 50, 20)
"""s when none is given: the first that leaves at least :data:`MIN_ROUNDS` rounds within the budget."""
MIN_ROUNDS = 10
"""Fewest rounds the default s aims for (fewer rounds leave too few best responses to seed anything)."""
ROUNDS_CAP = 300
"""Most rounds ``T`` the rule gives. A round's privacy cost falls as ``1/n``, so without a cap ``T`` grew with the
table (282 rounds at KDD99's 494,021 rows, 1,310 at 5 million, about 26,000 at 100 million) and so did the
mechanism's time, although its records only seed the table fit (docs/benchmarks.md, "Fidelity": they add little
to the fitted table). 300 is above every release measured (Adult 60, KDD99 282), so their plans are unchanged; at
the cap the budget the mechanism cannot use goes to the fit (:mod:`dqrelease.mechanisms.fit`)."""


class _DualFamilyKeys(MechanismKeys):
    """Keys shared by DualQuery and DQRS."""

    eta: float = Field(default=DEFAULT_ETA, gt=0, le=100, description="Learning rate η of the MW update.")
    samples: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description=(
            f"Queries sampled per round s (default {DEFAULT_SAMPLES[0]}, or the largest of {list(DEFAULT_SAMPLES)} "
            f"that leaves at least {MIN_ROUNDS} rounds)."
        ),
    )
    rounds: int | None = Field(
        default=None, ge=1, le=100_000,
        description=f"Rounds T; if omitted, the largest that fits privacy.epsilon in the accounting mode, at most "
        f"{ROUNDS_CAP}.",
    )
    free_policy: Literal["zero", "random", "dp-marginal"] = Field(
        default="random", description="How attributes no sampled query touches are set."
    )
    free_epsilon: float = Field(
        default=0.0, ge=0, le=100, description="epsilon of the Laplace noisy marginals (free_policy 'dp-marginal')."
    )
    free_noise: Literal["laplace", "gaussian"] = Field(
        default="laplace",
        description=(
            "dp-marginal: Laplace marginals (pure epsilon, free_epsilon) or Gaussian ones (zCDP, free_rho; the useful "
            "choice with thousands of attributes)."
        ),
    )
    free_rho: float = Field(
        default=0.0, ge=0, le=100, description="zCDP rho of the Gaussian noisy marginals (free_policy 'dp-marginal')."
    )
    rows_per_round: int = Field(
        default=1, ge=1, le=1024,
        description="Rows per round, free attributes redrawn in each (1 = the paper; post-processing, no extra cost).",
    )
    free_scope: Literal["untouched", "slack"] = Field(
        default="untouched",
        description="Attributes the free policy fills (docs/decisions.md, 'Slack free scope').",
    )
    oracle: OracleKeys = Field(default_factory=OracleKeys, description="Section [mechanism.oracle].")
    fit: FitKeys = Field(default_factory=FitKeys, description="Section [mechanism.fit]: the table fit.")

    @model_validator(mode="after")
    def _check_free(self) -> _DualFamilyKeys:
        from dq_engine.errors import ConfigError
        from dq_engine.oracle.free_attributes import check_free_settings

        try:
            check_free_settings(
                policy=self.free_policy, noise=self.free_noise, epsilon=self.free_epsilon, rho=self.free_rho,
                rows_per_round=self.rows_per_round, scope=self.free_scope,
            )
        except ConfigError as error:
            raise ValueError(str(error)) from None
        return self

    def check_release(self, *, privacy, output) -> None:
        """Without rounds (or with the table fit), a target epsilon is required."""
        self.fit.check_release(privacy=privacy)
        if self.rounds is None and privacy.epsilon is None:
            raise ValueError("give mechanism.rounds or privacy.epsilon (T is then the largest that fits)")


class DualQueryKeys(_DualFamilyKeys):
    """``[mechanism]`` of ``name = "dualquery"``."""

    name: Literal["dualquery"] = "dualquery"


class DQRSKeys(_DualFamilyKeys):
    """``[mechanism]`` of ``name = "dqrs"``."""

    name: Literal["dqrs"] = "dqrs"
    topup_fraction: float = Field(default=0.25, ge=0, le=1, description="Top-up reserve fraction per round.")


def _default_samples(keys: DualQueryKeys | DQRSKeys, inputs: PlanInputs, topup: float) -> int:
    """The first of :data:`DEFAULT_SAMPLES` that leaves at least :data:`MIN_ROUNDS` rounds (public quantities only)."""
    from dq_engine.errors import AccountingError
    from dq_engine.privacy.calibration import calibrate_rounds

    public = inputs.public
    if keys.rounds is not None or public.epsilon is None:
        return DEFAULT_SAMPLES[0]
    for samples in DEFAULT_SAMPLES:
        try:
            rounds = calibrate_rounds(
                keys.name, epsilon=public.epsilon, delta=public.delta, eta=keys.eta, samples=samples, n=public.n,
                mode=inputs.mode, topup_fraction=topup, free_epsilon=keys.free_epsilon, free_rho=keys.free_rho,
                most=MIN_ROUNDS,
            )
        except AccountingError:
            continue
        if rounds >= MIN_ROUNDS:
            return samples
    return DEFAULT_SAMPLES[-1]


def _plan(keys: DualQueryKeys | DQRSKeys, inputs: PlanInputs) -> ReleasePlan:
    from dq_engine.errors import AccountingError
    from dq_engine.mechanisms.dqrs import DQRSConfig
    from dq_engine.mechanisms.dualquery import DualQueryConfig
    from dq_engine.privacy.accounting import compose, within_target
    from dq_engine.privacy.calibration import calibrate_rounds, mechanism_events

    public, mode, name = inputs.public, inputs.mode, keys.name
    topup = keys.topup_fraction if name == "dqrs" else 0.25
    analysis = "advanced_composition" if name == "dualquery" else "zcdp"
    samples = keys.samples if keys.samples is not None else _default_samples(keys, inputs, topup)
    common = {"eta": keys.eta, "samples": samples, "n": public.n, "free_epsilon": keys.free_epsilon,
              "free_rho": keys.free_rho, "topup_fraction": topup}

    def total(rounds: int) -> dict:
        events = mechanism_events(name, rounds=rounds, **common)
        return {
            "paper": compose(events, mode="paper", delta=public.delta, paper_analysis=analysis),
            "tight": compose(events, mode="tight", delta=public.delta),
        }

    notes = []
    if keys.rounds is not None:
        rounds = keys.rounds
        cost = total(rounds)[mode].epsilon
        if public.epsilon is not None and not within_target(cost, public.epsilon):
            raise AccountingError(
                f"mechanism.rounds = {rounds} costs epsilon {cost:.4g} > the mechanism's budget "
                f"{public.epsilon:.4g} ({mode} accounting); lower rounds or omit it"
            )
    else:
        rounds = calibrate_rounds(
            name, epsilon=public.epsilon, delta=public.delta, eta=keys.eta, samples=samples, n=public.n,
            mode=mode, topup_fraction=topup, free_epsilon=keys.free_epsilon, free_rho=keys.free_rho, most=ROUNDS_CAP,
        )
        if rounds == ROUNDS_CAP:
            notes.append(f"T = {rounds} is the rule's cap: more rounds would fit {name}'s own epsilon = "
                         f"{public.epsilon:.4g} on this many records, but its time would grow with n")
        else:
            notes.append(
                f"T = {rounds} is the largest number of rounds within {name}'s own epsilon = {public.epsilon:.4g}")
    shared = {
        "eta": keys.eta, "samples": samples, "rounds": rounds, "delta": public.delta,
        "free_policy": keys.free_policy, "free_epsilon": keys.free_epsilon, "free_noise": keys.free_noise,
        "free_rho": keys.free_rho, "rows_per_round": keys.rows_per_round, "free_scope": keys.free_scope,
        "oracle": oracle_config(keys.oracle, deterministic=inputs.deterministic),
    }
    engine_config = DQRSConfig(topup_fraction=topup, **shared) if name == "dqrs" else DualQueryConfig(**shared)
    parameters = {k: v for k, v in shared.items() if k != "oracle"}
    parameters["oracle"] = oracle_parameters(engine_config.oracle)
    if name == "dqrs":
        parameters["topup_fraction"] = topup
    return ReleasePlan(
        mechanism=name, n=public.n, engine_config=engine_config, parameters=parameters,
        events=tuple(mechanism_events(name, rounds=rounds, **common)), costs=total(rounds), mode=mode,
        progress_rounds=rounds, notes=notes,
    )


def _run(plan: ReleasePlan, inputs: RunInputs):
    from dq_engine.mechanisms.dqrs import dqrs
    from dq_engine.mechanisms.dualquery import dualquery

    runner = dualquery if plan.mechanism == "dualquery" else dqrs
    return runner(inputs.data, inputs.workload, plan.engine_config, rng=inputs.rng, progress=inputs.progress,
                  true_answers=inputs.true_answers, constraints=inputs.constraints, grant=inputs.grant)


DUALQUERY = Mechanism(
    name="dualquery",
    summary="MW over the queries, one CP-SAT best-response record per round",
    reference=(
        "DualQuery (Gaboardi et al. 2014, Dual Query: Practical Private Query Release for High Dimensional Data; "
        "Algorithm 2, Theorems 4.2/4.3)"
    ),
    keys=DualQueryKeys, plan=_plan, run=_run, needs_public_n=False, has_oracle=True, enforces_constraints=True,
)
DQRS = Mechanism(
    name="dqrs",
    summary="DualQuery with rejection sampling: reuses samples across rounds",
    reference=f"DQRS ({PAPER_ZCDP}; Algorithm 4, Theorem 17)",
    keys=DQRSKeys, plan=_plan, run=_run, needs_public_n=False, has_oracle=True, enforces_constraints=True,
)
