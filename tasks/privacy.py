"""Tasks that plan the privacy cost and charge the ledger before any mechanism runs."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task

from dq_engine import Workload
from dqrelease.config import ReleaseConfig, Schema, config_hash
from dqrelease.discretize import domain_from_schema
from dqrelease.ledger import Ledger
from dqrelease.plan import ReleasePlan, build_workload, plan_release
from dqrelease.runs import RunContext
from tasks.common import TASK_OPTIONS


@task(name="plan-privacy", **TASK_OPTIONS)
def plan_privacy(config: ReleaseConfig, schema: Schema) -> tuple[ReleasePlan, Workload]:
    """Build the public workload and the privacy plan from public quantities only."""
    workload = build_workload(config.workload, domain_from_schema(schema))
    plan = plan_release(config, n=int(config.privacy.n))
    get_run_logger().info(
        "plan: %s, %s accounting, epsilon=%.4g delta=%.3g, parameters=%s",
        plan.mechanism, plan.mode, plan.charged.epsilon, plan.charged.delta, plan.parameters,
    )
    return plan, workload


@task(name="charge-budget", **TASK_OPTIONS)
def charge_budget(config: ReleaseConfig, plan: ReleasePlan, run: RunContext) -> dict[str, Any]:
    """Commit the plan's cost to the ledger (refused if it would exceed the dataset's cap)."""
    ledger = Ledger(config.ledger.path)
    if config.ledger.initial_cap_epsilon is not None:
        ledger.ensure_cap(
            config.ledger.dataset_id, epsilon=config.ledger.initial_cap_epsilon, delta=config.ledger.initial_cap_delta
        )
    cost = plan.charged
    receipt = ledger.charge(
        config.ledger.dataset_id,
        epsilon=cost.epsilon,
        delta=cost.delta,
        rho=cost.rho,
        mode=plan.mode,
        mechanism=plan.mechanism,
        config_hash=config_hash(config),
        run_id=run.run_id,
        note=f"{plan.mechanism} release {config.name}",
    )
    return receipt.as_dict()
