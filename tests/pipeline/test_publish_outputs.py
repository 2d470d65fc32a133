"""Published files: the canonical CSV is serialised once and is both synthetic.csv and the DuckDB content hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pandas as pd
import pytest

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


def test_chunks_written_by_the_format_threads_keep_their_order(tmp_path: Path):
    frames = [pd.DataFrame({"age": [float(i), i + 0.5], "workclass": [f"w{i}", None], "n": [i, -i]}) for i in range(7)]
    outputs = write_outputs(frames, tmp_path, ["parquet", "csv", "duckdb"])
    whole = pd.concat(frames, ignore_index=True)
    assert outputs["duckdb"]["content_sha256"] == table_content_hash(whole) == outputs["csv"]["sha256"]
    with duckdb.connect(str(tmp_path / "synthetic.duckdb"), read_only=True) as con:
        assert table_content_hash(con.execute("select * from synthetic").df()) == table_content_hash(whole)
    assert table_content_hash(pd.read_parquet(tmp_path / "synthetic.parquet")) == table_content_hash(whole)


def test_an_error_in_a_format_thread_reaches_the_caller(tmp_path: Path):
    (tmp_path / "synthetic.duckdb").mkdir()  # DuckDB cannot open a folder as its database file
    with pytest.raises(duckdb.Error):
        write_outputs([_frame(), _frame()], tmp_path, ["parquet", "duckdb"])
