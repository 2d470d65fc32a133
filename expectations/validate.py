"""Validate DuckDB tables with the schema suites through Great Expectations' pandas datasource.

Why pandas: GX's SQL datasource does not work on DuckDB (rows are lost when its connection closes,
great_expectations issue #11579). The table is therefore streamed out of DuckDB as Arrow batches of at most
:data:`CELLS_PER_CHUNK` cells, each batch is validated as one pandas frame and the unexpected counts are
summed, so memory stays bounded for any table size.

Invariants:

* One ephemeral GX context per process (cached), progress bars off, analytics off (see ``expectations``).
* Results are requested with ``partial_unexpected_count = 0`` and only three things leave this module for
  each failed expectation: its type, the schema column and the number of unexpected rows. No value of the
  table is ever put in an exception, a failure record or a log message; GX exception texts (which may
  quote data) are dropped.
* Rule expectations (:mod:`expectations.rules`) count the rows breaking each public rule. On the raw table those
  counts are computed from private data (a count can equal a private ``n``): they are *returned* to the caller,
  for the internal report only, and never put in a message or a failure record. A broken ``on_violation =
  "fail"`` rule raises an error that names the rule alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any, Literal

import duckdb
import great_expectations as gx
import pandas as pd
import pyarrow as pa
from great_expectations.data_context.types.base import ProgressBarsConfig

from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.suite import build_published_suite, build_suite, number_column
from dqrelease.ingest import is_basket_table
from dqrelease.schema import Schema
from dqrelease.warehouse import stream_batches, table_columns

__all__ = ["CELLS_PER_CHUNK", "validate_synthetic", "validate_table"]

CELLS_PER_CHUNK = 16_000_000
"""Upper bound on rows x columns of one validated pandas chunk (Arrow-backed strings: about 200 MB)."""

MIN_ROWS_PER_CHUNK = 1024

_RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0, "include_unexpected_rows": False}
_COLUMN_SET = "expect_table_columns_to_match_set"
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
    return _validate(con, table, build_suite(schema, layout=layout), label=label, failing_rules=failing)


def validate_synthetic(
    con: duckdb.DuckDBPyConnection,
    table: str,
    schema: Schema,
    *,
    numeric_values: Literal["bucket_label", "uniform"],
) -> None:
    """Validate the decoded synthetic ``table`` with the published suite.

    With ``numeric_values = "uniform"`` the numbers must parse and lie in ``[first edge, last edge)``; with
    ``"bucket_label"`` they must be bucket labels. See :func:`expectations.suite.build_published_suite`.

    Every public rule fails the release when a published row breaks it (whatever its ``on_violation``: that
    only governs the raw table); the synthetic table is the mechanism's output, so its counts may be shown.

    Raises:
        ValidationFailedError: As :func:`validate_table`.
    """
    suite = build_published_suite(schema, numeric_values=numeric_values)
    _validate(con, table, suite, label="synthetic table", failing_rules={r.name for r in schema.rules}, public=True)


# ---------------------------------------------------------------------- engine
@cache
def _batch_definition() -> Any:
    """The process's one GX context, pandas datasource and whole-frame batch definition."""
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("dqrelease").add_dataframe_asset("validation_frame")
    return asset.add_batch_definition_whole_dataframe("chunk")


def _validate(
    con: duckdb.DuckDBPyConnection,
    table: str,
    suite: gx.ExpectationSuite,
    *,
    label: str,
    failing_rules: set[str] | None = None,
    public: bool = False,
) -> dict[str, int]:
    """Validate chunk by chunk; return the rows breaking each rule; raise on failures and broken failing rules.

    ``public`` (the synthetic table only) lets the message show how many rows break a rule.
    """
    columns = [name for name, _ in table_columns(con, table)]
    numbers = list(dict.fromkeys(_derived_numbers(suite)))
    numbers = [name for name in numbers if name in columns]
    rows_per_chunk = max(MIN_ROWS_PER_CHUNK, CELLS_PER_CHUNK // (len(columns) + len(numbers)))
    tally: dict[tuple[str, str], int] = {}
    broken = {e.meta["rule"]: 0 for e in suite.expectations if "rule" in (e.meta or {})}
    chunks = 0
    for batch in stream_batches(con, "validation_frame", params={"table": table}, batch_size=rows_per_chunk):
        results = _validate_frame(suite, _frame(batch, numbers))
        if chunks == 0:
            _raise_on_column_mismatch(results, label)
        _count(results, tally, broken)
        chunks += 1
    if chunks == 0:
        empty = pd.DataFrame({name: pd.Series([], dtype=object) for name in columns})
        results = _validate_frame(suite, _with_numbers(empty, numbers))
        _raise_on_column_mismatch(results, label)
        _count(results, tally, broken)
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


def _derived_numbers(suite: gx.ExpectationSuite) -> list[str]:
    """Numeric columns whose derived ``"<name> (as number)"`` column some expectation reads."""
    names: list[str] = []
    for expectation in suite.expectations:
        meta = expectation.meta or {}
        names += [meta["number_of"]] if "number_of" in meta else []
        names += list(meta.get("numbers_of") or [])
    return names


def _validate_frame(suite: gx.ExpectationSuite, frame: pd.DataFrame) -> list[Any]:
    batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame})
    return list(batch.validate(suite, result_format=_RESULT_FORMAT).results)


def _frame(batch: pa.RecordBatch, numbers: list[str]) -> pd.DataFrame:
    return _with_numbers(batch.to_pandas(), numbers)


def _with_numbers(frame: pd.DataFrame, numbers: list[str]) -> pd.DataFrame:
    """Add the derived ``DOUBLE`` column of each range-checked numeric column (NaN where not a number)."""
    for name in numbers:
        frame[number_column(name)] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    return frame


# ---------------------------------------------------------------------- results
def _raise_on_column_mismatch(results: Iterable[Any], label: str) -> None:
    """Raise when the table's columns differ from the suite's (column expectations cannot run then)."""
    for result in results:
        config = result.expectation_config
        if config.type != _COLUMN_SET or result.success:
            continue
        mismatched = (result.result.get("details") or {}).get("mismatched") or {}
        missing = _schema_names(mismatched.get("missing") or [])
        undeclared = [str(name) for name in mismatched.get("unexpected") or []]
        failures = [
            {"expectation": _COLUMN_SET, "column": name, "unexpected_count": "1"} for name in [*missing, *undeclared]
        ]
        parts = [f"missing columns {missing}"] if missing else []
        parts += [f"undeclared columns {undeclared}"] if undeclared else []
        raise ValidationFailedError(
            f"{label} does not have the schema's columns: {'; '.join(parts)}; "
            "fix the schema's column names or the table",
            failures,
        )


def _schema_names(names: Iterable[str]) -> list[str]:
    """Map derived ``"<name> (as number)"`` columns back to their schema column, keeping order, once."""
    out: list[str] = []
    for name in names:
        base = str(name).removesuffix(number_column(""))
        if base not in out:
            out.append(base)
    return out


def _count(results: Iterable[Any], tally: dict[tuple[str, str], int], broken: dict[str, int]) -> None:
    for result in results:
        config = result.expectation_config
        column = (config.meta or {}).get("schema_column") or config.kwargs.get("column") or "(table)"
        if _raised(result.exception_info):
            raise RuntimeError(
                f"Great Expectations could not evaluate {config.type} on column {column!r}; this is a bug in the "
                "suite or the validation frame (the exception text is withheld because it may quote data)"
            )
        rule = (config.meta or {}).get("rule")
        if rule is not None:  # rows breaking a public rule: the observed row count under its condition
            broken[rule] += int(result.result.get("observed_value") or 0)
            continue
        if result.success:
            continue
        count = int(result.result.get("unexpected_count") or 0) if config.type != _COLUMN_SET else 1
        count = max(count, 1)
        key = (config.type, column)
        tally[key] = tally.get(key, 0) + count


def _raised(info: Any) -> bool:
    """True if a GX exception_info (flat, or keyed by metric) reports a raised exception."""
    if not isinstance(info, dict):
        return False
    if info.get("raised_exception"):
        return True
    return any(isinstance(v, dict) and v.get("raised_exception") for v in info.values())


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
