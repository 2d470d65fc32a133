"""Expectation suites built from the public schema only (never profiled from data).

A suite describes the *validation frames* of a table (:mod:`expectations.frame`), which :mod:`expectations.validate`
builds chunk by chunk from the table's distinct values: every column of the table as text (``VARCHAR``, whatever
its stored type), plus one ``DOUBLE`` column ``"<name> (as number)"`` for each numeric column whose range is
checked (parsed from the text; NULL where the text is not a number). Range checks run on that column because
Great Expectations compares numbers only on numeric columns. The column and table expectations run on the column
frame, each rule's expectation on its rule frame.

Three suites:

* :func:`build_suite` (raw table, and any table in the original representation): exactly the declared
  columns; categorical values in ``values`` ∪ alias keys; binary values in {"0", "1"}; numeric text
  matches the integer / float pattern and, when ``out_of_range = "error"``, lies in
  ``[first edge, last edge)``; no NULL unless the column is nullable; at least one row.
  With ``layout = "baskets"`` it checks the long basket table instead: columns ``row_id, item``, every item
  a declared binary column name, no NULL.
* :func:`build_published_suite` (the decoded synthetic table): the same structure, stricter where decoding
  guarantees more: categorical values in ``values`` only (aliases are never published); numbers inside
  ``[first edge, last edge)`` for every numeric column (clipped ones too: decoded values are drawn inside
  buckets) when ``numeric_values = "uniform"``, or equal to a bucket's published label (``"[17, 20)"``, or
  ``"16"`` for a one-value integer bucket with ``single_value_numbers``) when ``numeric_values = "bucket_label"``;
  NULL only in columns with a missing bucket.

Both suites end with one expectation per public rule of the schema (:mod:`expectations.rules`): no row breaks
it. Numeric columns a rule names get their derived number column too.

Every expectation carries ``meta = {"schema_column": <declared column name>}`` so that failures are
reported against the schema's names.
"""

from __future__ import annotations

from typing import Literal

import great_expectations as gx
import great_expectations.expectations as gxe

from dqrelease.errors import ConfigInvalidError
from dqrelease.expectations.frame import NUMBER_SUFFIX, ROWS_COLUMN, number_column
from dqrelease.expectations.rules import rule_expectations, rule_number_columns
from dqrelease.inputs.columns import BinaryColumn, CategoricalColumn, NumericColumn
from dqrelease.inputs.ingest import BASKET_COLUMNS
from dqrelease.inputs.schema import Schema

__all__ = [
    "BASKET_COLUMNS",
    "BINARY_VALUES",
    "FLOAT_PATTERN",
    "INTEGER_PATTERN",
    "build_published_suite",
    "build_suite",
]

INTEGER_PATTERN = r"^[+-]?[0-9]+$"
"""Text of an integer value: optional sign, digits."""

FLOAT_PATTERN = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
"""Text of a float value: decimal or scientific notation (no inf / nan)."""

BINARY_VALUES = ["0", "1"]
"""Text of a binary column's values."""

ROW_COUNT_MIN = 1


def build_suite(schema: Schema, *, layout: Literal["wide", "baskets"] = "wide") -> gx.ExpectationSuite:
    """The schema suite of a table in the original representation (the raw table).

    Args:
        schema: The public schema.
        layout: ``"wide"`` (one column per declared column) or ``"baskets"`` (the long basket table of a
            transactions source; the schema must be all binary).

    Returns:
        An unsaved :class:`great_expectations.ExpectationSuite` named ``dqrelease-raw[-baskets]``.

    Raises:
        ConfigInvalidError: A derived column name collides with a declared column, or ``layout="baskets"``
            with a schema that is not all binary.
    """
    if layout == "baskets":
        return _basket_suite(schema)
    ranged = [c.name for c in schema.columns if isinstance(c, NumericColumn) and c.out_of_range == "error"]
    ruled = [name for name in rule_number_columns(schema, "raw") if name not in ranged]
    expectations = _table_expectations(schema, [*ranged, *ruled])
    for column in schema.columns:
        if isinstance(column, CategoricalColumn):
            expectations.append(_in_set(column.name, [*column.values, *column.aliases]))
        elif isinstance(column, BinaryColumn):
            expectations.append(_in_set(column.name, BINARY_VALUES))
        else:
            expectations.append(_number_text(column))
            if column.out_of_range == "error":
                expectations.append(_in_range(column))
        if not column.nullable:
            expectations.append(_not_null(column.name))
    expectations += rule_expectations(schema, "raw")
    return gx.ExpectationSuite(name="dqrelease-raw", expectations=expectations)


def build_published_suite(
    schema: Schema, *, numeric_values: Literal["bucket_label", "uniform"], single_value_numbers: bool = True
) -> gx.ExpectationSuite:
    """The suite of the decoded synthetic table (see the module docstring).

    Args:
        schema: The public schema.
        numeric_values: How :func:`dqrelease.outputs.decode.decode_records` wrote the numeric columns.
        single_value_numbers: Whether it wrote one-value integer buckets as their number (bucket labels only).

    Returns:
        An unsaved suite named ``dqrelease-published-<numeric_values>``.
    """
    numeric = [c for c in schema.columns if isinstance(c, NumericColumn)]
    ranged = [c.name for c in numeric] if numeric_values == "uniform" else []
    expectations = _table_expectations(schema, ranged)
    for column in schema.columns:
        nullable = False
        if isinstance(column, CategoricalColumn):
            expectations.append(_in_set(column.name, list(column.values)))
        elif isinstance(column, BinaryColumn):
            expectations.append(_in_set(column.name, BINARY_VALUES))
        elif numeric_values == "uniform":
            expectations += [_number_text(column), _in_range(column)]
            nullable = column.missing_bucket
        else:
            buckets = column.published_labels(single_value_numbers=single_value_numbers)
            expectations.append(_in_set(column.name, buckets))
            nullable = column.missing_bucket
        if not nullable:
            expectations.append(_not_null(column.name))
    expectations += rule_expectations(schema, numeric_values, single_value_numbers=single_value_numbers)
    return gx.ExpectationSuite(name=f"dqrelease-published-{numeric_values}", expectations=expectations)


# ---------------------------------------------------------------------- pieces
def _table_expectations(schema: Schema, ranged: list[str]) -> list:
    derived = [number_column(name) for name in ranged]
    collisions = sorted({*derived, ROWS_COLUMN} & set(schema.names))
    if collisions:
        raise ConfigInvalidError(
            f"schema column names {collisions} are reserved by validation (names ending with {NUMBER_SUFFIX!r}, "
            f"and {ROWS_COLUMN!r}); rename them"
        )
    return [
        gxe.ExpectTableColumnsToMatchSet(
            column_set=[*schema.names, *derived], exact_match=True, meta={"schema_column": "(table)"}
        ),
        gxe.ExpectTableRowCountToBeBetween(min_value=ROW_COUNT_MIN, meta={"schema_column": "(table)"}),
    ]


def _basket_suite(schema: Schema) -> gx.ExpectationSuite:
    if not all(isinstance(c, BinaryColumn) for c in schema.columns):
        raise ConfigInvalidError("the basket layout needs a schema of binary columns (one per item id)")
    return gx.ExpectationSuite(
        name="dqrelease-raw-baskets",
        expectations=[
            gxe.ExpectTableColumnsToMatchSet(
                column_set=list(BASKET_COLUMNS), exact_match=True, meta={"schema_column": "(table)"}
            ),
            gxe.ExpectTableRowCountToBeBetween(min_value=ROW_COUNT_MIN, meta={"schema_column": "(table)"}),
            _not_null("row_id"),
            _not_null("item"),
            _in_set("item", schema.names),
        ],
    )


def _in_set(name: str, values: list[str]) -> gxe.ExpectColumnValuesToBeInSet:
    return gxe.ExpectColumnValuesToBeInSet(column=name, value_set=values, meta={"schema_column": name})


def _not_null(name: str) -> gxe.ExpectColumnValuesToNotBeNull:
    return gxe.ExpectColumnValuesToNotBeNull(column=name, meta={"schema_column": name})


def _number_text(column: NumericColumn) -> gxe.ExpectColumnValuesToMatchRegex:
    pattern = INTEGER_PATTERN if column.type == "integer" else FLOAT_PATTERN
    return gxe.ExpectColumnValuesToMatchRegex(column=column.name, regex=pattern, meta={"schema_column": column.name})


def _in_range(column: NumericColumn) -> gxe.ExpectColumnValuesToBeBetween:
    return gxe.ExpectColumnValuesToBeBetween(
        column=number_column(column.name),
        min_value=float(column.edges[0]),
        max_value=float(column.edges[-1]),
        strict_max=True,
        meta={"schema_column": column.name, "number_of": column.name},
    )
