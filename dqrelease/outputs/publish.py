"""Writing the synthetic table in the requested formats, and hashing outputs.

Files are written into the run's staging directory; :meth:`dqrelease.outputs.runs.RunContext.publish` renames them
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

from dqrelease.inputs.config import file_sha256

__all__ = ["canonical_csv", "table_content_hash", "write_outputs"]

TABLE = "synthetic"


def canonical_csv(frame: pd.DataFrame) -> bytes:
    """The table as canonical CSV bytes (column order, row order, no index): ``synthetic.csv`` exactly."""
    return frame.to_csv(index=False, lineterminator="\n").encode()


def table_content_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of the table as canonical CSV (:func:`canonical_csv`)."""
    return hashlib.sha256(canonical_csv(frame)).hexdigest()


def write_outputs(frame: pd.DataFrame, directory: Path, formats: list[str]) -> dict[str, dict[str, str]]:
    """Write ``frame`` as ``synthetic.<format>`` files and return ``{format: {path, sha256[, content_sha256]}}``.

    The canonical CSV is serialised once: it is the CSV file and the DuckDB table's content hash.
    """
    directory.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, dict[str, str]] = {}
    text = canonical_csv(frame) if "csv" in formats or "duckdb" in formats else b""
    if "parquet" in formats:
        path = directory / "synthetic.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
        outputs["parquet"] = {"path": path.name, "sha256": file_sha256(path)}
    if "csv" in formats:
        path = directory / "synthetic.csv"
        path.write_bytes(text)
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
            "content_sha256": hashlib.sha256(text).hexdigest(),
        }
    return outputs
