"""Discretize the raw table into value codes, in SQL, from the public schema only.

The codes are those of :mod:`dqrelease.inputs.encoding` (the domain of
:func:`~dqrelease.inputs.encoding.domain_from_columns`).

How codes are computed (:func:`discretize`, model ``sql/discretized_records.sql``): one statement codes every
cell of the wide raw table and groups the coded records, so what leaves DuckDB is the table's *distinct* records
with their numbers of rows: its memory and transfer grow with the distinct records, not with the rows, and
DuckDB's GROUP BY (parallel, spilling to disk when it must) does the work that grows with the rows. A categorical
or binary cell is looked up in the column's public list of declared values and alias spellings (macro
``value_code``, ``sql/macros.sql``; NULL -> the ``missing`` value, or 0 for a nullable binary column); a numeric
cell is parsed and placed in the bucket ``[lo, hi)`` that holds it (``out_of_range = "clip"`` makes the first
bucket open below and the last open above; NULL -> the missing bucket). The select list is built here from the
schema (quoted identifiers, every value a bound parameter). A cell that no mapping codes is NULL: such records are
counted per column and the columns named (never a value), so a record gets exactly one code per column (= one bit
per one-hot block). The records are then put in :class:`dq_engine.Dataset`'s canonical order
(:meth:`~dq_engine.Dataset.from_distinct`): the dataset is the one the rows would give.

On a Dask cluster the wide table is read in chunks of rows, each chunk coded and grouped on a worker by the same
statement in an in-memory DuckDB (:func:`coded_records`), and the chunks' counts summed by record here: the same
distinct records and counts, so the same dataset.

An all-binary schema over a long basket table (format ``transactions``) becomes a sparse dataset
(:meth:`dq_engine.Dataset.from_sparse`) straight from the ``(row_id, item)`` pairs.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
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
from dqrelease.runtime.chunks import ChunkWorkers, map_chunks, sum_counts, table_chunks
from dqrelease.warehouse import connect, query_rows, quote_column, render, run_script, stream_batches, table_columns

__all__ = ["coded_records", "discretize"]

CELLS, CODES = "/* cells */", "/* codes */"
"""The markers of ``sql/discretized_records.sql`` that the per-column lines replace."""

RECORD_COUNT = "record_count"
"""The rows column of ``sql/discretized_records.sql``."""

SQL_CODE_TYPES = {np.dtype(np.uint8): "utinyint", np.dtype(np.uint16): "usmallint", np.dtype(np.uint32): "uinteger"}
"""DuckDB's type for each code width of :attr:`dq_engine.Domain.code_dtype`."""

BATCH_CELLS = 1 << 24
"""Cells of the distinct records copied from Arrow into the code matrix at a time (:func:`_code_matrix`)."""

CHUNK_VIEW = "raw_chunk"
"""The name a chunk of the raw table's rows has in a worker's in-memory DuckDB."""


def discretize(
    con: duckdb.DuckDBPyConnection, raw_table: str, schema: Schema, *, workers: ChunkWorkers | None = None
) -> Dataset:
    """Discretize ``raw_table`` (validated against the schema suite) into an encoded dataset.

    With ``workers`` (a Dask cluster's) the wide table is coded and grouped by chunks of
    :data:`~dqrelease.runtime.chunks.READ_CHUNK_ROWS` rows on the workers, each by the same SQL in an in-memory
    DuckDB over the chunk (:func:`coded_records`), and the chunks' counts are summed here by record
    (:func:`~dqrelease.runtime.chunks.sum_counts`): the same dataset. A basket table is discretized here.

    Args:
        con: DuckDB connection holding the raw table.
        raw_table: The wide raw table, or the long basket table of a transactions source.
        schema: The public schema (the only source of value sets and bucket edges).
        workers: The cluster's workers, or None to discretize in ``con``'s DuckDB.

    Returns:
        :meth:`Dataset.from_distinct` of the distinct coded records, or :meth:`Dataset.from_sparse` for an
        all-binary schema.

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
    batch_rows = max(1, BATCH_CELLS // len(schema.columns))
    if workers is None:
        query, params = _records_query(raw_table, schema, domain)
        reader = con.sql(query, params=params).to_arrow_reader(batch_rows)
        try:
            codes, counts, uncoded = _code_matrix(reader, domain)
        finally:
            reader.close()
    else:
        chunks = table_chunks(con, raw_table)
        records = sum_counts(map_chunks(_coded_chunk, chunks, workers=workers, schema=schema), count=RECORD_COUNT)
        if records is None:  # an empty table: no chunk to send
            records = coded_records(con, raw_table, schema)
        codes, counts, uncoded = _code_matrix(records.to_batches(batch_rows), domain)
        del records
    _check_coded(schema, uncoded)
    dataset = Dataset.from_distinct(domain, codes, counts)
    del codes
    if domain.all_binary:  # rows in the canonical order of the distinct records: file order plays no part
        return Dataset.from_sparse(domain, _bits_of_records(dataset.codes, dataset.counts))
    return dataset


def coded_records(con: duckdb.DuckDBPyConnection, table: str, schema: Schema) -> pa.Table:
    """The distinct coded records of the wide ``table`` with their rows (``sql/discretized_records.sql``).

    One column ``code_j`` per schema column (the domain's code width; NULL: a cell no mapping codes), then
    :data:`RECORD_COUNT`.
    """
    run_script(con, "macros")
    query, params = _records_query(table, schema, domain_from_columns(schema.columns))
    return con.sql(query, params=params).to_arrow_table()


def _coded_chunk(chunk: pa.RecordBatch, *, schema: Schema) -> pa.Table:
    """:func:`coded_records` of one chunk of the raw table's rows, in an in-memory DuckDB (on a worker)."""
    with connect(None) as con:
        con.register(CHUNK_VIEW, chunk)
        return coded_records(con, CHUNK_VIEW, schema)


def _records_query(table: str, schema: Schema, domain: Domain) -> tuple[str, dict[str, Any]]:
    """``sql/discretized_records.sql`` over ``table`` with the schema's select lists, and its parameters."""
    cells, codes_list, params = _code_expressions(schema, SQL_CODE_TYPES[domain.code_dtype])
    return render("discretized_records", {"raw_table": table}).replace(CELLS, cells).replace(CODES, codes_list), params


def _code_matrix(batches: Iterable[pa.RecordBatch], domain: Domain) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct records' codes (the domain's code width), their rows, and the rows of uncoded cells per column.

    The record batches are copied into the code matrix one at a time, so the records are held once in their
    compact form (1 byte a cell for codes below 256), not as Arrow columns beside a wider copy.
    """
    m = len(domain)
    uncoded = np.zeros(m, dtype=np.int64)
    code_parts, count_parts = [], []
    for batch in batches:
        counts = batch.column(m).to_numpy().astype(np.int64)
        codes = np.zeros((batch.num_rows, m), dtype=domain.code_dtype)
        for j in range(m):
            column = batch.column(j)
            if column.null_count:
                valid = column.is_valid().to_numpy(zero_copy_only=False)
                uncoded[j] += int(counts[~valid].sum())
                codes[valid, j] = column.drop_null().to_numpy()
            else:
                codes[:, j] = column.to_numpy()
        code_parts.append(codes)
        count_parts.append(counts)
    if not code_parts:
        return np.zeros((0, m), dtype=domain.code_dtype), np.zeros(0, dtype=np.int64), uncoded
    codes = code_parts[0] if len(code_parts) == 1 else np.concatenate(code_parts)
    return codes, np.concatenate(count_parts), uncoded


def _code_expressions(schema: Schema, code_type: str) -> tuple[str, str, dict[str, Any]]:
    """The cells' and the codes' select lists (schema order) and their bound parameters (public values only).

    Every code is of the SQL type ``code_type`` (:data:`SQL_CODE_TYPES`: the domain's code width), so that
    DuckDB's grouped records and what leaves DuckDB hold a code in as few bytes as the dataset does.

    Raises:
        ValidationFailedError: A mapping gives one raw value of a column two codes, or two buckets of a numeric
            column overlap (checked on the public mapping, before any row is read).
    """
    values: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in categorical_codes(schema.columns):
        values[row["column_name"]].append((row["raw_value"], int(row["code"])))
    buckets: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for row in numeric_buckets(schema.columns):
        buckets[row["column_name"]].append((float(row["lo"]), float(row["hi"]), int(row["code"])))
    _check_mappings(schema, values, buckets)
    cells, expressions, params = [], [], {}
    for j, column in enumerate(schema.columns):
        cells.append(f"{quote_column(column.name)} as cell_{j}")
        name = f"cell_{j}"
        params[f"missing_{j}"] = _missing_code(column)
        missing = f"$missing_{j}::{code_type}"
        if isinstance(column, NumericColumn):
            number = f"parse_number({name})"
            cases = []
            for k, (lo, hi, code) in enumerate(buckets[column.name]):
                params[f"lo_{j}_{k}"], params[f"hi_{j}_{k}"], params[f"code_{j}_{k}"] = lo, hi, code
                cases.append(f"when {number} >= $lo_{j}_{k} and {number} < $hi_{j}_{k} then $code_{j}_{k}::{code_type}")
            expressions.append(f"case when {number} is null then {missing} {' '.join(cases)} end as code_{j}")
        else:
            params[f"keys_{j}"] = [value for value, _ in values[column.name]]
            params[f"codes_{j}"] = [code for _, code in values[column.name]]
            expressions.append(f"value_code({name}, $keys_{j}, $codes_{j}::{code_type}[], {missing}) as code_{j}")
    return ",\n        ".join(cells), "".join(f"{expression},\n    " for expression in expressions), params


def _missing_code(column: Any) -> int | None:
    """The code a NULL cell of ``column`` gets, or None when NULL is not a value of the column."""
    if isinstance(column, NumericColumn):
        return column.size - 1 if column.missing_bucket else None
    if isinstance(column, CategoricalColumn):
        return column.values.index(column.missing) if column.missing is not None else None
    return 0 if column.nullable else None


def _check_mappings(schema: Schema, values: dict[str, list[tuple[str, int]]],
                    buckets: dict[str, list[tuple[float, float, int]]]) -> None:
    """Refuse a mapping that could give a cell two codes (public: the schema's lists and buckets only)."""
    bad = []
    for column in schema.columns:
        if isinstance(column, NumericColumn):
            spans = sorted((lo, hi) for lo, hi, _ in buckets[column.name])
            if any(hi > next_lo for (_, hi), (next_lo, _) in itertools.pairwise(spans)):
                bad.append(column.name)
        else:
            seen: dict[str, int] = {}
            for value, code in values[column.name]:
                if seen.setdefault(value, code) != code:
                    bad.append(column.name)
                    break
    if bad:
        names = ", ".join(repr(name) for name in bad)
        raise ValidationFailedError(
            f"discretization would give a value two codes in column(s) {names}: the schema's values, aliases or "
            "buckets overlap; fix the schema",
            [{"expectation": "one_code_per_column", "column": name} for name in bad],
        )


def _check_coded(schema: Schema, uncoded: np.ndarray) -> None:
    """Refuse a table with cells no mapping codes, naming the columns (their counts go to the failure records)."""
    bad = np.flatnonzero(uncoded)
    if bad.size == 0:
        return
    failures = [
        {"expectation": "one_code_per_column", "column": schema.names[j], "unexpected_count": str(int(uncoded[j]))}
        for j in bad
    ]
    names = ", ".join(repr(f["column"]) for f in failures)
    raise ValidationFailedError(
        f"discretization did not give exactly one code per record for column(s) {names}; a value is outside "
        "the schema: validate the raw table first and check values and aliases",
        failures,
    )


# ---------------------------------------------------------------------- loading
def _bits_of_records(codes: np.ndarray, counts: np.ndarray) -> sp.csc_array:
    """The 0/1 matrix ``(n, m)`` of the rows the distinct binary ``codes`` stand for (each repeated ``counts`` times).

    Built column by column as a CSC matrix (row indices ascending in each column), never as the dense rows: the
    row indices take 4 bytes a one (8 beyond 2**31 rows) and the values 1 byte.
    """
    n = int(counts.sum())
    index_dtype = np.int32 if n < np.iinfo(np.int32).max else np.int64
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    ones_per_column = [int(counts[codes[:, j] != 0].sum()) for j in range(codes.shape[1])]
    indptr = np.concatenate([[0], np.cumsum(ones_per_column)]).astype(index_dtype)
    indices = np.empty(int(indptr[-1]), dtype=index_dtype)
    for j in range(codes.shape[1]):
        records = np.flatnonzero(codes[:, j])
        lengths = counts[records]
        # the rows of the records with a one, each record's block of rows in turn: its start, then +1, +2, ...
        first = np.repeat(starts[records] - (np.cumsum(lengths) - lengths), lengths)
        indices[indptr[j]:indptr[j + 1]] = first + np.arange(first.size)
    return sp.csc_array((np.ones(indices.size, dtype=bool), indices, indptr), shape=(n, codes.shape[1]))


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
