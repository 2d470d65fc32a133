"""The ``release`` flow: raw table in, differentially private synthetic table out.

Stages (each a task; the flows only compose them): load config, build the public workload, plan the
privacy cost (public quantities only), ingest into DuckDB, validate the raw table (Great Expectations),
discretize in SQL, charge the ledger, synthesize, decode and expand, validate the synthetic table, stage the
outputs, write the internal error report and the manifests, publish atomically. Any failure removes the
staged files; a charge made before the failure stays (charges are never refunded).

``release_many`` runs several releases in one flow: each is prepared and charged to its own ledger entry,
then all mechanisms run at once on the task runner (a Dask cluster when ``dask_address`` is given).

Usable from other Prefect flows: ``from dqrelease.flows.release import release``. To run on Dask, call
:func:`run_release` (or ``dqrelease run --dask ADDRESS``), which attaches a ``DaskTaskRunner``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow

from dq_engine import Dataset, SynthesisResult, Workload, make_rng
from dq_engine.rng import spawn
from dqrelease.config import ReleaseConfig
from dqrelease.mechanisms import ReleasePlan
from dqrelease.runs import RunContext, new_run, run_seed
from dqrelease.schema import Schema
from dqrelease.tasks.outputs import (
    check_synthetic,
    decode_synthetic,
    error_report,
    publish_release,
    stage_outputs,
    write_manifests,
)
from dqrelease.tasks.prepare import discretize_raw, ingest_raw, load_release_config, validate_raw
from dqrelease.tasks.privacy import charge_budget, count_records, plan_privacy, workload_from_config
from dqrelease.tasks.synthesize import answer_partition, synthesize

ANSWER_PARTITIONS = 8
"""Marginal blocks the workload is split into for answering on a cluster."""


@dataclass(kw_only=True)
class _Prepared:
    """A release after its charge, before its mechanism."""

    config_path: str
    config: ReleaseConfig
    schema: Schema
    workload: Workload
    plan: ReleasePlan
    run: RunContext
    data: Dataset
    receipts: list[dict[str, Any]]
    seed_file: str | None
    rngs: dict[str, np.random.Generator]


def _prepare(config_path: str, *, seed: int | None, output_directory: str | None, charge: bool) -> _Prepared:
    config, schema = load_release_config(config_path)
    workload = workload_from_config(config, schema)
    plan = plan_privacy(config, int(config.privacy.n), workload) if config.privacy.n != "noisy" else None
    run = new_run(config, output=Path(output_directory) if output_directory else None)
    try:
        used_seed = seed if seed is not None else run_seed(config)
        # independent streams per stage, so the result does not depend on where each stage runs
        rngs = dict(zip(("count", "mechanism", "decode", "report"), spawn(make_rng(used_seed), 4), strict=True))
        seed_file = str(run.write_seed(used_seed)) if run.seeded and seed is None else None
        rows = ingest_raw(config, schema, run)
        validate_raw(config, schema, run, rows)
        data = discretize_raw(schema, run)
        receipts = []
        if plan is None:  # n is private: charge and release a noisy count, then plan with its lower bound
            count_receipt, n_plan = count_records(config, data, run, rngs["count"])
            receipts.append(count_receipt)
            plan = plan_privacy(config, n_plan, workload)
        if charge:
            receipts.append(charge_budget(config, plan, run))
    except BaseException:
        run.abandon()
        raise
    return _Prepared(
        config_path=config_path, config=config, schema=schema, workload=workload, plan=plan, run=run, data=data,
        receipts=receipts, seed_file=seed_file, rngs=rngs,
    )


def _answers_on_cluster(prepared: _Prepared) -> np.ndarray:
    workload = prepared.workload
    blocks = np.array_split(np.arange(workload.n_marginals), min(ANSWER_PARTITIONS, workload.n_marginals))
    futures = [answer_partition.submit(prepared.data, workload.subset(block)) for block in blocks]
    return np.concatenate([future.result() for future in futures])


def _finish(prepared: _Prepared, result: SynthesisResult) -> dict[str, Any]:
    config, schema, run, plan = prepared.config, prepared.schema, prepared.run, prepared.plan
    codes, frame = decode_synthetic(config, schema, result, plan, prepared.rngs["decode"])
    check_synthetic(config, schema, frame)
    outputs = stage_outputs(config, frame, run)
    error_report(config, prepared.data, prepared.workload, result, plan, codes, run, prepared.rngs["report"])
    config_path = str(Path(prepared.config_path).resolve())
    write_manifests(config, config_path, plan, prepared.receipts, outputs, len(frame), prepared.seed_file, run)
    paths = publish_release(run)
    return {
        "run_id": run.run_id,
        **paths,
        "outputs": outputs,
        "privacy": plan.as_dict()["costs"],
        "accounting_mode": plan.mode,
    }


@flow(name="dqrelease-release", persist_result=False, validate_parameters=False)
def release(
    config_path: str,
    *,
    seed: int | None = None,
    output_directory: str | None = None,
    charge: bool = True,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Run one release.

    Args:
        config_path: Path of the release TOML file.
        seed: Seed override (used by ``dqrelease verify`` to replay a seeded release); None = the config's.
        output_directory: Override of ``output.directory`` (``verify`` writes into a scratch directory).
        charge: Charge the ledger. Only ``verify`` turns this off: its replay reproduces an output that was
            already charged and publishes nothing.
        dask_address: Scheduler address when the flow's task runner is a ``DaskTaskRunner`` (set by
            :func:`run_release`): answering and the mechanism are then submitted to the cluster.

    Returns:
        Public summary: run id, directories, output hashes, privacy cost charged.
    """
    prepared = _prepare(config_path, seed=seed, output_directory=output_directory, charge=charge)
    try:
        if dask_address is None:
            result = synthesize(prepared.plan, prepared.data, prepared.workload, prepared.rngs["mechanism"])
        else:
            answers = _answers_on_cluster(prepared)
            result = synthesize.submit(
                prepared.plan, prepared.data, prepared.workload, prepared.rngs["mechanism"], answers, dask_address
            ).result()
        return _finish(prepared, result)
    except BaseException:
        prepared.run.abandon()
        raise


@flow(name="dqrelease-release-many", persist_result=False, validate_parameters=False)
def release_many(config_paths: list[str], *, dask_address: str | None = None) -> list[dict[str, Any]]:
    """Run several releases; their mechanisms run concurrently on the task runner.

    Each release is prepared and charged to its own ledger entry (its config's ``ledger.dataset_id``),
    e.g. one synthetic table per state or per year. A release that fails before its charge stops the flow
    before any mechanism runs.
    """
    prepared: list[_Prepared] = []
    try:
        for path in config_paths:
            prepared.append(_prepare(path, seed=None, output_directory=None, charge=True))
        futures = [
            synthesize.submit(p.plan, p.data, p.workload, p.rngs["mechanism"], None, dask_address) for p in prepared
        ]
        return [_finish(p, future.result()) for p, future in zip(prepared, futures, strict=True)]
    except BaseException:
        for p in prepared:
            p.run.abandon()
        raise


def run_release(config_path: str, *, dask_address: str | None = None, **options: Any) -> dict[str, Any]:
    """Run :func:`release`, on a Dask cluster when ``dask_address`` (or the config's ``run.dask_address``) is set.

    ``dask_address`` is ``local`` / ``local:N`` (a cluster of N worker processes started here) or a scheduler
    URL; a remote cluster's workers must reach the same Prefect API (see :mod:`dqrelease.cluster`).
    """
    address = dask_address or load_release_config.fn(config_path)[0].run.dask_address
    if address is None:
        return release(config_path, **options)
    from prefect_dask import DaskTaskRunner

    from dqrelease.cluster import dask_scheduler

    with dask_scheduler(address) as scheduler:
        flow_on_dask = release.with_options(task_runner=DaskTaskRunner(address=scheduler))
        return flow_on_dask(config_path, dask_address=scheduler, **options)
