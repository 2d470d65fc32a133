"""Dispatch from a release plan to the dq_engine mechanism that runs it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dq_engine import Dataset, RoundDiagnostics, SynthesisResult, Workload, dqrs, dualquery
from dqrelease.config import ReleaseConfig
from dqrelease.errors import ConfigInvalidError

__all__ = ["plan_other_mechanism", "run_mechanism"]


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
        true_answers: Exact answers already computed (partitioned on a cluster), or None.
        dask_address: Scheduler address for mechanisms with parallel inner work (FEM's oracle calls).
    """
    runners = {"dualquery": dualquery, "dqrs": dqrs}
    if plan.mechanism not in runners:
        raise ConfigInvalidError(f"mechanism {plan.mechanism!r} is not available in the pipeline")
    return runners[plan.mechanism](
        data, workload, plan.engine_config, rng=rng, progress=progress, true_answers=true_answers
    )


def plan_other_mechanism(config: ReleaseConfig, n: int) -> Any:
    """Plan the papers' other mechanisms (FEM, sepFEM, MWEM, randomized response)."""
    raise ConfigInvalidError(f"mechanism {config.mechanism.name!r} is not available in the pipeline")
