"""Tasks that read the config and the private table: load, ingest, validate, discretize."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import task

from dq_engine import Dataset
from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.validate import validate_table
from dqrelease.inputs.config import ReleaseConfig, load_config
from dqrelease.inputs.discretize import discretize
from dqrelease.inputs.ingest import ingest_database, ingest_source
from dqrelease.inputs.schema import Schema, load_schema, rule_actions
from dqrelease.outputs.private_files import write_internal
from dqrelease.outputs.runs import RunContext
from dqrelease.runtime.chunks import cluster_chunks
from dqrelease.tasks.common import TASK_OPTIONS, private_errors
from dqrelease.warehouse import private_database

RAW_TABLE = "raw"

RAW_RULE_REPORT = "raw_rule_violations.json"
"""INTERNAL file (beside the error report and the manifest) with the raw rows breaking each public rule."""


@task(name="load-config", **TASK_OPTIONS)
def load_release_config(config_path: str) -> tuple[ReleaseConfig, Schema]:
    """Parse and validate the release config and its schema file (no private data is read)."""
    config = load_config(Path(config_path))
    return config, load_schema(config.schema_file)


@task(name="ingest", **TASK_OPTIONS)
@private_errors
def ingest_raw(config: ReleaseConfig, schema: Schema, run: RunContext) -> int:
    """Load the raw table into the working DuckDB file; return its row count."""
    with ingest_database(run.database, config.source, schema) as con:
        return ingest_source(con, config.source, schema, table=RAW_TABLE)


@task(name="validate-raw", **TASK_OPTIONS)
@private_errors
def validate_raw(
    config: ReleaseConfig, schema: Schema, run: RunContext, rows: int, dask_address: str | None = None
) -> None:
    """Run the schema's expectation suite on the raw table; check the declared public n.

    A broken ``on_violation = "fail"`` rule stops the run here, before any charge, naming the rule only. The rows
    breaking each rule are counted into the INTERNAL :data:`RAW_RULE_REPORT` (never logged: a count can equal a
    private ``n``). With ``dask_address`` the table is collapsed by chunks on the cluster's workers.
    """
    with private_database(run.database) as con, cluster_chunks(dask_address) as workers:
        broken = validate_table(con, RAW_TABLE, schema, label="raw table", workers=workers)
    if schema.rules:
        actions = rule_actions(schema)
        report = {
            "internal": "INTERNAL: counts of raw rows taken from the private table; do not publish",
            "rules": [{"rule": name, "on_violation": actions[name], "raw_rows_breaking": count}
                      for name, count in broken.items()],
        }
        write_internal(run.staging_internal / RAW_RULE_REPORT, json.dumps(report, indent=2) + "\n")
    declared = config.privacy.n
    if declared != "noisy" and declared != rows:
        raise ValidationFailedError(
            "the source's row count differs from the declared public privacy.n; "
            "fix privacy.n (n is public under the replace-one neighbouring relation)",
            [{"expectation": "row_count_equals_declared_n", "column": "(table)", "unexpected_count": "1"}],
        )


@task(name="discretize", **TASK_OPTIONS)
@private_errors
def discretize_raw(schema: Schema, run: RunContext, dask_address: str | None = None) -> Dataset:
    """Discretize the raw table in SQL and load the codes (validated one value per block).

    With ``dask_address`` the table is coded and grouped by chunks on the cluster's workers (the same dataset).
    """
    with private_database(run.database) as con, cluster_chunks(dask_address) as workers:
        return discretize(con, RAW_TABLE, schema, workers=workers)
