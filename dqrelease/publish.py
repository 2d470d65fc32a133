"""Writing the synthetic table in the requested formats, and hashing outputs.

Files are written into the run's staging directory; :meth:`dqrelease.runs.RunContext.publish` renames them
into place. Hashes: SHA-256 of each file's bytes, plus a *content* hash of the DuckDB table (its rows
serialised as canonical CSV), because DuckDB database files are not byte-reproducible.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dqrelease.config import file_sha256

__all__ = ["table_content_hash", "write_outputs"]

TABLE = "synthetic"


def table_content_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of the table as canonical CSV (column order, row order, no index)."""
    return hashlib.sha256(frame.to_csv(index=False, lineterminator="\n").encode()).hexdigest()


def write_outputs(frame: pd.DataFrame, directory: Path, formats: list[str]) -> dict[str, dict[str, str]]:
    """Write ``frame`` as ``synthetic.<format>`` files and return ``{format: {path, sha256[, content_sha256]}}``."""
    directory.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, dict[str, str]] = {}
    if "parquet" in formats:
        path = directory / "synthetic.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
        outputs["parquet"] = {"path": path.name, "sha256": file_sha256(path)}
    if "csv" in formats:
        path = directory / "synthetic.csv"
        frame.to_csv(path, index=False, lineterminator="\n")
        outputs["csv"] = {"path": path.name, "sha256": file_sha256(path)}
    if "duckdb" in formats:
        path = directory / "synthetic.duckdb"
        with duckdb.connect(str(path)) as con:
            con.register("frame", frame)
            con.execute(f"create table {TABLE} as select * from frame")  # TABLE is a module constant
            con.unregister("frame")
        outputs["duckdb"] = {
            "path": path.name,
            "table": TABLE,
            "sha256": file_sha256(path),
            "content_sha256": table_content_hash(frame),
        }
    return outputs
