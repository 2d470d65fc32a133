"""Published files: the canonical CSV is serialised once and is both synthetic.csv and the DuckDB content hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pandas as pd

from dqrelease.outputs.publish import table_content_hash, write_outputs


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"age": [17.5, 90.25, 33.0], "workclass": ["Private", None, "State-gov"], "n": [1, 2, 3]})


def test_the_duckdb_content_hash_is_the_hash_of_the_csv_file_and_of_the_table_read_back(tmp_path: Path):
    outputs = write_outputs([_frame()], tmp_path, ["parquet", "csv", "duckdb"])
    csv_bytes = (tmp_path / "synthetic.csv").read_bytes()
    assert outputs["csv"]["sha256"] == hashlib.sha256(csv_bytes).hexdigest()
    assert outputs["duckdb"]["content_sha256"] == outputs["csv"]["sha256"]
    with duckdb.connect(str(tmp_path / "synthetic.duckdb"), read_only=True) as con:
        stored = con.execute("select * from synthetic").df()
    assert table_content_hash(stored) == outputs["duckdb"]["content_sha256"]


def test_the_content_hash_does_not_depend_on_writing_a_csv_file(tmp_path: Path):
    only_duckdb = write_outputs([_frame()], tmp_path / "a", ["duckdb"])
    assert not (tmp_path / "a" / "synthetic.csv").exists()
    assert only_duckdb["duckdb"]["content_sha256"] == table_content_hash(_frame())
