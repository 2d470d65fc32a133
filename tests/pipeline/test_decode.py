"""Decoding synthetic codes back to the schema's columns, and validating the result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dq_engine import make_rng
from dq_engine.oracle.feasible import with_witness
from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.validate import validate_synthetic, validate_table
from dqrelease.inputs.discretize import discretize
from dqrelease.inputs.schema import Schema, load_schema, schema_constraints
from dqrelease.outputs.decode import decode_records
from tests.pipeline.toy_schema import toy_schema

ROOT = Path(__file__).resolve().parents[2]
ADULT_SCHEMA = load_schema(ROOT / "examples" / "adult" / "schema.toml")

SCHEMA = toy_schema(drop=("note",))


def _random_codes(schema: Schema, rows: int, seed: int) -> np.ndarray:
    rng = make_rng(seed)
    return np.stack([rng.integers(0, column.size, rows) for column in schema.columns], axis=1)


def _load(con, frame: pd.DataFrame, name: str = "synthetic") -> None:
    # as tasks/outputs.py does it: the typed frame becomes a typed DuckDB table
    con.register("synthetic_frame", frame)
    con.execute(f"create or replace table {name} as select * from synthetic_frame")
    con.unregister("synthetic_frame")


def test_decoded_columns_follow_the_schema():
    codes = np.array([[0, 0, 0, 0, 0], [2, 1, 1, 1, 1]])
    frame = decode_records(codes, SCHEMA, numeric_values="bucket_label", rng=make_rng(0))
    assert list(frame.columns) == SCHEMA.names
    assert frame["colour"].tolist() == ["red", "?"]
    assert frame["size"].tolist() == ["[0, 10)", "[10, 100)"]
    assert frame["weight"].tolist() == ["[0, 0.5)", "[0.5, 2.5)"]
    assert frame["flag"].tolist() == [0, 1]
    assert frame["score"].tolist()[0] == "[0, 1)" and pd.isna(frame["score"].iloc[1])


def test_uniform_numbers_lie_inside_their_buckets_and_integers_are_whole():
    codes = _random_codes(ADULT_SCHEMA, 20000, seed=1)
    frame = decode_records(codes, ADULT_SCHEMA, numeric_values="uniform", rng=make_rng(2))
    for j, column in enumerate(ADULT_SCHEMA.columns):
        if column.type != "integer":
            continue
        values = frame[column.name].to_numpy(dtype=np.int64)
        edges = np.asarray(column.edges)
        assert np.all(values >= edges[codes[:, j]]) and np.all(values <= edges[codes[:, j] + 1] - 1)
    # a one-value bucket ([40, 41) of hours-per-week) always gives that value
    j = ADULT_SCHEMA.names.index("hours-per-week")
    forty = codes[:, j] == ADULT_SCHEMA.columns[j].edges.index(40)
    assert set(frame["hours-per-week"].to_numpy()[forty].tolist()) == {40}


def test_uniform_floats_stay_below_the_upper_edge_and_missing_bucket_is_null():
    codes = np.tile(np.array([[0, 0, 1, 0, 0], [0, 0, 0, 0, 1]]), (5000, 1))
    frame = decode_records(codes, SCHEMA, numeric_values="uniform", rng=make_rng(3))
    weight = frame["weight"].to_numpy(dtype=float)
    assert weight[0::2].min() >= 0.5 and weight[0::2].max() < 2.5
    assert weight[1::2].min() >= 0.0 and weight[1::2].max() < 0.5
    assert frame["score"].isna().tolist() == [False, True] * 5000
    # uniform inside [0.5, 2.5): mean 1.5, sd 2/sqrt(12) = 0.577; 5000 draws -> standard error 0.008
    assert abs(weight[0::2].mean() - 1.5) < 0.04


def test_the_same_seed_decodes_the_same_table():
    codes = _random_codes(SCHEMA, 500, seed=4)
    first = decode_records(codes, SCHEMA, numeric_values="uniform", rng=make_rng(5))
    again = decode_records(codes, SCHEMA, numeric_values="uniform", rng=make_rng(5))
    pd.testing.assert_frame_equal(first, again)


def test_round_trip_codes_decode_validate_discretize_gives_the_same_codes(con):
    codes = _random_codes(ADULT_SCHEMA, 3000, seed=6)
    # published rows keep the schema's rules: the random records are repaired towards a feasible record
    constraints = with_witness(schema_constraints(ADULT_SCHEMA))
    codes = constraints.repair(codes, constraints.witness_codes, np.ones(codes.shape[1], dtype=bool))
    assert constraints.feasible(codes).all() and len(np.unique(codes, axis=0)) > 1000
    frame = decode_records(codes, ADULT_SCHEMA, numeric_values="uniform", rng=make_rng(7))
    _load(con, frame)

    validate_synthetic(con, "synthetic", ADULT_SCHEMA, numeric_values="uniform")
    validate_table(con, "synthetic", ADULT_SCHEMA, label="synthetic table")  # the raw suite accepts it too
    con.execute("create table raw as select columns(*)::varchar from synthetic")
    dataset = discretize(con, "raw", ADULT_SCHEMA)

    expected, counts = np.unique(codes, axis=0, return_counts=True)
    np.testing.assert_array_equal(dataset.codes.astype(np.int64), expected)
    np.testing.assert_array_equal(dataset.counts, counts)


def test_bucket_labels_pass_the_published_suite(con):
    codes = _random_codes(SCHEMA, 400, seed=8)
    _load(con, decode_records(codes, SCHEMA, numeric_values="bucket_label", rng=make_rng(9)))
    validate_synthetic(con, "synthetic", SCHEMA, numeric_values="bucket_label")
    with pytest.raises(ValidationFailedError):
        validate_table(con, "synthetic", SCHEMA, label="synthetic table")  # labels are not numbers


def test_integer_columns_need_whole_number_edges():
    from pydantic import ValidationError

    from dqrelease.inputs.columns import NumericColumn

    with pytest.raises(ValidationError, match="whole-number edges"):
        NumericColumn(name="age", type="integer", edges=[0, 0.5, 1])
    assert NumericColumn(name="ratio", type="float", edges=[0, 0.5, 1]).size == 2


def test_codes_of_the_wrong_shape_or_range_are_refused():
    with pytest.raises(ValueError, match=r"shape \(r, 5\)"):
        decode_records(np.zeros((3, 4), dtype=int), SCHEMA, numeric_values="uniform", rng=make_rng(0))
    with pytest.raises(ValueError, match=r"'size'.*0\.\.1"):
        decode_records(np.array([[0, 2, 0, 0, 0]]), SCHEMA, numeric_values="uniform", rng=make_rng(0))


# ---------------------------------------------------------------------- one-value buckets as numbers
def _feasible_adult_codes(rows: int, seed: int) -> np.ndarray:
    constraints = with_witness(schema_constraints(ADULT_SCHEMA))
    codes = _random_codes(ADULT_SCHEMA, rows, seed=seed)
    return constraints.repair(codes, constraints.witness_codes, np.ones(codes.shape[1], dtype=bool))


def test_one_value_integer_buckets_are_published_as_numbers_by_default():
    codes = _feasible_adult_codes(2000, seed=10)
    frame = decode_records(codes, ADULT_SCHEMA, numeric_values="bucket_label", rng=make_rng(0))
    j = ADULT_SCHEMA.names.index("education-num")  # edges 1, 2, ..., 17: every bucket holds one value
    assert frame["education-num"].dtype == "Int64"
    np.testing.assert_array_equal(frame["education-num"].to_numpy(dtype=np.int64), codes[:, j] + 1)
    hours = ADULT_SCHEMA.columns[ADULT_SCHEMA.names.index("hours-per-week")]  # [40, 41) among wider buckets
    forty = hours.edges.index(40)
    published = frame["hours-per-week"]
    assert published.dtype == "string"
    assert set(published[codes[:, ADULT_SCHEMA.names.index("hours-per-week")] == forty]) == {"40"}
    assert "[41, 45)" in set(published) and not any(label.startswith("[40,") for label in published)
    age = frame["age"]  # no one-value bucket: labels as before
    assert age.dtype == "string" and all(label.startswith("[") for label in age)


def test_single_value_numbers_false_keeps_every_bucket_label():
    codes = _feasible_adult_codes(200, seed=11)
    frame = decode_records(codes, ADULT_SCHEMA, numeric_values="bucket_label", rng=make_rng(0),
                           single_value_numbers=False)
    assert frame["education-num"].dtype == "string"
    assert set(frame["education-num"]) <= {f"[{v}, {v + 1})" for v in range(1, 17)}


@pytest.mark.parametrize("single_value_numbers", [True, False])
def test_published_numbers_pass_the_published_suite_and_its_rules(con, single_value_numbers):
    codes = _feasible_adult_codes(1000, seed=12)
    frame = decode_records(codes, ADULT_SCHEMA, numeric_values="bucket_label", rng=make_rng(0),
                           single_value_numbers=single_value_numbers)
    _load(con, frame)
    validate_synthetic(con, "synthetic", ADULT_SCHEMA, numeric_values="bucket_label",
                       single_value_numbers=single_value_numbers)
    # the other spelling is refused: the suite checks exactly what the decoder writes
    with pytest.raises(ValidationFailedError, match="education-num"):
        validate_synthetic(con, "synthetic", ADULT_SCHEMA, numeric_values="bucket_label",
                           single_value_numbers=not single_value_numbers)
    # a row breaking "education-num recodes education" is caught in the numbers' spelling too
    column = frame["education-num"]
    first, other = column.iloc[0], next(value for value in column if value != column.iloc[0])
    broken = frame.assign(**{"education-num": column.mask(column == first, other)})
    _load(con, broken, name="broken")
    with pytest.raises(ValidationFailedError, match="education-num recodes education"):
        validate_synthetic(con, "broken", ADULT_SCHEMA, numeric_values="bucket_label",
                           single_value_numbers=single_value_numbers)
