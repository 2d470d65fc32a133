"""Discretization in SQL from the public schema: domains, codes, the one-code-per-column check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dqrelease.inputs.discretize as discretize_module
from dq_engine import Dataset
from dqrelease.errors import ValidationFailedError
from dqrelease.inputs.columns import CategoricalColumn, NumericColumn
from dqrelease.inputs.config import SourceConfig, load_config
from dqrelease.inputs.discretize import discretize
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.ingest import ingest_source
from dqrelease.inputs.schema import Schema, load_schema
from tests.pipeline.toy_schema import toy_schema

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
KDD99 = ROOT / "examples" / "kdd99"
KDD99_FILE = "kddcup99_10pct/kddcup.data_10_percent.gz"
"""The shared file that examples/kdd99/release.toml reads."""

SCHEMA = toy_schema()


def _table(con, columns: dict[str, list], name: str = "raw") -> None:
    frame = pd.DataFrame({k: pd.array(v, dtype="string") for k, v in columns.items()})
    con.register("frame", frame)
    con.execute(f"create or replace table {name} as select * from frame")
    con.unregister("frame")


def _rows(dataset) -> list[tuple[int, ...]]:
    return sorted(tuple(int(v) for v in row) for row in dataset.to_codes())


# ---------------------------------------------------------------------- domain
def test_domain_has_one_block_per_column_with_schema_labels():
    domain = domain_from_columns(SCHEMA.columns)
    assert domain.names == ("colour", "size", "weight", "flag", "note", "score")
    assert domain.sizes.tolist() == [3, 2, 2, 2, 2, 2]
    assert domain.is_binary.tolist() == [False, False, False, True, False, False]
    assert domain.attributes[1].labels == ("[0, 10)", "[10, 100)")
    assert domain.attributes[5].labels == ("[0, 1)", "missing")
    assert domain.n_bits == 3 + 2 + 2 + 1 + 2 + 2


# ---------------------------------------------------------------------- codes
def test_codes_follow_values_aliases_buckets_clipping_and_missing(con):
    _table(con, {
        "colour": ["red", "RED", "?", "blue"],
        "size": ["0", "9", "10", "99"],
        "weight": ["-3", "0.5", "1e9", "0.49"],
        "flag": ["0", "1", "1", "0"],
        "note": ["a", None, "none", "a"],
        "score": ["0.5", None, "0", "0.999"],
    })
    dataset = discretize(con, "raw", SCHEMA)
    assert dataset.n == 4
    assert _rows(dataset) == sorted([
        (0, 0, 0, 0, 0, 0),
        (0, 0, 1, 1, 1, 1),
        (2, 1, 1, 1, 1, 0),
        (1, 1, 0, 0, 0, 0),
    ])


def test_codes_match_a_pandas_reference_on_a_slice_of_adult(con, tmp_path):
    train = (ADULT / "data" / "adult.data").read_text().splitlines()[:700]
    test = (ADULT / "data" / "adult.test").read_text().splitlines()[:301]
    (tmp_path / "train.csv").write_text("\n".join(train) + "\n")
    (tmp_path / "test.csv").write_text("\n".join(test) + "\n")
    config = load_config(ADULT / "release.toml")
    schema = load_schema(config.schema_file)
    source = config.source.model_copy(update={"paths": [tmp_path / "train.csv", tmp_path / "test.csv"]})
    assert ingest_source(con, source, schema) == 1000

    dataset = discretize(con, "raw", schema)

    frame = pd.concat([
        pd.read_csv(tmp_path / name, header=None, names=schema.names, skipinitialspace=True, comment="|", dtype=str)
        for name in ("train.csv", "test.csv")
    ])
    reference = np.empty((len(frame), len(schema.columns)), dtype=np.int64)
    for j, column in enumerate(schema.columns):
        values = frame[column.name].str.strip()
        if isinstance(column, CategoricalColumn):
            lookup = {v: i for i, v in enumerate(column.values)}
            lookup |= {alias: lookup[target] for alias, target in column.aliases.items()}
            reference[:, j] = values.map(lookup).to_numpy()
        else:
            assert isinstance(column, NumericColumn)
            bucket = np.searchsorted(column.edges, values.astype(float).to_numpy(), side="right") - 1
            reference[:, j] = np.clip(bucket, 0, len(column.edges) - 2)
    expected, counts = np.unique(reference, axis=0, return_counts=True)
    assert dataset.n == 1000
    np.testing.assert_array_equal(dataset.codes.astype(np.int64), expected)
    np.testing.assert_array_equal(dataset.counts, counts)


def test_a_value_outside_the_schema_gets_no_code_and_is_named_without_the_value(con):
    _table(con, {
        "colour": ["red", "Moonlighting-Zebra"], "size": ["1", "1000"], "weight": ["1", "1"],
        "flag": ["0", "1"], "note": ["a", "a"], "score": ["0", "0"],
    })
    with pytest.raises(ValidationFailedError) as caught:
        discretize(con, "raw", SCHEMA)
    assert caught.value.failures == [
        {"expectation": "one_code_per_column", "column": "colour", "unexpected_count": "1"},
        {"expectation": "one_code_per_column", "column": "size", "unexpected_count": "1"},
    ]
    assert "Moonlighting-Zebra" not in str(caught.value) + repr(caught.value.failures)


def test_a_mapping_with_two_codes_for_a_value_is_refused_before_any_row_is_read(con, monkeypatch):
    original = discretize_module.categorical_codes

    def broken(schema):
        return [*original(schema), {"column_name": "colour", "raw_value": "blue", "code": 0}]

    monkeypatch.setattr(discretize_module, "categorical_codes", broken)
    _table(con, {
        "colour": ["blue", "red", "blue"], "size": ["1"] * 3, "weight": ["1"] * 3,
        "flag": ["0"] * 3, "note": ["a"] * 3, "score": ["0"] * 3,
    })
    con.execute("create or replace view raw_unreadable as select colour, size, weight, flag, note, "
                "error('the table was read') as score from raw")
    with pytest.raises(ValidationFailedError, match=r"two codes in column\(s\) 'colour'.*fix the schema") as caught:
        discretize(con, "raw_unreadable", SCHEMA)
    assert caught.value.failures == [{"expectation": "one_code_per_column", "column": "colour"}]


def test_overlapping_buckets_are_caught_too(con, monkeypatch):
    original = discretize_module.numeric_buckets

    def broken(schema):
        return [*original(schema), {"column_name": "size", "lo": 5.0, "hi": 50.0, "code": 1}]

    monkeypatch.setattr(discretize_module, "numeric_buckets", broken)
    _table(con, {
        "colour": ["red"] * 2, "size": ["1", "7"], "weight": ["1"] * 2,
        "flag": ["0"] * 2, "note": ["a"] * 2, "score": ["0"] * 2,
    })
    with pytest.raises(ValidationFailedError, match=r"two codes in column\(s\) 'size'"):
        discretize(con, "raw", SCHEMA)


def test_schema_refuses_an_alias_that_is_also_a_declared_value():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="alias spellings \\['blue'\\] are also declared values"):
        CategoricalColumn(name="colour", values=["red", "blue"], aliases={"blue": "red"})


def test_rows_deleted_from_the_raw_table_leave_no_empty_record(con):
    _table(con, {
        "colour": ["red", "blue", "?"], "size": ["1", "20", "3"], "weight": ["1"] * 3,
        "flag": ["0", "1", "0"], "note": ["a"] * 3, "score": ["0"] * 3,
    })
    con.execute("delete from raw where colour = 'blue'")
    dataset = discretize(con, "raw", SCHEMA)
    assert dataset.n == 2
    assert _rows(dataset) == [(0, 0, 1, 0, 0, 0), (2, 0, 1, 0, 0, 0)]


def test_the_dataset_does_not_depend_on_the_order_of_the_rows(con):
    rng = np.random.default_rng(7)
    columns = {
        "colour": rng.choice(["red", "blue", "?"], 500).tolist(),
        "size": rng.choice(["1", "7", "20", "3"], 500).tolist(),
        "weight": ["1"] * 500, "flag": rng.choice(["0", "1"], 500).tolist(), "note": ["a"] * 500,
        "score": ["0"] * 500,
    }
    _table(con, columns)
    first = discretize(con, "raw", SCHEMA)
    order = rng.permutation(500)
    _table(con, {name: [values[i] for i in order] for name, values in columns.items()})
    second = discretize(con, "raw", SCHEMA)
    reference = Dataset.from_codes(first.domain, first.to_codes())
    for dataset in (first, second):
        assert dataset.n == 500
        np.testing.assert_array_equal(dataset.codes, reference.codes)
        np.testing.assert_array_equal(dataset.counts, reference.counts)


def test_the_private_table_leaves_duckdb_as_distinct_records_only(con, monkeypatch):
    """200,000 rows of 3 distinct records: what is fetched from DuckDB has 3 rows (the GROUP BY ran in DuckDB)."""
    seen = []
    original = discretize_module.Dataset.from_distinct

    def spy(domain, codes, counts):
        seen.append(codes.shape[0])
        return original(domain, codes, counts)

    monkeypatch.setattr(discretize_module.Dataset, "from_distinct", staticmethod(spy))
    _table(con, {"colour": ["red", "blue", "?", "red"] * 50_000, "size": ["1", "20", "3", "1"] * 50_000,
                 "weight": ["1"] * 200_000, "flag": ["0", "1", "0", "0"] * 50_000, "note": ["a"] * 200_000,
                 "score": ["0"] * 200_000})
    dataset = discretize(con, "raw", SCHEMA)
    assert seen == [3]
    assert dataset.n == 200_000 and sorted(dataset.counts.tolist()) == [50_000, 50_000, 100_000]


# ---------------------------------------------------------------------- all-binary schemas
ITEMS = Schema.model_validate({"columns": [{"name": n, "type": "binary"} for n in ["10", "20", "30"]]})


def test_wide_binary_columns_become_a_sparse_dataset(con):
    _table(con, {"10": ["1", "0", "1"], "20": ["0", "0", "1"], "30": ["0", "0", "0"]})
    dataset = discretize(con, "raw", ITEMS)
    assert dataset.is_sparse and dataset.n == 3
    assert sorted(map(tuple, dataset.bits.toarray().astype(int))) == [(0, 0, 0), (1, 0, 0), (1, 1, 0)]


def test_the_sparse_matrix_of_distinct_binary_records_is_the_matrix_of_their_rows():
    """Column-by-column CSC of records repeated by their counts = the dense rows' matrix (4-byte row indices)."""
    rng = np.random.default_rng(11)
    codes = (rng.random((300, 40)) < 0.3).astype(np.uint8)
    codes[7] = 0  # a record with no one
    counts = rng.integers(1, 9, size=300)
    matrix = discretize_module._bits_of_records(codes, counts)
    np.testing.assert_array_equal(matrix.toarray(), np.repeat(codes, counts, axis=0).astype(bool))
    assert matrix.has_sorted_indices and matrix.indices.dtype == np.int32


def test_wide_binary_discretization_holds_about_the_compact_codes(con):
    """numpy's peak while discretizing 400 binary columns x 20,000 distinct rows (tracemalloc sees numpy's buffers).

    The distinct records are copied from DuckDB a batch at a time into a 1-byte code matrix, and the sparse matrix
    is built by column: measured 2.7 bytes a cell (the dataset's codes, its canonical copy, the CSC's 5 bytes a
    one at a density of 0.3). Before, int32 codes beside the dense rows and int64 coordinates of every one took
    about 17: the bound, 6 bytes a cell, separates the two with room on both sides.
    """
    import tracemalloc

    columns, rows = 400, 20_000
    names = [f"c{j}" for j in range(columns)]
    rng = np.random.default_rng(5)
    frame = pd.DataFrame((rng.random((rows, columns)) < 0.3).astype(np.int8), columns=names)
    con.register("frame", frame)
    con.execute("create table raw as select * from frame")
    con.unregister("frame")
    schema = Schema.model_validate({"columns": [{"name": n, "type": "binary"} for n in names]})
    tracemalloc.start()
    try:
        dataset = discretize(con, "raw", schema)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dataset.n == rows and dataset.bits.nnz == int(frame.to_numpy().sum())
    assert peak / (rows * columns) < 6.0, f"{peak / (rows * columns):.1f} bytes a cell"


def test_column_names_of_any_text_are_quoted_not_interpreted(con):
    """Schema names reach the SQL text quoted (``quote_column``): a double quote, spaces and SQL in a name are
    just a name (the table is still there afterwards), and names differing only in case are not confused."""
    names = ['a "quoted" name', 'x"; drop table raw; --', "Case", "case "]
    _table(con, {names[0]: ["1", "0"], names[1]: ["0", "0"], names[2]: ["1", "1"], names[3]: ["0", "1"]})
    schema = Schema.model_validate({"columns": [{"name": n, "type": "binary"} for n in names]})
    dataset = discretize(con, "raw", schema)
    assert sorted(map(tuple, dataset.bits.toarray().astype(int))) == [(0, 0, 1, 1), (1, 0, 1, 0)]
    assert con.sql("select count(*) from raw").fetchall() == [(2,)]

def test_codes_leave_duckdb_in_the_domains_code_width(con):
    """DuckDB's grouped records hold a code in the dataset's width (1 byte below 256 values), not as INTEGER."""
    _table(con, {"colour": ["red"], "size": ["1"], "weight": ["1"], "flag": ["0"], "note": ["a"], "score": ["0"]})
    records = discretize_module.coded_records(con, "raw", SCHEMA)
    assert {str(records.schema.field(j).type) for j in range(len(SCHEMA.columns))} == {"uint8"}

def test_basket_table_becomes_a_sparse_dataset(con, tmp_path):
    path = tmp_path / "baskets.txt"
    path.write_text("10 20\n30 10\n20\n")
    assert ingest_source(con, SourceConfig(format="transactions", paths=[path]), ITEMS) == 3
    dataset = discretize(con, "raw", ITEMS)
    assert dataset.is_sparse and dataset.bits.shape == (3, 3)
    assert sorted(map(tuple, dataset.bits.toarray().astype(int))) == [(0, 1, 0), (1, 0, 1), (1, 1, 0)]


def test_basket_items_outside_the_schema_are_refused(con, tmp_path):
    path = tmp_path / "baskets.txt"
    path.write_text("10 20\n99\n")
    ingest_source(con, SourceConfig(format="transactions", paths=[path]), ITEMS)
    with pytest.raises(ValidationFailedError, match="basket items are not declared") as refused:
        discretize(con, "raw", ITEMS)
    assert "99" not in str(refused.value) and not any(ch.isdigit() for ch in str(refused.value))  # nor how many


# ---------------------------------------------------------------------- the real KDD Cup 99 file
@pytest.mark.slow
def test_kdd99_discretizes_to_494021_records(con, require_shared_data):
    require_shared_data(KDD99_FILE)
    config = load_config(KDD99 / "release.toml")
    schema = load_schema(config.schema_file)
    ingest_source(con, config.source, schema)
    dataset = discretize(con, "raw", schema)
    assert dataset.n == 494021
    assert dataset.codes.shape[1] == 42
    assert int(dataset.counts.sum()) == 494021
    label = schema.names.index("label")
    counts = dataset.one_way_counts()[label]
    assert counts.sum() == 494021
    assert counts.min() >= 0 and counts.size == 23
