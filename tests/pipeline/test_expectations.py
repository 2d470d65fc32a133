"""The schema suites and the validation of DuckDB tables (Great Expectations, pandas datasource)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import dqrelease.expectations.validate as validate_module
from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.frame import number_column
from dqrelease.expectations.suite import build_published_suite, build_suite
from dqrelease.expectations.validate import validate_synthetic, validate_table
from dqrelease.inputs.config import load_config
from dqrelease.inputs.ingest import ingest_source
from dqrelease.inputs.schema import Schema, load_schema
from tests.pipeline.toy_schema import toy_schema

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
KDD99 = ROOT / "examples" / "kdd99"
KDD99_FILE = "kddcup99_10pct/kddcup.data_10_percent.gz"
"""The shared file that examples/kdd99/release.toml reads."""

SCHEMA = toy_schema()
GOOD = {
    "colour": ["red", "RED", "?", "blue"],
    "size": ["0", "9", "10", "99"],
    "weight": ["0.25", "3e2", "-1", ".5"],
    "flag": ["0", "1", "1", "0"],
    "note": ["a", None, "none", "a"],
    "score": ["0.5", None, "0", "0.999"],
}


def _table(con, columns: dict[str, list], name: str = "raw") -> str:
    frame = pd.DataFrame({k: pd.array(v, dtype="string") for k, v in columns.items()})
    con.register("frame", frame)
    con.execute(f"create or replace table {name} as select * from frame")
    con.unregister("frame")
    return name


def _failure(con, columns: dict[str, list], schema: Schema = SCHEMA) -> ValidationFailedError:
    _table(con, columns)
    with pytest.raises(ValidationFailedError) as caught:
        validate_table(con, "raw", schema, label="raw table")
    return caught.value


def _leaks(error: ValidationFailedError, value: str) -> bool:
    return value in str(error) or value in repr(error.failures)


# ---------------------------------------------------------------------- suites from the schema only
def _of_kind(suite, kind: str) -> dict:
    return {e.column: e for e in suite.expectations if type(e).__name__ == kind}


def test_raw_suite_accepts_declared_values_and_alias_spellings():
    suite = build_suite(SCHEMA)
    assert set(_of_kind(suite, "ExpectColumnValuesToBeInSet")["colour"].value_set) == {"red", "blue", "?", "RED"}
    ranged = _of_kind(suite, "ExpectColumnValuesToBeBetween")
    assert list(ranged) == [number_column("size"), number_column("score")]  # weight clips: no range check
    assert (ranged[number_column("size")].min_value, ranged[number_column("size")].max_value) == (0, 100)
    assert set(_of_kind(suite, "ExpectColumnValuesToNotBeNull")) == {"colour", "size", "weight", "flag"}


def test_published_suite_is_stricter_than_the_raw_suite():
    suite = build_published_suite(SCHEMA, numeric_values="uniform")
    assert set(_of_kind(suite, "ExpectColumnValuesToBeInSet")["colour"].value_set) == {"red", "blue", "?"}
    ranged = _of_kind(suite, "ExpectColumnValuesToBeBetween")
    assert set(ranged) == {number_column(name) for name in ("size", "weight", "score")}


def test_valid_table_passes(con):
    _table(con, GOOD)
    validate_table(con, "raw", SCHEMA, label="raw table")


def test_adult_slice_passes_the_adult_suite(con, tmp_path):
    lines = (ADULT / "data" / "adult.test").read_text().splitlines()[:400]
    (tmp_path / "slice.csv").write_text("\n".join(lines) + "\n")
    config = load_config(ADULT / "release.toml")
    source = config.source.model_copy(update={"paths": [tmp_path / "slice.csv"]})
    schema = load_schema(config.schema_file)
    assert ingest_source(con, source, schema) == 399
    validate_table(con, "raw", schema, label="raw table")


# ---------------------------------------------------------------------- each failure names expectation and column
def test_missing_column_fails_naming_it(con):
    error = _failure(con, {k: v for k, v in GOOD.items() if k != "size"})
    assert "missing columns ['size']" in str(error)
    assert error.failures == [
        {"expectation": "expect_table_columns_to_match_set", "column": "size", "unexpected_count": "1"}
    ]


def test_undeclared_column_fails_naming_it(con):
    error = _failure(con, {**GOOD, "secret_id": ["Private-Id-1", "b", "c", "d"]})
    assert "undeclared columns ['secret_id']" in str(error)
    assert not _leaks(error, "Private-Id-1")


def test_value_outside_the_declared_set_fails_without_showing_it(con):
    error = _failure(con, {**GOOD, "colour": ["red", "Moonlighting-Zebra", "blue", "Moonlighting-Zebra"]})
    assert error.failures == [
        {"expectation": "expect_column_values_to_be_in_set", "column": "colour", "unexpected_count": "2"}
    ]
    assert "expect_column_values_to_be_in_set on 'colour'" in str(error)
    assert not _leaks(error, "Moonlighting-Zebra")


def test_number_outside_the_edges_fails_without_showing_it(con):
    error = _failure(con, {**GOOD, "size": ["0", "100", "4", "31337"]})
    assert error.failures == [
        {"expectation": "expect_column_values_to_be_between", "column": "size", "unexpected_count": "2"}
    ]
    assert not _leaks(error, "31337")


def test_below_the_first_edge_fails_and_clip_columns_accept_anything_numeric(con):
    error = _failure(con, {**GOOD, "size": ["-1", "1", "2", "3"], "weight": ["-1000", "1e9", "0", "1"]})
    assert [f["column"] for f in error.failures] == ["size"]


def test_text_that_is_not_a_number_fails_the_pattern(con):
    error = _failure(con, {**GOOD, "size": ["1.5", "seven", "3", "4"], "weight": ["1", "2", "inf", "1"]})
    assert {(f["expectation"], f["column"], f["unexpected_count"]) for f in error.failures} == {
        ("expect_column_values_to_match_regex", "size", "2"),
        ("expect_column_values_to_match_regex", "weight", "1"),
    }
    assert not _leaks(error, "seven")


def test_null_in_a_non_nullable_column_fails(con):
    error = _failure(con, {**GOOD, "colour": ["red", None, "blue", "red"], "flag": [None, None, "0", "1"]})
    assert {(f["expectation"], f["column"], f["unexpected_count"]) for f in error.failures} == {
        ("expect_column_values_to_not_be_null", "colour", "1"),
        ("expect_column_values_to_not_be_null", "flag", "2"),
    }


def test_binary_values_are_0_or_1(con):
    error = _failure(con, {**GOOD, "flag": ["0", "1", "true", "2"]})
    assert error.failures == [
        {"expectation": "expect_column_values_to_be_in_set", "column": "flag", "unexpected_count": "2"}
    ]


def test_empty_table_fails_the_row_count(con):
    error = _failure(con, {k: [] for k in GOOD})
    assert error.failures == [
        {"expectation": "expect_table_row_count_to_be_between", "column": "(table)", "unexpected_count": "1"}
    ]


def test_unexpected_counts_are_summed_over_chunks(con, monkeypatch):
    monkeypatch.setattr(validate_module, "CELLS_PER_CHUNK", 1)
    monkeypatch.setattr(validate_module, "MIN_ROWS_PER_CHUNK", 3)
    rows = {k: v * 3 for k, v in GOOD.items()}
    rows["colour"] = ["red", "zz", "blue", "zz"] * 3
    error = _failure(con, rows)
    assert error.failures == [
        {"expectation": "expect_column_values_to_be_in_set", "column": "colour", "unexpected_count": "6"}
    ]


# ---------------------------------------------------------------------- basket tables
def test_basket_table_items_must_be_declared(con):
    schema = Schema.model_validate({"columns": [{"name": n, "type": "binary"} for n in ["10", "20"]]})
    con.execute("create table raw as select * from (values (0, '10'), (0, '20'), (1, '99')) t(row_id, item)")
    with pytest.raises(ValidationFailedError) as caught:
        validate_table(con, "raw", schema, label="raw table")
    assert caught.value.failures == [
        {"expectation": "expect_column_values_to_be_in_set", "column": "item", "unexpected_count": "1"}
    ]
    assert not _leaks(caught.value, "99")


# ---------------------------------------------------------------------- synthetic tables
def test_bucket_labels_pass_the_published_suite_and_not_the_raw_one(con):
    columns = {**GOOD, "size": ["[0, 10)", "[10, 100)", "[0, 10)", "[0, 10)"],
               "weight": ["[0, 0.5)", "[0.5, 2.5)", "[0, 0.5)", "[0.5, 2.5)"],
               "score": ["[0, 1)", None, "[0, 1)", None], "colour": ["red", "blue", "?", "red"],
               "note": ["a", "none", "none", "a"]}
    _table(con, columns, "synthetic")
    validate_synthetic(con, "synthetic", SCHEMA, numeric_values="bucket_label")
    with pytest.raises(ValidationFailedError):
        validate_synthetic(con, "synthetic", SCHEMA, numeric_values="uniform")


def test_published_suite_rejects_alias_spellings_and_values_beyond_clipped_edges(con):
    _table(con, {**GOOD, "note": ["a", "none", "none", "a"]}, "synthetic")
    with pytest.raises(ValidationFailedError) as caught:
        validate_synthetic(con, "synthetic", SCHEMA, numeric_values="uniform")
    assert {(f["column"], f["unexpected_count"]) for f in caught.value.failures} == {("colour", "1"), ("weight", "2")}


# ---------------------------------------------------------------------- the real KDD Cup 99 file
@pytest.mark.slow
def test_kdd99_schema_validates_the_real_10_percent_file(con, require_shared_data):
    require_shared_data(KDD99_FILE)
    config = load_config(KDD99 / "release.toml")
    schema = load_schema(config.schema_file)
    assert ingest_source(con, config.source, schema) == 494021
    validate_table(con, "raw", schema, label="raw table")
