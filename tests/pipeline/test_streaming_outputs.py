"""The published rows stream in chunks: the same files and report for any chunk size, bounded memory, and the
published suite still refuses a rule-breaking row in a later chunk.

The reference for "the same bytes" is the whole table built at once as before streaming (``sample_rows``, then
``decode_records`` with the same generator, pandas' ``to_csv`` and ``pq.write_table`` of the whole frame): the CSV text
is DuckDB's since issue 26, and its bytes are still pandas' for the Adult schema's values, labels and uniform floats.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import tracemalloc
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dqrelease.outputs.publish
import dqrelease.outputs.published_rows
import dqrelease.runtime.chunks
from dq_engine import Dataset, SynthesisResult, Workload, make_rng
from dq_engine.data.workload import concatenate_workloads, kway_marginals
from dq_engine.oracle.feasible import with_witness
from dq_engine.privacy.accounting import ComposedCost
from dqrelease.errors import ExitCode, ValidationFailedError
from dqrelease.expectations.validate import SyntheticValidation
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.schema import load_schema, schema_constraints
from dqrelease.outputs.decode import RecordDecoder, decode_records
from dqrelease.outputs.publish import canonical_csv, table_content_hash, write_outputs
from dqrelease.outputs.published_rows import PublishedRows
from dqrelease.outputs.report import build_error_report, n_status
from tests.adult_slice import ADULT, release_config, write_slice

SCHEMA = load_schema(ADULT / "schema.toml")
DOMAIN = domain_from_columns(SCHEMA.columns)
CONSTRAINTS = with_witness(schema_constraints(SCHEMA))
FORMATS = ["parquet", "csv", "duckdb"]
ROWS = 1000
RECORDS = 37


def _records(seed: int, count: int = RECORDS) -> np.ndarray:
    """Random records of the Adult schema repaired to keep its rules (as a mechanism's records do)."""
    rng = make_rng(seed)
    codes = np.stack([rng.integers(0, column.size, count) for column in SCHEMA.columns], axis=1)
    return CONSTRAINTS.repair(codes, CONSTRAINTS.witness_codes, np.ones(codes.shape[1], dtype=bool))


def _result(records: np.ndarray, weights: np.ndarray | None) -> SynthesisResult:
    return SynthesisResult(mechanism="mwem", domain=DOMAIN, records=records, parameters={}, events=(), costs={},
                           n=ROWS, weights=weights)


def _stage(rows: PublishedRows, directory: Path, numeric_values: str) -> dict:
    """What the stage-outputs and validate-synthetic tasks do."""
    validation = SyntheticValidation(SCHEMA, numeric_values=numeric_values)
    outputs = write_outputs(validation.check_each(rows.frames()), directory, FORMATS)
    validation.finish()
    return outputs


@functools.cache
def _truth() -> tuple[Dataset, Workload]:
    data = Dataset.from_codes(DOMAIN, _records(99, ROWS))
    return data, concatenate_workloads([kway_marginals(DOMAIN, k, rng=make_rng(k)) for k in (1, 2)])


def _report(result: SynthesisResult, rows: PublishedRows) -> str:
    data, workload = _truth()
    cost = ComposedCost(mode="tight", epsilon=1.0, delta=1e-6, rho=None, pure_epsilon=None, method="test")
    report = build_error_report(
        data=data, workload=workload, result=result, costs={"tight": cost, "paper": cost},
        published_counts=rows.record_counts(), rng=make_rng(4), release_name="stream", run_id="r", delta=1e-6,
        neighbouring="replace-one", n_status=n_status(ROWS), constraints=CONSTRAINTS,
    )
    return json.dumps(report, sort_keys=True)


@pytest.mark.parametrize("numeric_values", ["bucket_label", "uniform"])
@pytest.mark.parametrize("weighted", [False, True])
def test_files_and_report_are_the_same_for_any_chunk_size_and_as_the_whole_table(
    tmp_path, monkeypatch, numeric_values, weighted
):
    monkeypatch.setattr(dqrelease.outputs.publish, "PARQUET_ROW_GROUP_ROWS", 300)  # 4 row groups, not chunk-aligned
    records = _records(1)
    result = _result(records, make_rng(2).random(RECORDS) if weighted else None)
    seen = {}
    for chunk_rows in (ROWS, 128, 333):  # 1 chunk, 8 chunks, 4 chunks (the last one row)
        rows = PublishedRows.draw(result, ROWS, make_rng(5), schema=SCHEMA, numeric_values=numeric_values,
                                  chunk_rows=chunk_rows)
        directory = tmp_path / str(chunk_rows)
        outputs = _stage(rows, directory, numeric_values)
        with duckdb.connect(str(directory / "synthetic.duckdb"), read_only=True) as con:
            stored = con.execute("select * from synthetic").df()
        assert table_content_hash(stored) == outputs["duckdb"]["content_sha256"] == outputs["csv"]["sha256"]
        seen[chunk_rows] = (
            (directory / "synthetic.csv").read_bytes(), (directory / "synthetic.parquet").read_bytes(),
            outputs["duckdb"]["content_sha256"], _report(result, rows),
        )
    assert all(files == seen[ROWS] for files in seen.values())

    # the whole table at once, as the release built it before streaming
    rng = make_rng(5)
    frame = decode_records(result.sample_rows(ROWS, rng), SCHEMA, numeric_values=numeric_values, rng=rng)
    parquet = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet, row_group_size=300)
    pandas_csv = frame.to_csv(index=False, lineterminator="\n").encode()
    assert seen[ROWS][0] == canonical_csv(frame) == pandas_csv
    assert seen[ROWS][1] == parquet.getvalue()
    assert pq.ParquetFile(directory / "synthetic.parquet").metadata.num_row_groups == 4
    assert seen[ROWS][2] == hashlib.sha256(pandas_csv).hexdigest()


def test_uniform_values_do_not_depend_on_where_the_chunks_are_cut():
    codes = np.repeat(_records(6), 20, axis=0)
    whole = decode_records(codes, SCHEMA, numeric_values="uniform", rng=make_rng(7))
    decoder = RecordDecoder(SCHEMA, numeric_values="uniform", rng=make_rng(7))
    cuts = [0, 1, 2, 50, 51, 400, len(codes)]
    parts = [decoder.decode(codes[start:stop]) for start, stop in itertools.pairwise(cuts)]
    assert b"".join(canonical_csv(part, header=i == 0) for i, part in enumerate(parts)) == canonical_csv(whole)


def test_the_report_counts_give_the_figures_of_the_published_rows_themselves():
    result = _result(_records(8), make_rng(9).random(RECORDS))
    rows = PublishedRows.draw(result, ROWS, make_rng(10), schema=SCHEMA, numeric_values="bucket_label", chunk_rows=7)
    expanded = np.concatenate(list(rows.code_chunks()))
    np.testing.assert_array_equal(expanded, result.sample_rows(ROWS, make_rng(10)))
    np.testing.assert_array_equal(rows.record_counts(), np.bincount(rows.index, minlength=RECORDS))
    assert rows.record_counts().sum() == ROWS == rows.n_rows


@pytest.mark.parametrize("numeric_values", ["bucket_label", "uniform"])
def test_a_rule_breaking_row_in_a_later_chunk_fails_the_published_suite(tmp_path, numeric_values):
    husband = SCHEMA.names.index("relationship"), SCHEMA.columns[SCHEMA.names.index("relationship")].values.index(
        "Husband")
    female = SCHEMA.names.index("sex"), SCHEMA.columns[SCHEMA.names.index("sex")].values.index("Female")
    records = _records(11)
    broken = records[0].copy()
    broken[husband[0]], broken[female[0]] = husband[1], female[1]
    records = np.vstack([records, broken])
    index = np.append(np.arange(ROWS - 1) % RECORDS, RECORDS).astype(np.int32)  # the very last row breaks the rule
    decoder = RecordDecoder(SCHEMA, numeric_values=numeric_values, rng=make_rng(12))
    rows = PublishedRows(records=records, index=index, decoder=decoder, chunk_rows=100)
    with pytest.raises(ValidationFailedError, match=r"rule 'husbands are male' \(1 rows\)") as caught:
        _stage(rows, tmp_path, numeric_values)
    assert caught.value.exit_code == ExitCode.VALIDATION_FAILED


@pytest.mark.usefixtures("prefect_harness")
def test_a_release_whose_later_chunk_breaks_a_rule_exits_3_and_publishes_nothing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from dqrelease.cli import app

    write_slice(tmp_path)
    (tmp_path / "release.toml").write_text(release_config())
    monkeypatch.setattr(dqrelease.outputs.published_rows, "PUBLISH_CHUNK_ROWS", 64)  # 400 rows: 7 chunks
    decode, calls = RecordDecoder.decode, []

    def decode_breaking_the_third_chunk(self, codes):
        frame = decode(self, codes)
        calls.append(len(frame))
        if len(calls) == 3:
            frame.loc[0, ["relationship", "sex"]] = ["Husband", "Female"]
        return frame

    monkeypatch.setattr(RecordDecoder, "decode", decode_breaking_the_third_chunk)
    result = CliRunner().invoke(app, ["run", str(tmp_path / "release.toml"), "--quiet", "--seeded-test-or-audit"],
                                catch_exceptions=False)
    assert result.exit_code == ExitCode.VALIDATION_FAILED, result.output
    assert "husbands are male" in result.output
    assert calls == [64] * 6 + [16]
    releases, staging = tmp_path / "out" / "releases", tmp_path / "out" / ".staging"
    assert not releases.exists() or not any(releases.iterdir())
    assert not staging.exists() or not any(staging.iterdir())


@pytest.mark.slow
def test_streaming_never_holds_the_codes_of_every_row(tmp_path, monkeypatch):
    """Peak traced memory of drawing, decoding, writing (every format) and counting 200,000 rows in chunks of 10,000.

    The whole table's codes (200,000 x 15 int64) take 24 MB, and building the whole table as before took several
    times that; the row index takes 0.8 MB. Tolerance: the traced peak must stay below half the whole codes (12 MB;
    measured 4.4 MB since DuckDB writes the CSV text, 9 MB with pandas' formatting). tracemalloc sees numpy and Python
    allocations (codes, index, a chunk's CSV bytes), not Arrow's memory pool nor DuckDB's; Parquet rows buffer up to a
    row group, lowered here to 20,000 rows so that the buffer is not the whole table (numpy arrays it wraps without a
    copy would be traced).
    """
    monkeypatch.setattr(dqrelease.outputs.publish, "PARQUET_ROW_GROUP_ROWS", 20_000)
    rows_total, chunk_rows = 200_000, 10_000
    result = _result(_records(13, 500), None)
    whole_codes = rows_total * len(SCHEMA.columns) * np.dtype(np.int64).itemsize
    tracemalloc.start()
    try:
        rows = PublishedRows.draw(result, rows_total, make_rng(14), schema=SCHEMA, numeric_values="uniform",
                                  chunk_rows=chunk_rows)
        outputs = write_outputs(rows.frames(), tmp_path, FORMATS)
        counts = rows.record_counts()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts.sum() == rows_total and set(outputs) == set(FORMATS)
    assert rows.index.dtype == np.int32
    assert peak < whole_codes / 2, f"peak {peak:,} bytes against {whole_codes:,} for the whole codes"


def test_the_parquet_writer_keeps_no_chunk_once_its_row_group_is_written(tmp_path, monkeypatch):
    """Chunks of exactly one row group each are written as they arrive, and nothing of them stays in Arrow's pool.

    Before, the rows left over after a row group were kept as a slice of the two chunks joined, which kept the whole
    join alive (about 2.3 GB more peak memory at 1M KDD99 rows a chunk). Measured by Arrow's own allocation counter
    (``pa.total_allocated_bytes``, exact): after the writer has taken 5 chunks and the test has dropped them, the
    pool holds less than one chunk's Arrow table (tolerance: half of it, for the writer's own buffers; measured 0).
    """
    chunk_rows = 20_000
    monkeypatch.setattr(dqrelease.outputs.publish, "PARQUET_ROW_GROUP_ROWS", chunk_rows)
    rows = PublishedRows.draw(_result(_records(21, 300), None), 5 * chunk_rows, make_rng(22), schema=SCHEMA,
                              numeric_values="bucket_label", chunk_rows=chunk_rows)
    one_chunk = pa.Table.from_pandas(next(rows.frames()), preserve_index=False).nbytes
    before = pa.total_allocated_bytes()
    with dqrelease.outputs.publish.TableWriter(tmp_path, ["parquet"]) as writer:
        for frame in rows.frames():
            writer.append(frame)
            del frame
        writer.wait()  # the format threads have written every chunk
        held = pa.total_allocated_bytes() - before
        writer.finish()
    assert held < one_chunk / 2, f"Arrow holds {held:,} bytes after the last chunk; one chunk is {one_chunk:,}"
    assert pq.ParquetFile(tmp_path / "synthetic.parquet").metadata.num_row_groups == 5


def test_a_wide_table_is_published_in_chunks_and_row_groups_of_fewer_rows(tmp_path, monkeypatch):
    """A table wider than the cell budget allows at full chunk length gets chunks and row groups of
    ``CHUNK_CELLS // columns`` rows (the budget lowered to 150 cells here: 10 rows of Adult's 15 columns),
    from its width alone, and the same bytes as one chunk of the whole table."""
    result = _result(_records(31, 40), None)
    whole = PublishedRows.draw(result, 95, make_rng(32), schema=SCHEMA, numeric_values="uniform")
    reference = write_outputs(whole.frames(), tmp_path / "whole", FORMATS)
    monkeypatch.setattr(dqrelease.runtime.chunks, "CHUNK_CELLS", 150)
    narrow = PublishedRows.draw(result, 95, make_rng(32), schema=SCHEMA, numeric_values="uniform")
    assert narrow.chunk_rows == 10 and sum(1 for _ in narrow.code_chunks()) == 10
    outputs = write_outputs(narrow.frames(), tmp_path / "chunked", FORMATS)
    assert pq.ParquetFile(tmp_path / "chunked" / "synthetic.parquet").metadata.num_row_groups == 10
    assert outputs["csv"] == reference["csv"]
    assert outputs["duckdb"]["content_sha256"] == reference["duckdb"]["content_sha256"]
    assert pq.read_table(tmp_path / "chunked" / "synthetic.parquet").equals(
        pq.read_table(tmp_path / "whole" / "synthetic.parquet"))


def test_the_published_duckdb_table_is_written_within_its_memory_limit(tmp_path, monkeypatch):
    """DuckDB's buffer pool of ``synthetic.duckdb`` stops at the writer's limit (lowered to 8 MiB here) while the table
    grows to several times that, instead of keeping every block written (before: it grew with every chunk).
    Measured by DuckDB's own accounting (``duckdb_memory()``) after each of 12 chunks of 200,000 rows x 8 random
    int64 columns (about 12 MiB each, incompressible); tolerance: the limit itself (measured: at most 8 MiB)."""
    monkeypatch.setattr(dqrelease.outputs.publish, "PUBLISHED_DUCKDB_MEMORY", "8MiB")
    monkeypatch.setattr(dqrelease.outputs.publish, "PARQUET_ROW_GROUP_ROWS", 200_000)
    rng = np.random.default_rng(3)
    used = []
    with dqrelease.outputs.publish.TableWriter(tmp_path, ["duckdb"]) as writer:
        for _ in range(12):
            frame = pd.DataFrame(rng.integers(0, 2**62, size=(200_000, 8)), columns=[f"c{j}" for j in range(8)])
            writer.append(frame)
            writer.wait()  # the DuckDB thread has inserted the chunk
            used.append(writer._duckdb.sql("select sum(memory_usage_bytes) from duckdb_memory()").fetchall()[0][0])
        writer.finish()
    with duckdb.connect(str(tmp_path / "synthetic.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from synthetic").fetchall()[0][0] == 12 * 200_000
    assert max(used) <= 8 * 2**20, f"DuckDB held up to {max(used):,} bytes"


def test_a_wide_published_duckdb_table_gets_a_larger_writer_limit(tmp_path):
    """DuckDB holds a wide table's whole row group being filled: 1,000 columns failed at 256 MiB (measured,
    docs/decisions.md). Narrow tables keep 256 MiB; wider ones get max(1 GiB, 128 KiB a column)."""
    memory = dqrelease.outputs.publish.published_duckdb_memory
    assert [memory(42), memory(256), memory(257), memory(1_000), memory(10_000)] == [
        "256MiB", "256MiB", "1024MiB", "1024MiB", "1250MiB"]
    frame = pd.DataFrame({f"c{j}": ["0", "1"] * 500 for j in range(300)})
    with dqrelease.outputs.publish.TableWriter(tmp_path, ["duckdb"]) as writer:
        writer.append(frame)
        writer.wait()
        limit = writer._duckdb.sql("select current_setting('memory_limit')").fetchall()[0][0]
        writer.finish()
    assert limit.replace(" ", "") in ("1024.0MiB", "1.0GiB", "1GiB")
    with duckdb.connect(str(tmp_path / "synthetic.duckdb"), read_only=True) as con:
        assert con.sql("select count(*) from synthetic").fetchall()[0][0] == 1000
