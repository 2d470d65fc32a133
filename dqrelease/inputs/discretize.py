"""Discretize the raw table into value codes, in SQL, from the public schema only.

The codes are those of :mod:`dqrelease.inputs.encoding` (the domain of
:func:`~dqrelease.inputs.encoding.domain_from_columns`).

How codes are computed (:func:`discretize`, model ``sql/discretized_codes.sql``): the raw table is
unpivoted to long ``(row_id, column_name, raw_value)``; categorical and binary cells are joined with a
``(column, raw_value, code)`` table (declared values, alias spellings, NULL -> the ``missing`` value) and
numeric cells with a ``(column, lo, hi, code)`` bucket table by an ASOF join (``out_of_range = "clip"``
makes the first bucket open below and the last open above). The mapping tables are built in Python from
the schema and bound as parameters. Then ``sql/discretized_check.sql`` requires exactly one non-NULL code
per record and column (= exactly one bit per one-hot block) and names the columns that break it; only
then are the codes streamed into numpy as Arrow batches (three integer columns, never a frame of
strings) and deduplicated by :meth:`dq_engine.Dataset.from_codes`.

An all-binary schema over a long basket table (format ``transactions``) becomes a sparse dataset
(:meth:`dq_engine.Dataset.from_sparse`) straight from the ``(row_id, item)`` pairs.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from dq_engine import Dataset, Domain
from dqrelease.errors import ValidationFailedError
from dqrelease.inputs.columns import CategoricalColumn, NumericColumn
from dqrelease.inputs.encoding import categorical_codes, domain_from_columns, numeric_buckets
from dqrelease.inputs.ingest import is_basket_table
from dqrelease.inputs.schema import Schema
from dqrelease.warehouse import query_rows, run_script, stream_batches, table_columns

__all__ = ["discretize"]

STREAM_ROWS = 1 << 20


def discretize(con: duckdb.DuckDBPyConnection, raw_table: str, schema: Schema) -> Dataset:
    """Discretize ``raw_table`` (validated against the schema suite) into an encoded dataset.

    Args:
        con: DuckDB connection holding the raw table.
        raw_table: The wide raw table (a base table: its ``rowid`` numbers the records), or the long basket
            table of a transactions source.
        schema: The public schema (the only source of value sets and bucket edges).

    Returns:
        :meth:`Dataset.from_codes` of the codes, or :meth:`Dataset.from_sparse` for an all-binary schema.

    Raises:
        ValidationFailedError: Some record does not get exactly one code for some column (a value outside
            the schema, or a mapping that gives a value two codes); the message names the columns, never
            a value.
    """
    domain = domain_from_columns(schema.columns)
    columns = [name for name, _ in table_columns(con, raw_table)]
    run_script(con, "macros")
    if is_basket_table(columns, schema):
        return _discretize_baskets(con, raw_table, schema, domain)
    tables = {"raw_table": raw_table}
    [(n, max_rowid)] = query_rows(con, "raw_row_ids", tables=tables)
    codes = np.zeros((int(max_rowid) + 1, len(domain)), dtype=_code_dtype(domain))
    present = np.zeros(int(max_rowid) + 1, dtype=bool)
    tally = _CodeTally(len(domain))
    for model, params in _code_models(schema):
        for batch in stream_batches(con, model, params=params, tables=tables, batch_size=STREAM_ROWS):
            tally.add(batch, codes, present)
    tally.check(schema, int(n))
    codes = codes[present]
    if domain.all_binary:
        rows, cols = np.nonzero(codes)
        return Dataset.from_sparse(domain, _bits(rows, cols, codes.shape[0], domain.n_bits))
    return Dataset.from_codes(domain, codes)


def _code_models(schema: Schema) -> list[tuple[str, dict[str, Any]]]:
    """The SQL models that code the categorical / binary and the numeric columns, with their parameters."""
    categorical = [c for c in schema.columns if not isinstance(c, NumericColumn)]
    numeric = [c for c in schema.columns if isinstance(c, NumericColumn)]
    models = []
    if categorical:
        models.append(("discretized_categorical", {
            "column_names": [c.name for c in categorical],
            "columns": _column_table(schema, categorical),
            "categorical_codes": categorical_codes(schema.columns),
        }))
    if numeric:
        models.append(("discretized_numeric", {
            "column_names": [c.name for c in numeric],
            "columns": _column_table(schema, numeric),
            "numeric_buckets": numeric_buckets(schema.columns),
        }))
    return models


def _column_table(schema: Schema, selected: list) -> list[dict[str, Any]]:
    """``(column_name, column_index, missing_code)`` of the selected columns; NULL cells get missing_code."""
    index = {name: i for i, name in enumerate(schema.names)}
    rows = []
    for column in selected:
        if isinstance(column, NumericColumn):
            missing_code = column.size - 1 if column.missing_bucket else None
        elif isinstance(column, CategoricalColumn):
            missing_code = column.values.index(column.missing) if column.missing is not None else None
        else:
            missing_code = 0 if column.nullable else None
        rows.append({"column_name": column.name, "column_index": index[column.name], "missing_code": missing_code})
    return rows


# ---------------------------------------------------------------------- loading
def _code_dtype(domain: Domain) -> np.dtype:
    largest = int(domain.sizes.max())
    return np.dtype(np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else np.int32)


class _CodeTally:
    """Scatter streamed ``(row_id, column_index, code)`` batches into the code matrix and count per column.

    Every cell yields at least one row (see the SQL models), so a column is valid exactly when it got
    ``n`` rows and none of them has a NULL code: one code per record = one bit per one-hot block.
    """

    def __init__(self, m: int) -> None:
        self.rows = np.zeros(m, dtype=np.int64)
        self.nulls = np.zeros(m, dtype=np.int64)

    def add(self, batch: pa.RecordBatch, codes: np.ndarray, present: np.ndarray) -> None:
        row_id = batch.column(0).to_numpy()
        column = batch.column(1).to_numpy()
        code = batch.column(2)
        valid = code.is_valid().to_numpy(zero_copy_only=False)
        self.rows += np.bincount(column, minlength=self.rows.shape[0])
        self.nulls += np.bincount(column[~valid], minlength=self.nulls.shape[0])
        codes[row_id[valid], column[valid]] = code.drop_null().to_numpy()
        present[row_id] = True

    def check(self, schema: Schema, n: int) -> None:
        extra = self.rows - n
        bad = np.flatnonzero((extra != 0) | (self.nulls != 0))
        if bad.size == 0:
            return
        failures = [
            {
                "expectation": "one_code_per_column",
                "column": schema.names[j],
                "unexpected_count": str(int(abs(extra[j]) + self.nulls[j])),
            }
            for j in bad
        ]
        names = ", ".join(repr(f["column"]) for f in failures)
        raise ValidationFailedError(
            f"discretization did not give exactly one code per record for column(s) {names}; a value is outside "
            "the schema or a mapping gives it two codes: validate the raw table first and check values and aliases",
            failures,
        )


def _discretize_baskets(con: duckdb.DuckDBPyConnection, raw_table: str, schema: Schema, domain: Domain) -> Dataset:
    items = [{"item": name, "column_index": index} for index, name in enumerate(schema.names)]
    n = int(query_rows(con, "basket_count", {"table": raw_table})[0][0])
    rows_parts, cols_parts, unknown = [], [], 0
    for batch in stream_batches(con, "basket_bits", params={"raw_table": raw_table, "items": items}):
        cols = batch.column(1)
        unknown += cols.null_count
        keep = cols.is_valid().to_numpy(zero_copy_only=False)
        rows_parts.append(batch.column(0).to_numpy(zero_copy_only=False)[keep])
        cols_parts.append(cols.to_numpy(zero_copy_only=False)[keep].astype(np.int64))
    if unknown:
        raise ValidationFailedError(
            "some basket items are not declared as binary columns of the schema; declare the item universe in the "
            "schema (neither the items nor how many are shown: they are private)",
            [{"expectation": "expect_column_values_to_be_in_set", "column": "item", "unexpected_count": str(unknown)}],
        )
    rows = np.concatenate(rows_parts) if rows_parts else np.zeros(0, dtype=np.int64)
    cols = np.concatenate(cols_parts) if cols_parts else np.zeros(0, dtype=np.int64)
    return Dataset.from_sparse(domain, _bits(rows, cols, n, domain.n_bits))


def _bits(rows: np.ndarray, cols: np.ndarray, n: int, d: int) -> sp.csc_array:
    ones = np.ones(rows.shape[0], dtype=bool)
    return sp.csc_array((ones, (rows.astype(np.int64), cols.astype(np.int64))), shape=(n, d))
