"""Validation of wide tables (issue 26): the suite's spec crosses to the validating process once (frames name it by
digest), and a wide published chunk is copied into DuckDB before its column frames are grouped."""

from __future__ import annotations

import pickle

import pandas as pd
import pyarrow as pa
import pytest

from dqrelease.errors import ValidationFailedError
from dqrelease.expectations import validate as validate_module
from dqrelease.expectations.engine import Collapsed, SuiteSpec, check_chunk, suite_shape
from dqrelease.expectations.validate import SyntheticValidation, validate_table
from dqrelease.inputs.schema import Schema
from dqrelease.warehouse import connect

SCHEMA = Schema.model_validate({
    "columns": [
        {"name": "colour", "type": "categorical", "values": ["red", "blue"]},
        {"name": "flag", "type": "binary"},
    ],
})


def test_equal_specs_share_a_digest_and_other_suites_do_not():
    raw = SuiteSpec(schema=SCHEMA, kind="raw")
    assert raw.digest == SuiteSpec(schema=SCHEMA.model_copy(deep=True), kind="raw").digest
    assert raw.digest != SuiteSpec(schema=SCHEMA, kind="published").digest
    assert raw.digest != SuiteSpec(schema=SCHEMA, kind="raw", layout="baskets").digest
    assert suite_shape(raw).suite == raw.digest


def test_a_frame_of_an_unknown_suite_is_refused_by_name():
    frame = Collapsed(values=pd.DataFrame({"colour": [None], "flag": [None]}))
    with pytest.raises(LookupError, match="call suite_shape"):
        check_chunk(frame, suite="0" * 64)


def test_frames_are_sent_with_the_digest_not_the_schema(monkeypatch):
    sent: list[dict] = []
    call_each = validate_module.side_process.call_each

    def spy(function, items, **kwargs):
        sent.append(kwargs)
        return call_each(function, items, **kwargs)

    monkeypatch.setattr(validate_module.side_process, "call_each", spy)
    with connect(None) as con:
        con.execute("create table raw as select * from (values ('red', '1'), ('blue', '0')) t(colour, flag)")
        validate_table(con, "raw", SCHEMA, label="raw table")
    assert sent and all(set(kwargs) == {"suite"} for kwargs in sent)
    assert all(len(pickle.dumps(kwargs)) < 200 for kwargs in sent)


def _published_failures(frame: pd.DataFrame) -> list[dict[str, str]]:
    validation = SyntheticValidation(SCHEMA, numeric_values="bucket_label")
    list(validation.check_each(iter([frame])))
    with pytest.raises(ValidationFailedError) as caught:
        validation.finish()
    return caught.value.failures


def test_a_chunk_copied_into_duckdb_fails_as_one_read_in_place(monkeypatch):
    frame = pd.DataFrame({"colour": ["red", "green", "blue", "green"], "flag": ["1", "0", "2", "1"]})
    in_place = _published_failures(frame)
    monkeypatch.setattr(validate_module, "COPY_ABOVE_COLUMNS", 1)
    copied = _published_failures(frame)
    assert copied == in_place
    assert {failure["column"] for failure in copied} >= {"colour", "flag"}


def test_a_workers_chunk_copied_into_duckdb_groups_as_one_read_in_place(monkeypatch):
    batch = pa.record_batch({"colour": ["red", None, "red", "blue"], "flag": ["1", "0", "1", "1"]})
    groupings = [("colour",), ("flag",), ("colour", "flag")]

    def grouped() -> list[list[tuple]]:
        return [sorted(zip(*table.to_pydict().values(), strict=True), key=repr)
                for table in validate_module._grouped_chunk(batch, groupings=groupings)]

    in_place = grouped()
    monkeypatch.setattr(validate_module, "COPY_ABOVE_COLUMNS", 1)
    assert grouped() == in_place
    assert in_place[0] == sorted([("blue", 1), ("red", 2), (None, 1)], key=repr)
