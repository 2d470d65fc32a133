"""Tasks that plan the privacy cost and charge the ledger before any mechanism runs."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from prefect import get_run_logger, task

from dq_engine import Dataset, Workload
from dqrelease.errors import UnchargedRunError
from dqrelease.inputs.config import ReleaseConfig, config_hash
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.schema import Schema
from dqrelease.ledger import Ledger, ledger_file_errors
from dqrelease.ledger.budget_check import check_budget
from dqrelease.mechanisms import ReleasePlan
from dqrelease.outputs.replay import ReplayTarget
from dqrelease.outputs.runs import RunContext
from dqrelease.plan import build_workload, count_event, ledger_amounts, plan_release, planning_n
from dqrelease.tasks.common import TASK_OPTIONS, private_errors


def _ledger(config: ReleaseConfig) -> Ledger:
    ledger = Ledger.of(config.ledger)
    if config.ledger.initial_cap_epsilon is not None:
        ledger.ensure_cap(
            config.ledger.dataset_id, epsilon=config.ledger.initial_cap_epsilon, delta=config.ledger.initial_cap_delta
        )
    return ledger


@task(name="check-ledger", **TASK_OPTIONS)
def check_ledger(config: ReleaseConfig, plan: ReleasePlan | None = None) -> None:
    """Read the dataset's budget before the private data is read: a ledger that cannot be used stops the run here.

    A missing ledger is fine (the charge creates it). With ``plan`` (``n`` public: the cost is known) the ledger
    must also hold its cost (:func:`dqrelease.ledger.budget_check.check_budget`); nothing is charged here.

    Raises:
        LedgerError: The ledger file is damaged, locked past the timeout, or written by a newer dqrelease.
        BudgetRefusedError: The plan's cost does not fit the dataset's remaining budget.
    """
    if config.ledger.path.exists():
        with ledger_file_errors(config.ledger.path):
            Ledger.of(config.ledger).budgets(config.ledger.dataset_id)
    if plan is not None:
        check_budget(config, plan)


@task(name="build-workload", **TASK_OPTIONS)
def workload_from_config(config: ReleaseConfig, schema: Schema) -> Workload:
    """The public workload (its generator is seeded with the public workload seed)."""
    return build_workload(config.workload, domain_from_columns(schema.columns))


@task(name="plan-privacy", **TASK_OPTIONS)
def plan_privacy(config: ReleaseConfig, n: int, workload: Workload) -> ReleasePlan:
    """Fix the mechanism's parameters and privacy cost from public quantities only."""
    plan = plan_release(config, n=n, workload=workload)
    get_run_logger().info(
        "plan: %s, %s accounting, epsilon=%.4g delta=%.3g, rounds=%s",
        plan.mechanism, plan.mode, plan.charged.epsilon, plan.charged.delta, plan.parameters.get("rounds"),
    )
    return plan


@task(name="charge-budget", **TASK_OPTIONS)
@private_errors
def charge_budget(config: ReleaseConfig, plan: ReleasePlan, run: RunContext) -> dict[str, Any]:
    """Commit the plan's cost to the ledger (refused if it would exceed the dataset's cap, or reuses a seed)."""
    epsilon, delta, rho = ledger_amounts(plan)
    with ledger_file_errors(config.ledger.path):
        receipt = _ledger(config).charge(
            config.ledger.dataset_id, epsilon=epsilon, delta=delta, rho=rho, mode=plan.mode,
            mechanism=plan.mechanism, config_hash=config_hash(config), run_id=run.run_id,
            note=f"{plan.mechanism} release {config.name}", seed=config.run.seed,
        )
    return receipt.as_dict()


@task(name="noisy-count", **TASK_OPTIONS)
@private_errors
def count_records(
    config: ReleaseConfig, data: Dataset, run: RunContext, rng: np.random.Generator
) -> tuple[dict[str, Any], int]:
    """Charge, then release a Laplace-noised record count; return the receipt and the planning ``n``.

    The charge is ``n_epsilon`` plus δ/2 (the probability that the count's lower bound fails).
    """
    event = count_event(config)
    # both amounts are configured values, exact: ε as given, δ halved exactly
    with ledger_file_errors(config.ledger.path):
        receipt = _ledger(config).charge(
            config.ledger.dataset_id, epsilon=Fraction(event.epsilon), delta=Fraction(config.privacy.delta) / 2,
            rho=None, mode=config.privacy.accounting, mechanism="laplace-count", config_hash=config_hash(config),
            run_id=run.run_id, note=f"noisy record count for release {config.name}", seed=config.run.seed,
        )
    return receipt.as_dict(), _noisy_planning_n(config, data, rng)


@task(name="replay-noisy-count", **TASK_OPTIONS)
@private_errors
def replay_count(target: ReplayTarget, data: Dataset, rng: np.random.Generator) -> int:
    """The planning ``n`` of a replay: the release's noisy count drawn again from its seeded stream, uncharged.

    Only a checked replay may draw it (the release paid for this draw; the replay reproduces it exactly).

    Raises:
        UnchargedRunError: ``target`` is not the :class:`~dqrelease.outputs.replay.ReplayTarget` of a checked manifest.
    """
    if not isinstance(target, ReplayTarget):
        raise UnchargedRunError(
            "an uncharged noisy count is only a replay's: pass dqrelease.outputs.replay.prepare_replay(manifest)"
        )
    return _noisy_planning_n(target.config, data, rng)


def _noisy_planning_n(config: ReleaseConfig, data: Dataset, rng: np.random.Generator) -> int:
    """Draw the noisy record count and return its planning ``n`` (the one draw a release and its replay share).

    The count gets exact discrete Laplace noise of scale ``1/n_epsilon``
    (:func:`dq_engine.privacy.noise.discrete_laplace`; sensitivity 1 under add/remove neighbours).
    :func:`~dqrelease.plan.noisy_count_lower_bound` fails only when the noise is at least ``t + 1``
    (``t = ln(1/(2·failure))/ε``), and the discrete tail ``P[Z ≥ k] = e^{-εk}/(1 + e^{-ε}) ≤ e^{-ε(k-1)}/2`` keeps
    that below ``e^{-εt}/2``, the charged δ/2.
    """
    from dq_engine.privacy.noise import discrete_laplace

    noisy = discrete_laplace(np.array([data.n]), scale=1.0 / count_event(config).epsilon, rng=rng)
    return planning_n(config, int(noisy[0]))
