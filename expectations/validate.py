"""Validate DuckDB tables with the schema suites through Great Expectations' pandas datasource.

Why pandas: GX's SQL datasource does not work on DuckDB (rows are lost when its connection closes,
great_expectations issue #11579). The table is therefore streamed out of DuckDB as Arrow batches of at most
:data:`CELLS_PER_CHUNK` cells, each batch is validated as one pandas frame by :mod:`expectations.engine` (in the
side process when one runs, :mod:`dqrelease.runtime.side_process`) and the unexpected counts are summed, so memory
stays bounded for any table size. The synthetic table is validated the same way while it is written, a chunk of
decoded rows at a time (:class:`SyntheticValidation`), so it is never held whole. The counts, the failures and their
order (the suite's) do not depend on how the table is cut into chunks. This module does not import GX.

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

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Literal

import duckdb
import pandas as pd

from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.engine import COLUMN_SET, Outcome, SuiteShape, SuiteSpec, check_chunk, suite_shape
from dqrelease.inputs.ingest import is_basket_table
from dqrelease.inputs.schema import Schema
from dqrelease.runtime import side_process
from dqrelease.warehouse import connect, stream_batches, table_columns

__all__ = ["CELLS_PER_CHUNK", "SyntheticValidation", "validate_synthetic", "validate_table"]

CELLS_PER_CHUNK = 16_000_000
"""Upper bound on rows x columns of one validated pandas chunk (Arrow-backed strings: about 200 MB)."""

MIN_ROWS_PER_CHUNK = 1024

_ROW_COUNT = "expect_table_row_count_to_equal"
_SYNTHETIC = "synthetic table"
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
    :class:`SyntheticValidation` runs the same checks on a table that is being written chunk by chunk.

    Raises:
        ValidationFailedError: As :func:`validate_table`.
    """
    spec = _published_spec(schema, numeric_values=numeric_values, single_value_numbers=single_value_numbers)
    _validate(con, table, spec, label=_SYNTHETIC, failing_rules={rule.name for rule in schema.rules}, public=True)


class SyntheticValidation:
    """:func:`validate_synthetic` on a table that is being written: each decoded chunk is checked as it goes by.

    Each chunk (a pandas frame of the published columns) is read as text through DuckDB, as
    :func:`validate_synthetic` reads a table, and sent to the side process in batches of at most
    :data:`CELLS_PER_CHUNK` cells, at most :data:`~dqrelease.runtime.side_process.IN_FLIGHT` of them at a time
    (so memory stays bounded); :meth:`finish` waits for the last ones and raises the failures of the whole table,
    the same failures and message as :func:`validate_synthetic` on the whole table, however it was cut.

    Use: :meth:`check_each` around the frames being written, then :meth:`finish` (or :meth:`abandon` when the
    writing failed). One instance per table.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        numeric_values: Literal["bucket_label", "uniform"],
        single_value_numbers: bool = True,
    ) -> None:
        """Prepare the published suite's checks (arguments as :func:`validate_synthetic`)."""
        self._spec = _published_spec(schema, numeric_values=numeric_values, single_value_numbers=single_value_numbers)
        self._shape = side_process.call(suite_shape, self._spec)
        self._tally = _Tally(self._shape, label=_SYNTHETIC, failing_rules={rule.name for rule in schema.rules},
                             public=True)
        self._pending: deque[side_process.Pending[list[Outcome]]] = deque()
        self._columns: list[str] | None = None

    def check_each(self, frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        """Yield each frame of ``frames`` after sending it to be checked."""
        for frame in frames:
            self.send(frame)
            yield frame

    def send(self, frame: pd.DataFrame) -> None:
        """Start checking the next chunk of the table (waits for earlier chunks beyond the ones in flight)."""
        with connect(None) as con:
            con.register("synthetic_chunk", frame)  # read through a view on the frame: no copy into DuckDB
            if self._columns is None:
                self._columns = [name for name, _ in table_columns(con, "synthetic_chunk")]
            numbers, rows = _chunking(self._shape, self._columns)
            batches = stream_batches(con, "validation_frame", params={"table": "synthetic_chunk"}, batch_size=rows)
            for batch in batches:
                self._pending.append(side_process.begin(
                    check_chunk, batch, spec=self._spec, columns=self._columns, numbers=numbers
                ))
                while len(self._pending) > side_process.IN_FLIGHT:
                    self._tally.add(self._pending.popleft().result())

    def finish(self) -> None:
        """Wait for the chunks still being checked; raise the table's failures.

        Raises:
            ValidationFailedError: As :func:`validate_synthetic`.
        """
        while self._pending:
            self._tally.add(self._pending.popleft().result())
        if self._tally.chunks == 0:  # nothing was sent: the suite on an empty table of the schema's columns
            columns = list(self._spec.schema.names)
            numbers, _ = _chunking(self._shape, columns)
            self._tally.add(side_process.call(check_chunk, None, spec=self._spec, columns=columns, numbers=numbers))
        self._tally.result()

    def abandon(self) -> None:
        """Stop waiting for the chunks still being checked (the table will not be published)."""
        for pending in self._pending:
            pending.abandon()
        self._pending.clear()


def _published_spec(
    schema: Schema, *, numeric_values: Literal["bucket_label", "uniform"], single_value_numbers: bool
) -> SuiteSpec:
    return SuiteSpec(schema=schema, kind="published", numeric_values=numeric_values,
                     single_value_numbers=single_value_numbers)


# ---------------------------------------------------------------------- streaming
def _chunking(shape: SuiteShape, columns: list[str]) -> tuple[list[str], int]:
    """The derived number columns a table with ``columns`` needs, and the rows of one validated chunk."""
    numbers = [name for name in shape.numbers if name in columns]
    return numbers, max(MIN_ROWS_PER_CHUNK, CELLS_PER_CHUNK // (len(columns) + len(numbers)))


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
    numbers, rows_per_chunk = _chunking(shape, columns)
    tally = _Tally(shape, label=label, failing_rules=failing_rules or set(), public=public)
    batches = stream_batches(con, "validation_frame", params={"table": table}, batch_size=rows_per_chunk)
    for outcomes in side_process.call_each(check_chunk, batches, spec=spec, columns=columns, numbers=numbers):
        tally.add(outcomes)
    if tally.chunks == 0:
        tally.add(side_process.call(check_chunk, None, spec=spec, columns=columns, numbers=numbers))
    return tally.result()


class _Tally:
    """A suite's outcomes summed over the chunks of one table, and the table's verdict.

    Failures are listed in the suite's order (the order of the first chunk's outcomes), so the message does not
    depend on which chunk failed first.
    """

    def __init__(self, shape: SuiteShape, *, label: str, failing_rules: set[str], public: bool) -> None:
        self.label, self.failing_rules, self.public = label, failing_rules, public
        self.chunks = 0
        self.failed: dict[tuple[str, str], int] = {}
        self.broken = dict.fromkeys(shape.rules, 0)
        self.order: dict[tuple[str, str], int] = {}

    def add(self, outcomes: list[Outcome]) -> None:
        """Count one chunk's outcomes (the first chunk's column check raises at once)."""
        if self.chunks == 0:
            _raise_on_column_mismatch(outcomes, self.label)
            for position, outcome in enumerate(outcomes):
                self.order.setdefault((outcome.expectation, outcome.column), position)
        _count(outcomes, self.failed, self.broken)
        self.chunks += 1

    def result(self) -> dict[str, int]:
        """The rows breaking each rule; raise on failed expectations and broken failing rules."""
        failures = [
            {"expectation": expectation, "column": column, "unexpected_count": str(count)}
            for (expectation, column), count in sorted(self.failed.items(), key=lambda kv: self.order[kv[0]])
        ]
        rules = [name for name, count in self.broken.items() if count and name in self.failing_rules]
        if failures or rules:
            failures += [{"expectation": _ROW_COUNT, "column": "(rules)", "rule": name} for name in rules]
            counts = {name: self.broken[name] for name in rules} if self.public else None
            raise ValidationFailedError(_message(self.label, failures, counts, public=self.public), failures)
        return self.broken


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
