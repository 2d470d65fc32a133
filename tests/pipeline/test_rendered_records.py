"""Rows that copy records are gathered from the records rendered once: the same tables and bytes as decoding and
rendering every chunk (:class:`dqrelease.outputs.publish.RenderedRecords`, issue 26).

The reference is :meth:`PublishedRows.frames` (each chunk decoded, then written by :func:`write_outputs`), which
renders every chunk's text itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dq_engine import SynthesisResult, make_rng
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.schema import Schema, load_schema
from dqrelease.outputs.decode import RecordDecoder
from dqrelease.outputs.publish import RenderedRecords, render_chunk, write_outputs
from dqrelease.outputs.published_rows import PublishedRows
from tests.adult_slice import ADULT

SCHEMA = load_schema(ADULT / "schema.toml")
FORMATS = ["parquet", "csv", "duckdb"]


def _rows(schema: Schema, *, records: int, rows: int, chunk_rows: int, numeric_values: str = "bucket_label",
          seed: int = 3) -> PublishedRows:
    rng = make_rng(seed)
    codes = np.stack([rng.integers(0, column.size, records) for column in schema.columns], axis=1)
    domain = domain_from_columns(schema.columns)
    result = SynthesisResult(mechanism="mwem", domain=domain, records=codes, parameters={}, events=(), costs={},
                             n=rows, weights=rng.random(records))
    return PublishedRows.draw(result, rows, make_rng(seed + 1), schema=schema, numeric_values=numeric_values,
                              chunk_rows=chunk_rows)


def _written(chunks, folder: Path) -> tuple[bytes, bytes, str]:
    outputs = write_outputs(chunks, folder, FORMATS)
    return ((folder / "synthetic.csv").read_bytes(), (folder / "synthetic.parquet").read_bytes(),
            outputs["duckdb"]["content_sha256"])


def _schema_with_labels(tmp_path: Path, labels: list[str], *, name: str = "note") -> Schema:
    """A two-column schema whose categorical column has ``labels`` (written as TOML with escapes)."""
    values = ", ".join('"' + label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
                       for label in labels)
    text = (f'[[columns]]\nname = "{name}"\ntype = "categorical"\nvalues = [{values}]\n\n'
            '[[columns]]\nname = "flag"\ntype = "binary"\n')
    path = tmp_path / "schema.toml"
    path.write_text(text)
    return load_schema(path)


def test_gathered_chunks_are_the_decoded_chunks_tables_and_bytes(tmp_path):
    rows = _rows(SCHEMA, records=50, rows=1000, chunk_rows=128)  # 8 chunks, the last one short
    assert rows.copies_rendered_once
    gathered = list(rows.rendered(csv=True))
    decoded = [render_chunk(frame, header=number == 0, csv=True) for number, frame in enumerate(rows.frames())]
    assert len(gathered) == len(decoded) == 8
    for mine, reference in zip(gathered, decoded, strict=True):
        assert mine.table.equals(reference.table)
        assert mine.table.schema.equals(reference.table.schema, check_metadata=True)
        assert mine.csv == reference.csv
    assert _written(iter(gathered), tmp_path / "gathered") == _written(rows.frames(), tmp_path / "decoded")


def test_quoted_values_and_empty_texts_keep_one_line_per_record(tmp_path):
    schema = _schema_with_labels(tmp_path, ["plain", 'say "hi"', "a, b", "", "#hash"])
    rows = _rows(schema, records=5, rows=300, chunk_rows=64)
    assert RenderedRecords.render(rows.decoder.decode(rows.records), csv=True) is not None
    assert _written(rows.rendered(csv=True), tmp_path / "gathered") == _written(rows.frames(), tmp_path / "decoded")


def test_a_one_column_table_with_an_empty_text_is_gathered_as_rendered(tmp_path):
    (tmp_path / "one").mkdir()
    path = tmp_path / "one" / "schema.toml"
    path.write_text('[[columns]]\nname = "only"\ntype = "categorical"\nvalues = ["", "x"]\n')
    schema = load_schema(path)
    rows = _rows(schema, records=2, rows=50, chunk_rows=16)
    text = b"".join(chunk.csv for chunk in rows.rendered(csv=True))
    assert text == _written(rows.frames(), tmp_path / "decoded")[0]
    assert b'""\n' in text  # an empty field of a one-column table is written "" (not a blank line)


def test_a_line_break_in_a_value_falls_back_to_rendering_each_chunk(tmp_path):
    schema = _schema_with_labels(tmp_path, ["one", "two\nlines"])
    rows = _rows(schema, records=4, rows=200, chunk_rows=64)
    assert RenderedRecords.render(rows.decoder.decode(rows.records), csv=True) is None
    assert _written(rows.rendered(csv=True), tmp_path / "fallback") == _written(rows.frames(), tmp_path / "decoded")


def test_a_line_break_in_a_column_name_falls_back_too(tmp_path):
    schema = _schema_with_labels(tmp_path, ["a", "b"], name="two\\nlines")
    assert "\n" in schema.names[0]
    rows = _rows(schema, records=3, rows=100, chunk_rows=32)
    assert RenderedRecords.render(rows.decoder.decode(rows.records), csv=True) is None
    assert _written(rows.rendered(csv=True), tmp_path / "fallback") == _written(rows.frames(), tmp_path / "decoded")


def test_without_csv_text_only_the_tables_are_gathered():
    rows = _rows(SCHEMA, records=20, rows=100, chunk_rows=40)
    gathered = list(rows.rendered(csv=False))
    assert [chunk.csv for chunk in gathered] == [None, None, None]
    assert pa.concat_tables([chunk.table for chunk in gathered]).equals(
        pa.concat_tables([render_chunk(frame, header=False, csv=False).table for frame in rows.frames()]))


@pytest.mark.parametrize(("numeric_values", "records", "expected"),
                         [("bucket_label", 64, True), ("uniform", 64, False), ("bucket_label", 65, False)])
def test_records_are_rendered_once_only_when_copies_are_equal_and_fit_a_chunk(numeric_values, records, expected):
    """Uniform numbers are drawn per row (copies differ); more records than a chunk's rows would hold more memory
    than the publishing forecast allows for."""
    rows = _rows(SCHEMA, records=records, rows=500, chunk_rows=64, numeric_values=numeric_values)
    assert rows.copies_rendered_once is expected
    assert RecordDecoder(SCHEMA, numeric_values=numeric_values, rng=make_rng(0)).draws is (numeric_values == "uniform")
