"""The stages that touch every row, by chunk on a 2-worker Dask cluster: the local path's results, on both workers."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import pytest

import dqrelease.runtime.chunks as chunks_module
from dq_engine import make_rng
from dqrelease.errors import ValidationFailedError
from dqrelease.expectations import validate as validate_module
from dqrelease.expectations.validate import validate_table
from dqrelease.inputs.discretize import discretize
from dqrelease.outputs.csv_text import canonical_csv
from dqrelease.outputs.publish import write_outputs
from dqrelease.outputs.published_rows import PublishedRows
from dqrelease.runtime.chunks import ChunkWorkers
from dqrelease.warehouse import connect
from tests.constraints.test_rules_pipeline import _raw_frame, _schema, _store
from tests.pipeline.test_stacked_validation import BINARY as STACKED_BINARY
from tests.pipeline.test_stacked_validation import SAME_VALUES
from tests.pipeline.test_stacked_validation import SCHEMA as STACKED_SCHEMA
from tests.pipeline.test_stacked_validation import _rows as _stacked_rows
from tests.pipeline.test_streaming_outputs import FORMATS, RECORDS, ROWS, SCHEMA, _records, _result
from tests.pipeline.test_validation_distinct import _rows

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

CHUNK_ROWS = 128
"""Rows per chunk in these tests: the tables below span several chunks."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[distributed.LocalCluster]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local:  # a free port, as the release's own
        yield local


@pytest.fixture()
def workers(cluster, monkeypatch) -> Iterator[ChunkWorkers]:
    monkeypatch.setattr(chunks_module, "READ_CHUNK_ROWS", CHUNK_ROWS)
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        yield ChunkWorkers.of(client)


def _ran_on(stream: list[dict], function: str) -> list[str]:
    """The worker of every task of ``function`` in a Dask task stream."""
    return [task["worker"] for task in stream if task["key"].startswith(function)]


def test_discretization_by_chunk_on_workers_is_the_local_dataset(workers: ChunkWorkers):
    schema = _schema()
    with connect(None) as con:
        _store(con, _raw_frame(1000, seed=7))  # 8 chunks
        alone = discretize(con, "raw", schema)
        with distributed.get_task_stream(client=workers.client) as stream:
            chunked = discretize(con, "raw", schema, workers=workers)
    assert chunked.n == alone.n == 1000
    np.testing.assert_array_equal(chunked.codes, alone.codes)
    np.testing.assert_array_equal(chunked.counts, alone.counts)
    assert chunked.codes.dtype == alone.codes.dtype and chunked.domain == alone.domain
    ran_on = _ran_on(stream.data, "_coded_chunk")
    assert len(ran_on) == 8 and set(ran_on) == set(workers.addresses)


def test_raw_validation_by_chunk_on_workers_fails_as_the_local_path(workers: ChunkWorkers):
    schema = _schema()
    with connect(None) as con:
        _store(con, _rows(1500, seed=11))  # 12 chunks
        with pytest.raises(ValidationFailedError) as alone:
            validate_table(con, "raw", schema, label="raw table")
        with distributed.get_task_stream(client=workers.client) as stream, \
                pytest.raises(ValidationFailedError) as chunked:
            validate_table(con, "raw", schema, label="raw table", workers=workers)
    assert chunked.value.failures == alone.value.failures
    assert str(chunked.value) == str(alone.value)
    assert {f.get("rule") for f in alone.value.failures} >= {"red is small", "no flag without a note"}
    ran_on = _ran_on(stream.data, "_grouped_chunk")
    assert len(ran_on) == 12 and set(ran_on) == set(workers.addresses)


def test_raw_rule_counts_by_chunk_on_workers_are_the_local_counts(workers: ChunkWorkers):
    schema = _schema(on_violation="report")
    with connect(None) as con:
        _store(con, _raw_frame(600, seed=3))
        alone = validate_table(con, "raw", schema, label="raw table")
        chunked = validate_table(con, "raw", schema, label="raw table", workers=workers)
    assert chunked == alone and any(alone.values())


def test_stacked_raw_validation_by_chunk_on_workers_fails_as_the_local_path(workers: ChunkWorkers, monkeypatch):
    """Columns with the same checks are unpivoted together on the workers (a chunk of 128 rows is at most
    ``UNPIVOT_ROWS``), their values summed here by (column, value): the local verdict, member by member."""
    unpivoted: list[tuple[str, ...]] = []
    stack_frames = validate_module._stack_frames

    def spy(counted, names, shape):
        unpivoted.append(names)
        return stack_frames(counted, names, shape)

    with connect(None) as con:
        rows = _stacked_rows(1000, seed=21)  # 8 chunks
        con.register("rows_view", rows)
        con.execute("create table raw as select * from rows_view")
        with pytest.raises(ValidationFailedError) as alone:
            validate_table(con, "raw", STACKED_SCHEMA, label="raw table")
        monkeypatch.setattr(validate_module, "_stack_frames", spy)
        with distributed.get_task_stream(client=workers.client) as stream, \
                pytest.raises(ValidationFailedError) as chunked:
            validate_table(con, "raw", STACKED_SCHEMA, label="raw table", workers=workers)
        monkeypatch.setattr(validate_module, "UNPIVOT_ROWS", 0)  # every column grouped by its own statement
        with pytest.raises(ValidationFailedError) as by_column:
            validate_table(con, "raw", STACKED_SCHEMA, label="raw table", workers=workers)
    assert chunked.value.failures == alone.value.failures == by_column.value.failures
    assert str(chunked.value) == str(alone.value)
    assert {failure["column"] for failure in alone.value.failures} >= {"b0", "b3", "k2", "n1", "n2"}
    assert set(unpivoted) == {tuple(STACKED_BINARY), tuple(SAME_VALUES), ("n1", "n2")}  # only on the chunked run
    ran_on = _ran_on(stream.data, "_grouped_chunk")
    assert len(ran_on) == 8 and set(ran_on) == set(workers.addresses)


@pytest.mark.parametrize(("numeric_values", "chunk_rows", "on_workers"), [
    ("uniform", 128, 8),  # drawn numbers: every chunk decoded on a worker
    ("bucket_label", 16, 63),  # more records (37) than a chunk's rows: decoded on the workers too
    ("bucket_label", 128, 0),  # copies of at most a chunk's records: rendered once here and gathered
])
def test_published_rows_decoded_and_rendered_on_workers_are_the_local_bytes(workers, tmp_path, numeric_values,
                                                                          chunk_rows, on_workers):
    result = _result(_records(1), make_rng(2).random(RECORDS))
    rows = PublishedRows.draw(result, ROWS, make_rng(5), schema=SCHEMA, numeric_values=numeric_values,
                              chunk_rows=chunk_rows)
    assert rows.copies_rendered_once == (on_workers == 0)
    written = {}
    with distributed.get_task_stream(client=workers.client) as stream:
        for where, chunks in [("frames", rows.frames()), ("here", rows.rendered(csv=True)),
                              ("workers", rows.rendered(csv=True, workers=workers))]:
            outputs = write_outputs(chunks, tmp_path / where, FORMATS)
            folder = tmp_path / where
            written[where] = ((folder / "synthetic.csv").read_bytes(), (folder / "synthetic.parquet").read_bytes(),
                              outputs["duckdb"]["content_sha256"])
    assert written["workers"] == written["here"] == written["frames"]
    if numeric_values == "uniform":  # the numbers are drawn: a decoder that restarted each chunk's streams differs
        restarted = b"".join(
            canonical_csv(copy.deepcopy(rows.decoder).decode(codes), header=number == 0)
            for number, codes in enumerate(rows.code_chunks())
        )
        assert restarted != written["here"][0]
    ran_on = _ran_on(stream.data, "_render_piece")
    assert len(ran_on) == on_workers
    assert set(ran_on) == (set(workers.addresses) if on_workers else set())



def test_summing_parts_with_unaligned_buffers_prints_no_arrow_warning():
    """A part unpickled from a worker can hold buffers at any offset; summing it must print nothing (a fresh process,
    since Arrow reads its alignment setting once). Before the fix Arrow printed "An input buffer was poorly aligned"."""
    import subprocess
    import sys

    code = (
        "import numpy as np, pyarrow as pa\n"
        "from dqrelease.runtime.chunks import sum_counts\n"
        "buf = pa.py_buffer(b'x' + np.arange(16, dtype=np.int64).tobytes())[1:]\n"
        "a = pa.Array.from_buffers(pa.int64(), 16, [None, buf])\n"
        "print(sum_counts([pa.table({'k': a, 'n': a})], count='n').num_rows)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "16"
    assert "aligned" not in done.stderr, done.stderr


def test_a_wide_table_is_read_for_the_workers_in_chunks_of_fewer_rows(monkeypatch):
    """Chunks read for the workers hold at most ``CHUNK_CELLS`` cells (lowered to 1,000 here): a 100-column table of
    35 rows comes in batches of 10 rows, a 5-column one in batches of READ_CHUNK_ROWS (lowered to 16)."""
    monkeypatch.setattr(chunks_module, "CHUNK_CELLS", 1_000)
    monkeypatch.setattr(chunks_module, "READ_CHUNK_ROWS", 16)
    with connect(None) as con:
        for name, width in (("wide", 100), ("narrow", 5)):
            columns = ", ".join(f"range as c{j}" for j in range(width))
            con.execute(f"create table {name} as select {columns} from range(35)")
        assert [b.num_rows for b in chunks_module.table_chunks(con, "wide")] == [10, 10, 10, 5]
        assert [b.num_rows for b in chunks_module.table_chunks(con, "narrow")] == [16, 16, 3]
