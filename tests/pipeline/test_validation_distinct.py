"""Validation on distinct values (issue 26): the counts are the table's rows, GX sees only the distinct values."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import dqrelease.expectations.validate as validate_module
from dq_engine import make_rng
from dqrelease.errors import ConfigInvalidError, ValidationFailedError
from dqrelease.expectations.frame import ROWS_COLUMN
from dqrelease.expectations.suite import FLOAT_PATTERN, INTEGER_PATTERN, build_published_suite, build_suite
from dqrelease.expectations.validate import validate_table
from dqrelease.inputs.schema import Schema
from dqrelease.warehouse import connect
from tests.constraints.test_rules_pipeline import COLUMNS, _schema, _store

IN_SET = "expect_column_values_to_be_in_set"
NOT_NULL = "expect_column_values_to_not_be_null"
REGEX = "expect_column_values_to_match_regex"
BETWEEN = "expect_column_values_to_be_between"


def _rows(n: int, seed: int) -> pd.DataFrame:
    """Raw text: a float column with about ``n`` distinct values, unexpected values, NULLs, rule breaks."""
    rng = make_rng(seed)
    pick = lambda options: [options[i] for i in rng.integers(0, len(options), n)]  # noqa: E731
    weight = [f"{v:.6f}" for v in rng.uniform(-1.0, 3.0, n)]
    for i in rng.integers(0, n, 7):
        weight[i] = "heavy"  # not a float: breaks the pattern
    return pd.DataFrame({
        "colour": pick(["red", "RED", "blue", "?", "green", None]),
        "size": pick([str(v) for v in range(-5, 120)] + ["x", None]),
        "weight": weight,
        "flag": pick(["0", "1", None]),
        "note": pick(["a", "none", None]),
        "score": pick(["0.2", "0.9", None]),
    }).astype("string")


def _expected_failures(rows: pd.DataFrame) -> set[tuple[str, str, str]]:
    """The failure records of the raw suite, counted with pandas on the rows themselves."""
    colour, size, weight = rows["colour"], rows["size"], rows["weight"]
    number = pd.to_numeric(size, errors="coerce")
    counts = {
        (IN_SET, "colour"): (colour.notna() & ~colour.isin(["red", "blue", "?", "RED"])).sum(),
        (NOT_NULL, "colour"): colour.isna().sum(),
        (REGEX, "size"): (size.notna() & ~size.fillna("").str.match(INTEGER_PATTERN)).sum(),
        (BETWEEN, "size"): (number.notna() & ((number < 0) | (number >= 100))).sum(),
        (NOT_NULL, "size"): size.isna().sum(),
        (REGEX, "weight"): (weight.notna() & ~weight.fillna("").str.match(FLOAT_PATTERN)).sum(),
    }
    return {(kind, column, str(count)) for (kind, column), count in counts.items() if count}


def _rule_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Rows breaking two of the rules, counted with pandas (sizes and weights inside their edges here)."""
    rows = rows.astype(object)  # NULL is None: compares unequal to every text
    red = rows["colour"].isin(["red", "RED"])
    return {
        "red is small": int((red & (pd.to_numeric(rows["size"]) >= 10)).sum()),
        "no flag without a note": int((((rows["note"] == "none") | rows["note"].isna()) & (rows["flag"] == "1")).sum()),
    }


@pytest.fixture
def seen(monkeypatch) -> list[tuple[str | None, tuple[str, ...], int]]:
    """``(column, rules, rows)`` of every frame sent to the engine (neither column nor rules: the table frame)."""
    frames: list[tuple[str | None, tuple[str, ...], int]] = []
    check = validate_module.check_chunk

    def spy(chunk, **kwargs):
        frames.append((chunk.column, chunk.rules, len(chunk.values)))
        return check(chunk, **kwargs)

    monkeypatch.setattr(validate_module, "check_chunk", spy)
    return frames


def _failures(con, schema: Schema) -> list[dict[str, str]]:
    with pytest.raises(ValidationFailedError) as caught:
        validate_table(con, "raw", schema, label="raw table")
    return caught.value.failures


def test_counts_over_many_collapsed_chunks_are_the_rows_counts(monkeypatch, seen):
    rows = _rows(1500, seed=11)
    distinct = rows["weight"].nunique()
    schema = _schema()
    with connect(None) as con:
        _store(con, rows)
        whole = _failures(con, schema)
        assert [size for column, _, size in seen if column == "weight"] == [distinct]  # one column frame
        seen.clear()
        monkeypatch.setattr(validate_module, "CELLS_PER_CHUNK", 1)  # column frames of 100 distinct values
        monkeypatch.setattr(validate_module, "MIN_ROWS_PER_CHUNK", 100)
        cut = _failures(con, schema)
    assert distinct > 1000
    assert [size for column, _, size in seen if column == "weight"] == [100] * (distinct // 100) + [distinct % 100]
    assert cut == whole
    counted = {(f["expectation"], f["column"], f["unexpected_count"]) for f in whole if "rule" not in f}
    assert counted == _expected_failures(rows)
    assert {f["rule"] for f in whole if "rule" in f} >= {"red is small", "no flag without a note"}


def test_rule_counts_over_many_collapsed_chunks_are_the_rows_counts(monkeypatch):
    rows = _rows(1500, seed=12)
    rows["colour"] = rows["colour"].where(rows["colour"].isin(["red", "RED", "blue", "?"]), "blue")
    rows["size"] = [str(v) for v in make_rng(5).integers(0, 100, len(rows))]
    rows["weight"] = rows["weight"].where(rows["weight"] != "heavy", "0.25")
    schema = _schema(on_violation="report")
    counted = {}
    with connect(None) as con:
        _store(con, rows)
        counted["whole"] = validate_table(con, "raw", schema, label="raw table")
        monkeypatch.setattr(validate_module, "CELLS_PER_CHUNK", 1)  # rule frames of 100 combinations each
        monkeypatch.setattr(validate_module, "MIN_ROWS_PER_CHUNK", 100)
        counted["cut"] = validate_table(con, "raw", schema, label="raw table")
    assert counted["cut"] == counted["whole"]
    expected = _rule_counts(rows)
    assert {name: counted["whole"][name] for name in expected} == expected
    assert all(count > 0 for count in expected.values())


def test_gx_sees_distinct_values_not_rows(seen):
    n = 200_000
    values = {"colour": ["red", "RED", "blue", "?", "blue"], "size": ["1", "5", "20", "50", "99"],
              "weight": ["-1", "0.1", "0.7", "2", "7.5"], "flag": ["0", "1", None, "1", "0"],
              "note": ["a", "none", None, "a", "a"], "score": ["0.2", "0.9", None, "0.2", "0.9"]}
    rng = make_rng(3)
    rows = pd.DataFrame({name: [options[i] for i in rng.integers(0, 5, n)] for name, options in values.items()})
    rows = rows.astype("string")
    with connect(None) as con:
        _store(con, rows)
        counted = validate_table(con, "raw", _schema(on_violation="report"), label="raw table")
    columns = {column: size for column, _, size in seen if column is not None}
    combined = [size for _, rules, size in seen if rules]
    assert [size for column, rules, size in seen if column is None and not rules] == [1]  # the table frame
    assert columns == {name: rows[name].nunique(dropna=False) for name in values}  # one frame each, <= 5 rows
    assert max(columns.values()) <= 5 and len(seen) == 1 + len(values) + len(combined)
    assert combined and max(combined) <= 5 * 5  # rule frames: distinct pairs of two columns
    expected = _rule_counts(rows)
    assert {name: counted[name] for name in expected} == expected
    assert all(count > 0 for count in expected.values())


@pytest.mark.parametrize("suite", ["raw", "published"])
def test_weight_column_name_is_reserved(suite):
    schema = Schema.model_validate({"columns": [*COLUMNS, {"name": ROWS_COLUMN, "type": "binary"}]})
    with pytest.raises(ConfigInvalidError) as caught:
        if suite == "raw":
            build_suite(schema)
        else:
            build_published_suite(schema, numeric_values="uniform")
    message = str(caught.value)
    assert "\n" not in message
    assert re.search(re.escape(repr([ROWS_COLUMN])) + r" are reserved by validation .*; rename them$", message)


def test_a_column_named_like_the_count_in_sql_is_counted_right():
    schema = Schema.model_validate({"columns": [
        {"name": "rows", "type": "categorical", "values": ["a", "b"]},
        {"name": "flag", "type": "binary"},
    ], "rules": [{"name": "a is flagged", "if": {"rows": "a"}, "then": {"flag": "1"}, "on_violation": "report"}]})
    frame = pd.DataFrame({"rows": ["a", "a", "b", "c", "c", "c"], "flag": ["0", "1", "0", "1", "1", "1"]})
    with connect(None) as con:
        _store(con, frame.astype("string"))
        with pytest.raises(ValidationFailedError) as caught:
            validate_table(con, "raw", schema, label="raw table")
        _store(con, frame.iloc[:3].astype("string"))
        counted = validate_table(con, "raw", schema, label="raw table")
    assert caught.value.failures == [{"expectation": IN_SET, "column": "rows", "unexpected_count": "3"}]
    assert counted == {"a is flagged": 1}
