"""The mechanism task (per-round progress without timings: Prefect artifact, run log, progress events), answering.

Both run uncached and unpersisted (see :mod:`tasks.common`): a replayed mechanism output would be a fresh
draw the ledger never saw, and answers on the private data must never be stored.
"""

from __future__ import annotations

import numpy as np
from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from dq_engine import Dataset, RoundDiagnostics, SynthesisResult, Workload, answer_workload
from dqrelease.ledger.grants import MechanismGrant, granted_plan
from dqrelease.mechanisms import RunInputs, run_mechanism
from dqrelease.runtime import progress
from dqrelease.runtime.cluster import forward_progress
from dqrelease.tasks.common import TASK_OPTIONS, private_errors


@task(name="answer-partition", **TASK_OPTIONS)
@private_errors
def answer_partition(data: Dataset, workload: Workload) -> np.ndarray:
    """Exact answers of one partition of the workload (a block of marginals) on the private data."""
    return answer_workload(data, workload)


@task(name="synthesize", **TASK_OPTIONS)
@private_errors
def synthesize(
    grant: MechanismGrant,
    data: Dataset,
    workload: Workload,
    rng: np.random.Generator,
    true_answers: np.ndarray | None = None,
    dask_address: str | None = None,
) -> SynthesisResult:
    """Run the granted plan on the private data.

    Args:
        grant: From :func:`~dqrelease.ledger.grants.grant_after_charge` (the run's charge is in the ledger) or
            :func:`~dqrelease.ledger.grants.grant_for_replay`; anything else (a bare plan) is refused before the data
            is touched.
        data: The private dataset.
        workload: The public workload.
        rng: The mechanism's generator.
        true_answers: Exact answers already computed on a cluster, or None.
        dask_address: Scheduler address when parallel parts go to a Dask cluster.

    Raises:
        UnchargedRunError: ``grant`` is not a :class:`~dqrelease.ledger.grants.MechanismGrant`.
    """
    plan = granted_plan(grant)  # refuses anything but a MechanismGrant before the data is touched
    logger = get_run_logger()
    total = plan.progress_rounds
    stages = progress.RoundStages.of(plan)
    # on a Dask worker the events go to the client (the CLI's view); in the flow's process to its sinks
    send = progress.emit if dask_address is None else forward_progress
    artifact = create_progress_artifact(0.0, description=f"{plan.mechanism}: rounds completed (%)")
    step = max(1, total // 50)

    def on_round(diagnostics: RoundDiagnostics) -> None:
        # no round times leave the process: they include work on the private data (docs/engine.md, "What timing
        # reveals"); the internal error report keeps them
        public = progress.without_timings(diagnostics.public())
        stages.report(diagnostics.round, public, send)
        if diagnostics.round % step == 0 or diagnostics.round == total:
            update_progress_artifact(artifact, 100.0 * diagnostics.round / total)
            logger.info("%s", progress.round_line(diagnostics.round, total, public))

    inputs = RunInputs(
        data=data, workload=workload, rng=rng, progress=on_round, true_answers=true_answers, dask_address=dask_address
    )
    return run_mechanism(grant, inputs)
