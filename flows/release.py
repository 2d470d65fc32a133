"""The ``release`` flow: raw table in, differentially private synthetic table out.

Stages (each a task; the flows only compose them): load config, build the public workload, plan the
privacy cost (public quantities only), ingest into DuckDB, validate the raw table (Great Expectations),
discretize in SQL, charge the ledger, synthesize, decode and expand, validate the synthetic table, stage the
outputs, write the internal error report and the manifests, publish atomically. Any failure removes the
staged files; a charge made before the failure stays (charges are never refunded).

``release_many`` runs several releases in one flow: each is prepared and charged to its own ledger entry,
then all mechanisms run at once on the task runner (a Dask cluster when ``dask_address`` is given).

``replay_release`` re-runs a seeded release from its audit manifest (what ``dqrelease verify`` does): it is the
only flow that runs a mechanism without a ledger charge, and it can only be driven by a manifest whose config,
schema, input files, code and package versions pass :func:`dqrelease.outputs.replay.prepare_replay` before any data is
read. It charges nothing (the noisy count included), publishes nothing and removes its scratch directory.

A seeded config runs only with ``seeded_test_or_audit=True`` (a test or an audit; a warning is logged) and a seed
the dataset's ledger has not charged before (:mod:`dqrelease.ledger.seeds`); a replay runs only when the config's
ledger holds the release's charge (:func:`~dqrelease.ledger.grants.replay_charges`), checked before the ingest.

Invariant: no flow here takes a switch that turns charging off, a seed, or a plan. The mechanism task runs only
with a :class:`~dqrelease.ledger.grants.MechanismGrant`, issued after the ledger committed the run's charge or for a
checked replay.

Progress: each stage is announced to :mod:`dqrelease.runtime.progress` (``progress.stage(...)`` around its tasks;
the synthesize task reports the rounds), which ``dqrelease run`` shows; without a registered sink nothing is shown.

Usable from other Prefect flows: ``from dqrelease.flows.release import release``. To run on Dask, call
:func:`run_release` (or ``dqrelease run --dask ADDRESS``), which attaches a ``DaskTaskRunner``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow, get_run_logger

from dq_engine import Dataset, SynthesisResult, Workload, make_rng
from dq_engine.privacy.rng import spawn
from dqrelease.errors import note_committed_charge
from dqrelease.inputs.config import ReleaseConfig
from dqrelease.inputs.schema import Schema
from dqrelease.ledger.grants import MechanismGrant, grant_after_charge, grant_for_replay, replay_charges
from dqrelease.ledger.seeds import SEEDED_KEYWORD, SEEDED_WARNING, check_seeded_release
from dqrelease.mechanisms import ReleasePlan
from dqrelease.outputs.replay import check_inputs_unchanged, prepare_replay
from dqrelease.outputs.runs import RunContext, new_run, run_seed
from dqrelease.plan import check_release_memory, check_release_utility
from dqrelease.runtime import progress
from dqrelease.runtime.schedules import one_release_per_dataset
from dqrelease.tasks.common import failures_not_persisted
from dqrelease.tasks.outputs import (
    check_synthetic,
    error_report,
    publish_release,
    sample_synthetic,
    stage_outputs,
    write_manifests,
)
from dqrelease.tasks.prepare import discretize_raw, ingest_raw, load_release_config, validate_raw
from dqrelease.tasks.privacy import (
    charge_budget,
    check_ledger,
    count_records,
    plan_privacy,
    replay_count,
    workload_from_config,
)
from dqrelease.tasks.synthesize import answer_partition, synthesize

ANSWER_PARTITIONS = 8
"""Marginal blocks the workload is split into for answering on a cluster."""

STREAMS = ("count", "mechanism", "decode", "report")
"""The independent random streams of a run, spawned in this order from the run's seed."""


@dataclass(kw_only=True)
class _Prepared:
    """A release after its charge, before its mechanism."""

    config_path: str
    config: ReleaseConfig
    schema: Schema
    workload: Workload
    grant: MechanismGrant
    run: RunContext
    data: Dataset
    receipts: list[dict[str, Any]]
    seed_file: str | None
    rngs: dict[str, np.random.Generator]
    dask_address: str | None = None

    @property
    def plan(self) -> ReleasePlan:
        """The plan the charge paid for."""
        return self.grant.plan


def _streams(seed: int) -> dict[str, np.random.Generator]:
    """Independent streams per stage, so the result does not depend on where each stage runs."""
    return dict(zip(STREAMS, spawn(make_rng(seed), len(STREAMS)), strict=True))


def _read_private(config: ReleaseConfig, schema: Schema, run: RunContext, dask_address: str | None = None) -> Dataset:
    """Ingest, validate and discretize the private table (marked with the config's neighbouring relation).

    With ``dask_address`` validation and discretization run by chunks on the cluster's workers; the ingest into
    the working database stays here.
    """
    with progress.stage("ingest"):
        rows = ingest_raw(config, schema, run)
    with progress.stage("validate"):
        validate_raw(config, schema, run, rows, dask_address)
        return discretize_raw(schema, run, dask_address).with_neighbouring(config.privacy.neighbouring)


def _dataset_of(config_path: str, **_: Any) -> str:
    """The dataset a release charges (its config's ``ledger.dataset_id``): what a deployment run's slot is named by."""
    return load_release_config.fn(config_path)[0].ledger.dataset_id


def _abandon(runs: list[RunContext], receipts: list[dict[str, Any]], error: BaseException) -> None:
    """Remove failed runs' files; if the ledger already committed charges, ``error`` says so (never refunded)."""
    for run in runs:
        run.abandon()
    if receipts:
        note_committed_charge(error, sum(receipt["epsilon"] for receipt in receipts))


def _prepare(
    config_path: str,
    *,
    output_directory: str | None,
    accept_low_utility: bool = False,
    seeded: bool = False,
    dask_address: str | None = None,
) -> _Prepared:
    config, schema = load_release_config(config_path)
    check_seeded_release(config, test_or_audit=seeded, fix=f"pass {SEEDED_KEYWORD}=True")
    if config.run.seed_mode == "seeded":
        get_run_logger().warning(SEEDED_WARNING)
    workload = workload_from_config(config, schema)
    plan = plan_privacy(config, int(config.privacy.n), workload) if config.privacy.n != "noisy" else None
    if plan is not None:  # refused before anything is read or charged
        check_release_memory(config, plan, n=plan.n, workload=workload)
    if plan is not None and not accept_low_utility:  # refused before anything is read or charged
        check_release_utility(config, plan, n=plan.n, workload=workload)
    # before the data is read: output folder, working database (new_run) and ledger usable; with n public the
    # ledger must also hold the plan's cost (the charge itself comes after the validation)
    check_ledger(config, plan)
    run = new_run(config, output=Path(output_directory) if output_directory else None)
    receipts: list[dict[str, Any]] = []
    try:
        seed = run_seed(config)
        rngs = _streams(seed)
        seed_file = str(run.write_seed(seed)) if run.seeded else None
        data = _read_private(config, schema, run, dask_address)
        if plan is None:  # n is private: charge and release a noisy count, then plan with its lower bound
            with progress.stage("count"):
                count_receipt, n_plan = count_records(config, data, run, rngs["count"])
                receipts.append(count_receipt)
                plan = plan_privacy(config, n_plan, workload)
                check_release_memory(config, plan, n=n_plan, workload=workload)
                if not accept_low_utility:  # the forecast needs n: refused after the count, before the release's charge
                    check_release_utility(config, plan, n=n_plan, workload=workload)
        with progress.stage("charge"):
            receipts.append(charge_budget(config, plan, run))
            grant = grant_after_charge(
                config=config, plan=plan, workload=workload, receipt=receipts[-1], run_id=run.run_id
            )
    except BaseException as error:
        _abandon([run], receipts, error)
        raise
    return _Prepared(
        config_path=config_path, config=config, schema=schema, workload=workload, grant=grant, run=run, data=data,
        receipts=receipts, seed_file=seed_file, rngs=rngs, dask_address=dask_address,
    )


def _answers_on_cluster(prepared: _Prepared) -> np.ndarray:
    workload = prepared.workload
    blocks = np.array_split(np.arange(workload.n_marginals), min(ANSWER_PARTITIONS, workload.n_marginals))
    futures = [answer_partition.submit(prepared.data, workload.subset(block)) for block in blocks]
    return np.concatenate([future.result() for future in futures])


def _finish(prepared: _Prepared, result: SynthesisResult, true_answers: np.ndarray | None = None) -> dict[str, Any]:
    """Decode, validate, stage, report, write the manifests and publish.

    ``true_answers`` are the workload's exact answers when the run already computed them: the report then
    does not answer the workload on the private data again.
    """
    config, schema, run, plan = prepared.config, prepared.schema, prepared.run, prepared.plan
    with progress.stage("sample"):
        rows = sample_synthetic(config, schema, result, plan, prepared.rngs["decode"])
    with progress.stage("report"):
        # the rows are decoded, written and sent to validation chunk by chunk (validated mostly in the side process,
        # which finishes the last chunks while the report is drawn); nothing is published before they all pass
        outputs, validation = stage_outputs(config, schema, rows, run, prepared.dask_address)
        try:
            error_report(
                config, schema, prepared.data, prepared.workload, result, plan, rows, run, prepared.rngs["report"],
                true_answers=true_answers,
            )
        except BaseException:
            validation.abandon()
            raise
        check_synthetic(validation)
    with progress.stage("publish"):
        config_path = str(Path(prepared.config_path).resolve())
        write_manifests(config, config_path, plan, prepared.receipts, outputs, rows.n_rows, prepared.seed_file, run)
        paths = publish_release(run)
    return {
        "run_id": run.run_id,
        **paths,
        "outputs": outputs,
        "privacy": plan.as_dict()["costs"],
        "accounting_mode": plan.mode,
    }


@flow(name="dqrelease-release", persist_result=False, validate_parameters=False)
@failures_not_persisted
@one_release_per_dataset(_dataset_of)
def release(
    config_path: str,
    *,
    output_directory: str | None = None,
    dask_address: str | None = None,
    accept_low_utility: bool = False,
    seeded_test_or_audit: bool = False,
) -> dict[str, Any]:
    """Run one release; its cost is charged to the ledger before the mechanism reads the data.

    There is no way to turn the charge off: the one uncharged run is a replay (:func:`replay_release`).

    Args:
        config_path: Path of the release TOML file.
        output_directory: Override of ``output.directory``.
        dask_address: Scheduler address when the flow's task runner is a ``DaskTaskRunner`` (set by
            :func:`run_release`): answering and the mechanism are then submitted to the cluster.
        accept_low_utility: Run even when the plan's utility forecast is no better than publishing zeros or
            uniform data (:func:`dqrelease.plan.check_release_utility`; refused otherwise, before anything is read
            when ``n`` is declared).
        seeded_test_or_audit: This run is a test or an audit: a seeded config (``run.seed_mode = "seeded"``) may
            run, with a warning. Without it a seeded config is refused before anything is read or charged.

    Returns:
        Public summary: run id, directories, output hashes, privacy cost charged.

    Raises:
        ConfigInvalidError: Among others, a seeded config without ``seeded_test_or_audit``, or a seed the
            dataset's ledger already charged for another run.
    """
    prepared = _prepare(
        config_path, output_directory=output_directory, accept_low_utility=accept_low_utility,
        seeded=seeded_test_or_audit, dask_address=dask_address,
    )
    try:
        # the exact answers are computed once: the mechanism and the error report both use them
        with progress.RoundStages.of(prepared.plan).running():
            answers, result = _synthesize(prepared, dask_address)
        return _finish(prepared, result, answers)
    except BaseException as error:
        _abandon([prepared.run], prepared.receipts, error)
        raise


def _synthesize(prepared: _Prepared, dask_address: str | None) -> tuple[np.ndarray, SynthesisResult]:
    """The workload's exact answers and the mechanism's result (answering partitioned on a cluster)."""
    if dask_address is None:
        answers = answer_partition(prepared.data, prepared.workload)
        result = synthesize(prepared.grant, prepared.data, prepared.workload, prepared.rngs["mechanism"], answers)
        return answers, result
    answers = _answers_on_cluster(prepared)
    result = synthesize.submit(
        prepared.grant, prepared.data, prepared.workload, prepared.rngs["mechanism"], answers, dask_address
    ).result()
    return answers, result


@flow(name="dqrelease-release-many", persist_result=False, validate_parameters=False)
@failures_not_persisted
def release_many(
    config_paths: list[str], *, dask_address: str | None = None, seeded_test_or_audit: bool = False
) -> list[dict[str, Any]]:
    """Run several releases; their mechanisms run concurrently on the task runner.

    Each release is prepared and charged to its own ledger entry (its config's ``ledger.dataset_id``),
    e.g. one synthetic table per state or per year. A release that fails before its charge stops the flow
    before any mechanism runs. Seeded configs need ``seeded_test_or_audit`` as in :func:`release`.
    """
    prepared: list[_Prepared] = []
    try:
        for path in config_paths:
            prepared.append(_prepare(path, output_directory=None, seeded=seeded_test_or_audit,
                                     dask_address=dask_address))
        futures = [
            synthesize.submit(p.grant, p.data, p.workload, p.rngs["mechanism"], None, dask_address) for p in prepared
        ]
        return [_finish(p, future.result()) for p, future in zip(prepared, futures, strict=True)]
    except BaseException as error:
        _abandon([p.run for p in prepared], [r for p in prepared for r in p.receipts], error)
        raise


def run_release(
    config_path: str,
    *,
    dask_address: str | None = None,
    dask_insecure: bool = False,
    output_directory: str | None = None,
    accept_low_utility: bool = False,
    seeded_test_or_audit: bool = False,
) -> dict[str, Any]:
    """Run :func:`release`, on a Dask cluster when ``dask_address`` (or the config's ``run.dask_address``) is set.

    ``dask_address`` is ``local`` / ``local:N`` (a cluster of N worker processes started here) or a scheduler
    URL: ``tls://`` with the config's ``[run.dask_tls]`` files, or plain ``tcp://`` on this machine (on another
    machine only with ``dask_insecure`` or ``run.dask_insecure``). A remote cluster's workers must reach the same
    Prefect API (see :mod:`dqrelease.runtime.cluster`). ``seeded_test_or_audit`` as in :func:`release`.
    """
    access = load_release_config.fn(config_path)[0].run.dask_access(dask_address, insecure=dask_insecure)
    if access is None:
        return release(config_path, output_directory=output_directory, accept_low_utility=accept_low_utility,
                       seeded_test_or_audit=seeded_test_or_audit)
    from dqrelease.runtime.cluster import dask_scheduler

    with dask_scheduler(access) as scheduler:  # reached (or refused) before the flow reads or charges anything
        flow_on_dask = release.with_options(task_runner=scheduler.task_runner())
        return flow_on_dask(
            config_path, dask_address=scheduler.address, output_directory=output_directory,
            accept_low_utility=accept_low_utility, seeded_test_or_audit=seeded_test_or_audit,
        )


@flow(name="dqrelease-replay", persist_result=False, validate_parameters=False)
@failures_not_persisted
def replay_release(manifest_path: str) -> dict[str, Any]:
    """Re-run a seeded release from its audit manifest: uncharged, unpublished, in a removed scratch directory.

    Before any data is read, :func:`~dqrelease.outputs.replay.prepare_replay` checks the manifest against the config,
    schema, input files, code and package versions, and :func:`~dqrelease.ledger.grants.replay_charges` finds the
    release's charge in the config's ledger; after the ingest the input files are hashed again. The
    noisy count (``n = "noisy"``) is drawn again from the recorded seed without a charge, and the mechanism
    runs only if the replay's plan is the recorded one. Nothing is written to the ledger, ``releases/`` or
    ``internal/``; no error report or manifest is made.

    Args:
        manifest_path: ``internal/<run_id>/manifest.json`` of a seeded release (the only input: the seed comes
            from its restricted seed file and never becomes a flow parameter).

    Returns:
        ``{"run_id": ..., "outputs": {format: {path, sha256[, content_sha256]}}}`` of the replay (compare with
        :func:`dqrelease.outputs.replay.compare_outputs`).

    Raises:
        NothingToVerifyError: The release was unseeded.
        ReplayRefusedError: Anything differs from the manifest, or the ledger holds no charge that paid for it.
    """
    target = prepare_replay(Path(manifest_path))
    replay_charges(target)
    config, schema = target.config, target.schema
    workload = workload_from_config(config, schema)
    with tempfile.TemporaryDirectory(prefix="dqrelease-replay-") as scratch:
        run = new_run(config, output=Path(scratch))
        rngs = _streams(target.seed)
        data = _read_private(config, schema, run)
        check_inputs_unchanged(target)
        n = int(config.privacy.n) if config.privacy.n != "noisy" else replay_count(target, data, rngs["count"])
        plan = plan_privacy(config, n, workload)
        grant = grant_for_replay(target=target, plan=plan, run_id=run.run_id)
        result = synthesize(grant, data, workload, rngs["mechanism"])
        rows = sample_synthetic(config, schema, result, plan, rngs["decode"])
        outputs, validation = stage_outputs(config, schema, rows, run)
        check_synthetic(validation)
    return {"run_id": target.run_id, "outputs": outputs}
