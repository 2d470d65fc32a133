"""Rows that copy records are gathered from the records rendered once, and validated as the records with their
copies: the same tables, bytes and failures as decoding, rendering and validating every chunk
(:class:`dqrelease.outputs.publish.RenderedRecords`, :meth:`SyntheticValidation.send_copies`; issue 26).

The reference is :meth:`PublishedRows.frames` (each chunk decoded, then written by :func:`write_outputs`), which
renders every chunk's text itself, and the published suite on the copies themselves.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dq_engine import SynthesisResult, make_rng
from dq_engine.oracle.feasible import with_witness
from dqrelease.errors import ExitCode, ValidationFailedError
from dqrelease.expectations.validate import SyntheticValidation
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.schema import Schema, load_schema, schema_constraints
from dqrelease.outputs.decode import RecordDecoder
from dqrelease.outputs.publish import RenderedRecords, render_chunk, write_outputs
from dqrelease.outputs.published_rows import PublishedRows
from tests.adult_slice import ADULT, release_config, write_slice

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


@pytest.mark.parametrize(("numeric_values", "records", "published", "expected"), [
    ("bucket_label", 64, 500, True), ("uniform", 64, 500, False), ("bucket_label", 65, 500, False),
    ("bucket_label", 40, 40, True), ("bucket_label", 40, 39, False),
])
def test_records_are_rendered_once_only_when_copies_are_equal_and_fit_a_chunk_and_the_rows(
    numeric_values, records, published, expected
):
    """Uniform numbers are drawn per row (copies differ); more records than a chunk's rows would hold more memory
    than the publishing forecast allows for; more records than rows would cost more than rendering the rows."""
    rows = _rows(SCHEMA, records=records, rows=published, chunk_rows=64, numeric_values=numeric_values)
    assert rows.copies_rendered_once is expected
    assert RecordDecoder(SCHEMA, numeric_values=numeric_values, rng=make_rng(0)).draws is (numeric_values == "uniform")


# ---------------------------------------------------------------------- the published suite on copies
def _rule_records(count: int, *, broken: tuple[int, ...]) -> pa.Table:
    """``count`` Adult records keeping the rules, except that the records ``broken`` are husbands who are female."""
    constraints = with_witness(schema_constraints(SCHEMA))
    rng = make_rng(31)
    codes = np.stack([rng.integers(0, column.size, count) for column in SCHEMA.columns], axis=1)
    codes = constraints.repair(codes, constraints.witness_codes, np.ones(codes.shape[1], dtype=bool))
    relationship, sex = SCHEMA.names.index("relationship"), SCHEMA.names.index("sex")
    for row in broken:
        codes[row, relationship] = SCHEMA.columns[relationship].values.index("Husband")
        codes[row, sex] = SCHEMA.columns[sex].values.index("Female")
    frame = RecordDecoder(SCHEMA, numeric_values="bucket_label", rng=make_rng(0)).decode(codes)
    return render_chunk(frame, header=False, csv=False).table


def _failures(send) -> tuple[list, str]:
    validation = SyntheticValidation(SCHEMA, numeric_values="bucket_label")
    send(validation)
    with pytest.raises(ValidationFailedError) as caught:
        validation.finish()
    assert caught.value.exit_code == ExitCode.VALIDATION_FAILED
    return caught.value.failures, str(caught.value)


def test_copies_are_validated_as_the_rows_they_stand_for():
    """Record 2 breaks a rule and is copied 3 times; record 5 breaks it too but no row copies it (not published)."""
    table = _rule_records(12, broken=(2, 5))
    copies = np.array([4, 0, 3, 1, 0, 0, 2, 7, 1, 0, 5, 2])
    expanded = table.take(pa.array(np.repeat(np.arange(12), copies)))
    by_copies = _failures(lambda validation: validation.send_copies(table, copies))
    by_rows = _failures(lambda validation: validation.send(expanded))
    assert by_copies == by_rows
    assert "rule 'husbands are male' (3 rows)" in by_copies[1]


def test_copies_of_records_that_keep_the_rules_pass_and_uncopied_breaking_records_are_not_counted():
    table = _rule_records(6, broken=(1,))
    validation = SyntheticValidation(SCHEMA, numeric_values="bucket_label")
    validation.send_copies(table, np.array([3, 0, 2, 2, 1, 9]))
    validation.finish()  # record 1 breaks the rule, but no published row copies it


@pytest.mark.parametrize("copies", [np.array([1, 2]), np.array([1, -1, 1, 1, 1, 1]), np.ones((6, 1), dtype=int)])
def test_copies_that_do_not_fit_the_table_are_refused(copies):
    validation = SyntheticValidation(SCHEMA, numeric_values="bucket_label")
    with pytest.raises(ValueError, match="one non-negative count per row"):
        validation.send_copies(_rule_records(6, broken=()), copies)
    validation.abandon()


@pytest.mark.usefixtures("prefect_harness")
def test_a_bucket_label_release_whose_records_break_a_rule_exits_3_and_publishes_nothing(tmp_path, monkeypatch):
    """The release path with bucket labels: the records are rendered once and validated with their copies."""
    from typer.testing import CliRunner

    from dqrelease.cli import app

    write_slice(tmp_path)
    # DualQuery's records alone (no table fit's particles): fewer records than the 400 published rows
    config = release_config(rounds="\n[mechanism.fit]\nenabled = false\n").replace(
        'numeric_values = "uniform"', 'numeric_values = "bucket_label"')
    assert 'numeric_values = "bucket_label"' in config
    (tmp_path / "release.toml").write_text(config)
    decode, calls = RecordDecoder.decode, []

    def decode_every_row_breaking_a_rule(self, codes):
        frame = decode(self, codes)
        calls.append(len(frame))
        frame.loc[:, ["relationship", "sex"]] = ["Husband", "Female"]
        return frame

    monkeypatch.setattr(RecordDecoder, "decode", decode_every_row_breaking_a_rule)
    result = CliRunner().invoke(app, ["run", str(tmp_path / "release.toml"), "--quiet", "--seeded-test-or-audit"],
                                catch_exceptions=False)
    assert result.exit_code == ExitCode.VALIDATION_FAILED, result.output
    assert "husbands are male" in result.output and "(400 rows)" in result.output
    assert calls and 400 not in calls, calls  # the records were decoded (fewer than 400), not the published rows
    releases, staging = tmp_path / "out" / "releases", tmp_path / "out" / ".staging"
    assert not releases.exists() or not any(releases.iterdir())
    assert not staging.exists() or not any(staging.iterdir())
