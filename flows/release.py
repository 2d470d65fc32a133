"""The ``release`` flow: raw table in, differentially private synthetic table out.

Stages (each a task; the flow only composes them): load config, plan the privacy cost (public quantities
only), ingest into DuckDB, validate the raw table (Great Expectations), discretize in SQL, charge the
ledger, synthesize, decode and expand, validate the synthetic table, stage the outputs, write the internal
error report and the manifests, publish atomically. Any failure removes the staged files; a charge made
before the failure stays (charges are never refunded).

Usable from other Prefect flows: ``from flows.release import release``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from dq_engine import make_rng
from dqrelease.runs import new_run, run_seed
from tasks.outputs import (
    check_synthetic,
    decode_synthetic,
    error_report,
    publish_release,
    stage_outputs,
    write_manifests,
)
from tasks.prepare import discretize_raw, ingest_raw, load_release_config, validate_raw
from tasks.privacy import charge_budget, count_records, plan_privacy, workload_from_config
from tasks.synthesize import synthesize


@flow(name="dqrelease-release", persist_result=False, validate_parameters=False)
def release(
    config_path: str,
    *,
    seed: int | None = None,
    output_directory: str | None = None,
    charge: bool = True,
) -> dict[str, Any]:
    """Run one release.

    Args:
        config_path: Path of the release TOML file.
        seed: Seed override (used by ``dqrelease verify`` to replay a seeded release); None = the config's.
        output_directory: Override of ``output.directory`` (``verify`` writes into a scratch directory).
        charge: Charge the ledger. Only ``verify`` turns this off: its replay reproduces an output that was
            already charged and publishes nothing.

    Returns:
        Public summary: run id, directories, output hashes, privacy cost charged.
    """
    config, schema = load_release_config(config_path)
    workload = workload_from_config(config, schema)
    declared_n = config.privacy.n != "noisy"
    plan = plan_privacy(config, int(config.privacy.n)) if declared_n else None
    run = new_run(config, output=Path(output_directory) if output_directory else None)
    try:
        used_seed = seed if seed is not None else run_seed(config)
        rng = make_rng(used_seed)
        seed_file = str(run.write_seed(used_seed)) if run.seeded and seed is None else None
        rows = ingest_raw(config, schema, run)
        validate_raw(config, schema, run, rows)
        data = discretize_raw(schema, run)
        receipts = []
        if plan is None:  # n is private: charge and release a noisy count, then plan with its lower bound
            count_receipt, n_plan = count_records(config, data, run, rng)
            receipts.append(count_receipt)
            plan = plan_privacy(config, n_plan)
        if charge:
            receipts.append(charge_budget(config, plan, run))
        result = synthesize(plan, data, workload, rng)
        codes, frame = decode_synthetic(config, schema, result, plan, rng)
        check_synthetic(config, schema, frame)
        outputs = stage_outputs(config, frame, run)
        error_report(config, data, workload, result, plan, codes, run, rng)
        write_manifests(config, str(Path(config_path).resolve()), plan, receipts, outputs, len(frame), seed_file, run)
        paths = publish_release(run)
    except BaseException:
        run.abandon()
        raise
    return {
        "run_id": run.run_id,
        **paths,
        "outputs": outputs,
        "privacy": plan.as_dict()["costs"],
        "accounting_mode": plan.mode,
    }
