"""Validate DuckDB tables with the schema suites through Great Expectations' pandas datasource.

Why pandas: GX's SQL datasource does not work on DuckDB (rows are lost when its connection closes,
great_expectations issue #11579). The table is therefore streamed out of DuckDB as Arrow batches of at most
:data:`CELLS_PER_CHUNK` cells, each batch is validated as one pandas frame by :mod:`expectations.engine` (in the
side process when one runs, :mod:`dqrelease.runtime.side_process`) and the unexpected counts are summed, so memory
stays bounded for any table size. This module does not import GX.

Invariants:

* Only three things leave the engine for each failed expectation: its type, the schema column and the number of
  unexpected rows. No value of the table is ever put in an exception, a failure record or a log message; GX
  exception texts (which may quote data) are dropped.
* Rule expectations (:mod:`expectations.rules`) count the rows breaking each public rule. On the raw table those
  counts are computed from private data (a count can equal a private ``n``): they are *returned* to the caller,
  for the internal report only, and never put in a message or a failure record. A broken ``on_violation =
  "fail"`` rule raises an error that names the rule alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import duckdb

from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.engine import COLUMN_SET, Outcome, SuiteSpec, check_chunk, suite_shape
from dqrelease.inputs.ingest import is_basket_table
from dqrelease.inputs.schema import Schema
from dqrelease.runtime import side_process
from dqrelease.warehouse import stream_batches, table_columns

__all__ = ["CELLS_PER_CHUNK", "validate_synthetic", "validate_table"]

CELLS_PER_CHUNK = 16_000_000
"""Upper bound on rows x columns of one validated pandas chunk (Arrow-backed strings: about 200 MB)."""

MIN_ROWS_PER_CHUNK = 1024

_ROW_COUNT = "expect_table_row_count_to_equal"
_MESSAGE_FAILURES = 6


def validate_table(con: duckdb.DuckDBPyConnection, table: str, schema: Schema, *, label: str) -> dict[str, int]:
    """Validate ``table`` against the schema suite (:func:`expectations.suite.build_suite`).

    A long basket table (columns ``row_id, item`` with an all-binary schema) is validated with the basket
    suite; any other table with the wide suite.

    Args:
        con: DuckDB connection holding ``table``.
        table: Table name (given by code).
        schema: The public schema.
        label: What the table is, for the message (e.g. ``"raw table"``).

    Returns:
        The number of rows breaking each public rule (INTERNAL: counts from the table; empty without rules).

    Raises:
        ValidationFailedError: With one failure record ``{expectation, column, unexpected_count}`` per failed
            expectation (counts summed over the whole table), and one record ``{expectation, column, rule}`` per
            broken ``on_violation = "fail"`` rule (no count); the message names them and no value.
    """
    columns = [name for name, _ in table_columns(con, table)]
    layout = "baskets" if is_basket_table(columns, schema) else "wide"
    failing = {rule.name for rule in schema.rules if rule.on_violation == "fail"}
    spec = SuiteSpec(schema=schema, kind="raw", layout=layout)
    return _validate(con, table, spec, label=label, failing_rules=failing)


def prepare_raw_suite(schema: Schema) -> None:
    """Start building the raw table's suite in the side process while the run starts (validation then finds it).

    The wide layout's suite: a basket table (known only once ingested) builds its own when validated.
    """
    side_process.prefetch(suite_shape, SuiteSpec(schema=schema, kind="raw", layout="wide"))


def validate_synthetic(
    con: duckdb.DuckDBPyConnection,
    table: str,
    schema: Schema,
    *,
    numeric_values: Literal["bucket_label", "uniform"],
    single_value_numbers: bool = True,
) -> None:
    """Validate the decoded synthetic ``table`` with the published suite.

    With ``numeric_values = "uniform"`` the numbers must parse and lie in ``[first edge, last edge)``; with
    ``"bucket_label"`` they must be bucket labels (one-value integer buckets their number with
    ``single_value_numbers``). See :func:`expectations.suite.build_published_suite`.

    Every public rule fails the release when a published row breaks it (whatever its ``on_violation``: that
    only governs the raw table); the synthetic table is the mechanism's output, so its counts may be shown.

    Raises:
        ValidationFailedError: As :func:`validate_table`.
    """
    spec = SuiteSpec(schema=schema, kind="published", numeric_values=numeric_values,
                     single_value_numbers=single_value_numbers)
    _validate(con, table, spec, label="synthetic table", failing_rules={r.name for r in schema.rules}, public=True)


# ---------------------------------------------------------------------- streaming
def _validate(
    con: duckdb.DuckDBPyConnection,
    table: str,
    spec: SuiteSpec,
    *,
    label: str,
    failing_rules: set[str] | None = None,
    public: bool = False,
) -> dict[str, int]:
    """Validate chunk by chunk; return the rows breaking each rule; raise on failures and broken failing rules.

    ``public`` (the synthetic table only) lets the message show how many rows break a rule.
    """
    columns = [name for name, _ in table_columns(con, table)]
    shape = side_process.call(suite_shape, spec)
    numbers = [name for name in shape.numbers if name in columns]
    rows_per_chunk = max(MIN_ROWS_PER_CHUNK, CELLS_PER_CHUNK // (len(columns) + len(numbers)))
    tally: dict[tuple[str, str], int] = {}
    broken = dict.fromkeys(shape.rules, 0)
    batches = stream_batches(con, "validation_frame", params={"table": table}, batch_size=rows_per_chunk)
    chunks = 0
    for outcomes in side_process.call_each(check_chunk, batches, spec=spec, columns=columns, numbers=numbers):
        if chunks == 0:
            _raise_on_column_mismatch(outcomes, label)
        _count(outcomes, tally, broken)
        chunks += 1
    if chunks == 0:
        outcomes = side_process.call(check_chunk, None, spec=spec, columns=columns, numbers=numbers)
        _raise_on_column_mismatch(outcomes, label)
        _count(outcomes, tally, broken)
    failures = [
        {"expectation": expectation, "column": column, "unexpected_count": str(count)}
        for (expectation, column), count in tally.items()
    ]
    rules = [name for name, count in broken.items() if count and name in (failing_rules or set())]
    if failures or rules:
        failures += [{"expectation": _ROW_COUNT, "column": "(rules)", "rule": name} for name in rules]
        counts = {name: broken[name] for name in rules} if public else None
        raise ValidationFailedError(_message(label, failures, counts, public=public), failures)
    return broken


# ---------------------------------------------------------------------- results
def _raise_on_column_mismatch(outcomes: Iterable[Outcome], label: str) -> None:
    """Raise when the table's columns differ from the suite's (column expectations cannot run then)."""
    for outcome in outcomes:
        if outcome.expectation != COLUMN_SET or outcome.success:
            continue
        missing, undeclared = list(outcome.missing), list(outcome.undeclared)
        failures = [
            {"expectation": COLUMN_SET, "column": name, "unexpected_count": "1"} for name in [*missing, *undeclared]
        ]
        parts = [f"missing columns {missing}"] if missing else []
        parts += [f"undeclared columns {undeclared}"] if undeclared else []
        raise ValidationFailedError(
            f"{label} does not have the schema's columns: {'; '.join(parts)}; "
            "fix the schema's column names or the table",
            failures,
        )


def _count(outcomes: Iterable[Outcome], tally: dict[tuple[str, str], int], broken: dict[str, int]) -> None:
    for outcome in outcomes:
        if outcome.raised:
            raise RuntimeError(
                f"Great Expectations could not evaluate {outcome.expectation} on column {outcome.column!r}; this is "
                "a bug in the suite or the validation frame (the exception text is withheld because it may quote data)"
            )
        if outcome.rule is not None:  # rows breaking a public rule: the observed row count under its condition
            broken[outcome.rule] += outcome.observed_value
            continue
        if outcome.success:
            continue
        count = max(outcome.unexpected_count if outcome.expectation != COLUMN_SET else 1, 1)
        key = (outcome.expectation, outcome.column)
        tally[key] = tally.get(key, 0) + count


def _message(
    label: str, failures: list[dict[str, str]], rule_counts: dict[str, int] | None = None, *, public: bool = False
) -> str:
    """The one-line message; counts of failing rows only for a ``public`` table (the synthetic one).

    A count of raw rows failing a check is private (it can equal n): the message names the check and the column,
    and the counts stay in the exception's ``failures`` (INTERNAL, never logged).
    """
    shown = []
    for f in failures[:_MESSAGE_FAILURES]:
        if "rule" in f:
            count = f" ({rule_counts[f['rule']]} rows)" if rule_counts is not None else ""
            shown.append(f"rule {f['rule']!r}{count}")
        else:
            shown.append(
                f"{f['expectation']} on {f['column']!r}"
                + (f" ({f['unexpected_count']} rows)" if public and f["column"] != "(table)" else "")
            )
    more = f" and {len(failures) - _MESSAGE_FAILURES} more" if len(failures) > _MESSAGE_FAILURES else ""
    rules = any("rule" in f for f in failures)
    fix = "fix the data or the schema file" + (
        " (or set a raw-table rule's on_violation = 'report')" if rules and rule_counts is None else ""
    )
    return (
        f"{label} failed {len(failures)} expectation(s) of the schema suite: {', '.join(shown)}{more}; "
        f"{fix} (values are not shown: they are private)"
    )
