"""Column frames of columns with the same checks are validated stacked (issue 26): same verdict, fewer GX calls.

Great Expectations costs about 20 ms per expectation evaluated, whatever the frame's length, so a 10,000-column
binary table cost 10,000 frames a pass; stacked, the columns that share their checks are one frame. These tests
check that stacking changes nothing a caller sees (failure records, counts, rule counts) on the raw and the
published path, and that the number of frames checked no longer follows the width.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dq_engine import make_rng
from dqrelease.errors import ValidationFailedError
from dqrelease.expectations import validate as validate_module
from dqrelease.expectations.engine import SuiteSpec, suite_shape
from dqrelease.expectations.validate import SyntheticValidation, validate_table
from dqrelease.inputs.schema import Schema
from dqrelease.warehouse import connect

BINARY = [*(f"b{i}" for i in range(7)), 'b7 "quoted"']  # a name that must be quoted in the UNPIVOT
SAME_VALUES = ["k1", "k2", "k3"]
SCHEMA = Schema.model_validate({
    "columns": [
        *({"name": name, "type": "binary"} for name in BINARY),
        {"name": "maybe", "type": "binary", "nullable": True},
        *({"name": name, "type": "categorical", "values": ["a", "b", "c"]} for name in SAME_VALUES),
        {"name": "other", "type": "categorical", "values": ["a", "b"]},
        {"name": "n1", "type": "integer", "edges": [0, 10, 20]},
        {"name": "n2", "type": "integer", "edges": [0, 10, 20]},
        {"name": "n3", "type": "integer", "edges": [0, 10, 30]},
    ],
})


def _rows(n: int, seed: int) -> pd.DataFrame:
    """Raw text with unexpected values and NULLs in most columns (so that many members fail, each its own count)."""
    rng = make_rng(seed)

    def pick(options: list[str | None]) -> list[str | None]:
        return [options[i] for i in rng.integers(0, len(options), n)]

    columns = {name: pick(["0", "1", "1", "0"] + (["2", None] if i in (0, 3, 7) else []))
               for i, name in enumerate(BINARY)}
    columns["maybe"] = pick(["0", "1", None])
    columns |= {name: pick(["a", "b", "c"] + (["d"] if i == 1 else [None] if i == 2 else []))
                for i, name in enumerate(SAME_VALUES)}
    columns["other"] = pick(["a", "b", "c"])
    columns |= {name: pick([str(v) for v in range(-2, 25)] + ["x"]) for name in ("n1", "n2", "n3")}
    return pd.DataFrame(columns).astype("string")


def _unstacked(monkeypatch) -> None:
    """Validation as before stacks: one frame per column, each collapsed by its own statement."""
    monkeypatch.setattr(validate_module, "_stacked", lambda frames, shape: iter(frames))
    monkeypatch.setattr(validate_module, "UNPIVOT_ROWS", 0)


def _raw_failures(rows: pd.DataFrame) -> list[dict[str, str]]:
    with connect(None) as con:
        con.register("rows_view", rows)
        con.execute("create table raw as select * from rows_view")
        with pytest.raises(ValidationFailedError) as caught:
            validate_table(con, "raw", SCHEMA, label="raw table")
    return caught.value.failures


def test_columns_with_the_same_checks_share_a_stack_and_others_do_not():
    shape = suite_shape(SuiteSpec(schema=SCHEMA, kind="raw"))
    assert set(shape.stacks) == {tuple(BINARY), tuple(SAME_VALUES), ("n1", "n2")}
    published = suite_shape(SuiteSpec(schema=SCHEMA, kind="published"))  # published binary cells are never NULL
    assert set(published.stacks) == {(*BINARY, "maybe"), tuple(SAME_VALUES), ("n1", "n2")}


def test_stacked_raw_validation_fails_as_column_by_column(monkeypatch):
    rows = _rows(600, seed=5)
    stacked = _raw_failures(rows)  # 600 rows: each stack collapsed by one UNPIVOT
    monkeypatch.setattr(validate_module, "UNPIVOT_ROWS", 0)
    assert _raw_failures(rows) == stacked  # each column collapsed by its own statement, then stacked
    _unstacked(monkeypatch)
    assert _raw_failures(rows) == stacked
    failing = {failure["column"] for failure in stacked}
    assert failing >= {"b0", "b3", BINARY[7], "k2", "k3", "other", "n1", "n2", "n3"}
    assert failing.isdisjoint({"b1", "b2", "b4", "b5", "b6", "maybe"})  # members of a failing stack that did not fail
    counts = {(failure["expectation"], failure["column"]): int(failure["unexpected_count"]) for failure in stacked}
    for name in ("b0", "b3", BINARY[7]):  # each member counts its own rows
        assert counts[("expect_column_values_to_be_in_set", name)] == int((rows[name] == "2").sum())
        assert counts[("expect_column_values_to_not_be_null", name)] == int(rows[name].isna().sum())
    number = pd.to_numeric(rows["n2"], errors="coerce")
    assert counts[("expect_column_values_to_be_between", "n2")] == int(((number < 0) | (number >= 20)).sum())


def test_stacked_published_chunks_fail_as_column_by_column(monkeypatch):
    rows = _rows(400, seed=9).drop(columns=["n1", "n2", "n3"])
    schema = Schema.model_validate({"columns": [c.model_dump() for c in SCHEMA.columns if c.name in rows.columns]})

    def failures() -> list[dict[str, str]]:
        validation = SyntheticValidation(schema, numeric_values="bucket_label")
        list(validation.check_each(iter([rows.iloc[:150], rows.iloc[150:]])))
        with pytest.raises(ValidationFailedError) as caught:
            validation.finish()
        return caught.value.failures

    stacked = failures()
    _unstacked(monkeypatch)
    assert failures() == stacked
    assert {failure["column"] for failure in stacked} >= {"b0", "b3", "maybe", "k2", "k3", "other"}


def test_a_wide_binary_table_is_checked_in_a_few_frames(monkeypatch):
    """300 binary columns: the table frame and one stacked frame, not 301 frames."""
    width = 300
    schema = Schema.model_validate({"columns": [{"name": f"c{i}", "type": "binary"} for i in range(width)]})
    sent: list[int] = []
    call_each = validate_module.side_process.call_each

    def spy(function, items, **kwargs):
        items = list(items)
        sent.append(len(items))
        return call_each(function, items, **kwargs)

    monkeypatch.setattr(validate_module.side_process, "call_each", spy)
    rng = make_rng(3)
    frame = pd.DataFrame(rng.integers(0, 2, (50, width)).astype(str), columns=schema.names)
    frame.iloc[7, 123] = "5"
    with connect(None) as con:
        con.register("rows_view", frame)
        con.execute("create table raw as select * from rows_view")
        with pytest.raises(ValidationFailedError) as caught:
            validate_table(con, "raw", schema, label="raw table")
    assert sent == [2]
    assert caught.value.failures == [
        {"expectation": "expect_column_values_to_be_in_set", "column": "c123", "unexpected_count": "1"}
    ]


@pytest.mark.parametrize("unpivot_rows", [validate_module.UNPIVOT_ROWS, 0])
def test_stacks_are_cut_at_the_cells_bound(monkeypatch, unpivot_rows):
    """With a bound of a few cells, every stack is sent in several frames, and the verdict is unchanged."""
    rows = _rows(300, seed=13)
    whole = _raw_failures(rows)
    monkeypatch.setattr(validate_module, "UNPIVOT_ROWS", unpivot_rows)
    stacked = validate_module._stacked
    sizes: list[int] = []

    def spy(frames, shape):
        for frame in stacked(frames, shape):
            sizes.append(len(frame.members))
            yield frame

    monkeypatch.setattr(validate_module, "_stacked", spy)
    monkeypatch.setattr(validate_module, "CELLS_PER_CHUNK", 12)
    monkeypatch.setattr(validate_module, "MIN_ROWS_PER_CHUNK", 1)
    assert _raw_failures(rows) == whole
    assert 1 < max(sizes) < len(BINARY)
