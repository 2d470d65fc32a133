"""Tasks that turn the mechanism's records into published files, the error report and the manifest."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from dq_engine import Dataset, SynthesisResult, Workload
from dqrelease.expectations.validate import SyntheticValidation
from dqrelease.inputs.config import ReleaseConfig
from dqrelease.inputs.schema import Schema
from dqrelease.mechanisms import ReleasePlan
from dqrelease.outputs.decode import published_labels
from dqrelease.outputs.manifest import build_manifest, write_json
from dqrelease.outputs.publish import renders_csv, write_outputs
from dqrelease.outputs.published_rows import PublishedRows
from dqrelease.outputs.report import INTERNAL_BANNER, build_error_report, n_status, write_error_report
from dqrelease.outputs.runs import RunContext
from dqrelease.plan import mechanism_budget
from dqrelease.runtime.chunks import cluster_chunks
from dqrelease.tasks.common import TASK_OPTIONS, private_errors


@task(name="sample-rows", **TASK_OPTIONS)
@private_errors
def sample_synthetic(
    config: ReleaseConfig, schema: Schema, result: SynthesisResult, plan: ReleasePlan, rng: np.random.Generator
) -> PublishedRows:
    """Draw which synthetic record each published row copies; the rows are decoded chunk by chunk when staged.

    The default row count is the public ``n`` (the planning ``n`` when ``n`` is a noisy count).
    """
    return PublishedRows.draw(result, config.output.rows or plan.n, rng, schema=schema,
                              numeric_values=config.output.numeric_values,
                              single_value_numbers=config.output.single_value_numbers)


@task(name="stage-outputs", **TASK_OPTIONS)
@private_errors
def stage_outputs(
    config: ReleaseConfig, schema: Schema, rows: PublishedRows, run: RunContext, dask_address: str | None = None
) -> tuple[dict[str, dict[str, str]], SyntheticValidation]:
    """Decode the published rows chunk by chunk, validate them and write each chunk to the staging directory.

    When every copy of a record is the same row (bucket labels) the published suite checks the records once, with how
    many rows copy each; otherwise each chunk is sent to it as it is written. With ``dask_address`` the chunks are
    decoded and their CSV text rendered on the cluster's workers, and written here, in order. Returns the outputs'
    hashes and the validation still running (:func:`check_synthetic`).
    """
    validation = SyntheticValidation(schema, numeric_values=config.output.numeric_values,
                                     single_value_numbers=config.output.single_value_numbers)
    formats = list(config.output.formats)
    try:
        with cluster_chunks(dask_address) as workers:
            chunks = rows.rendered(csv=renders_csv(formats), workers=workers, scratch=run.staging_release)
            outputs = write_outputs(rows.checked(chunks, validation), run.staging_release, formats)
    except BaseException:
        validation.abandon()
        raise
    return outputs, validation


@task(name="validate-synthetic", **TASK_OPTIONS)
@private_errors
def check_synthetic(validation: SyntheticValidation) -> None:
    """Wait for the published suite on the staged table's last chunks, before anything is published.

    The suite has one expectation per public rule of the schema: a published row breaking a rule fails the release
    (exit 3), whatever the rule's ``on_violation`` (that key is about the raw table).
    """
    validation.finish()


@task(name="error-report", **TASK_OPTIONS)
@private_errors
def error_report(
    config: ReleaseConfig,
    schema: Schema,
    data: Dataset,
    workload: Workload,
    result: SynthesisResult,
    plan: ReleasePlan,
    rows: PublishedRows,
    run: RunContext,
    rng: np.random.Generator,
    true_answers: np.ndarray | None = None,
) -> dict[str, Any]:
    """Write the INTERNAL error report (JSON, Markdown, HTML) and a Prefect summary artifact.

    The report evaluates the published ``rows`` from how many copy each synthetic record (counted chunk by chunk),
    counts those that break one of the schema's rules (``plan.constraints``) and labels every value as the
    published table writes it (``output.numeric_values``, ``output.single_value_numbers``).
    ``true_answers`` are the workload's exact answers when the flow already computed them (never recomputed).
    """
    report = build_error_report(
        data=data, workload=workload, result=result, costs=plan.costs, published_counts=rows.record_counts(), rng=rng,
        release_name=config.name, run_id=run.run_id, delta=mechanism_budget(config)[1], accounting=plan.mode,
        neighbouring=config.privacy.neighbouring, n_status=n_status(config.privacy.n, config.privacy.n_epsilon),
        constraints=plan.constraints, true_answers=true_answers,
        labels=published_labels(schema, numeric_values=config.output.numeric_values,
                                single_value_numbers=config.output.single_value_numbers),
    )
    write_error_report(report, run.staging_internal)
    # Prefect gets only public facts (privacy spent, solver behaviour) and where the internal report is.
    table = [
        {"accounting": mode, "charged": mode == plan.mode, "epsilon": cost["epsilon"], "delta": cost["delta"],
         "rho": cost["rho"]}
        for mode, cost in report["privacy"].items()
    ]
    create_table_artifact(table, key="dqrelease-privacy-spent", description=f"privacy spent by run {run.run_id}")
    solver = report["solver"]
    statuses = "" if solver is None else "\n\nOracle calls by solver status: " + ", ".join(
        f"{status} {count:,}" for status, count in sorted(solver["status_counts"].items(), key=lambda kv: -kv[1])
    ) + "."
    create_markdown_artifact(
        f"Run `{run.run_id}`: the INTERNAL error report (not stored in Prefect) is at "
        f"`{run.internal_dir / 'error_report.html'}`.{statuses}",
        key="dqrelease-error-report",
        description=INTERNAL_BANNER,
    )
    return report


@task(name="write-manifest", **TASK_OPTIONS)
def write_manifests(
    config: ReleaseConfig,
    config_path: str,
    plan: ReleasePlan,
    charges: list[dict[str, Any]],
    outputs: dict[str, dict[str, str]],
    rows: int,
    seed_file: str | None,
    run: RunContext,
) -> None:
    """Write the internal audit manifest and the public release.json."""
    common = {
        "config": config, "config_path": config_path, "run_id": run.run_id, "started": run.started,
        "finished": datetime.now(UTC).isoformat(), "plan": plan.as_dict(), "charges": charges,
        "outputs": outputs, "rows": rows, "seed_file": seed_file,
    }
    write_json(build_manifest(**common, public=False), run.staging_internal / "manifest.json", internal=True)
    release = build_manifest(**common, public=True)
    write_json(release, run.staging_release / "release.json", internal=False)


@task(name="publish", **TASK_OPTIONS)
def publish_release(run: RunContext) -> dict[str, str]:
    """Atomically move the staged files into place."""
    run.publish()
    return {"release": str(run.release_dir), "internal": str(run.internal_dir)}
