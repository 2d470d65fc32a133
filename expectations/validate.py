"""Validate DuckDB tables with the schema suites through Great Expectations' pandas datasource, on distinct values.

Why pandas: GX's SQL datasource does not work on DuckDB (rows are lost when its connection closes,
great_expectations issue #11579). Why distinct values: what GX costs grows with the rows of the frames it checks,
and a table's columns have far fewer distinct values than rows. So DuckDB collapses the table (``GROUP BY``;
:func:`_collapsed`, the one collapsing of raw and published tables) into the validation frames of
:mod:`expectations.frame`: a *table frame* (the columns, one row: the column-set and row-count expectations), one
*column frame* per column (its distinct values as text, NULL one of them, with the number of rows of each) and one
*rule frame* per set of rule columns (their distinct combinations, with their rows). GX checks each with its part
of the suite (:mod:`expectations.engine`, in the side process when one runs, :mod:`dqrelease.runtime.side_process`),
the rows of the unexpected values are summed, and so the counts are those of the table's rows. Long lists of
distinct values (a numeric column with millions) are cut into frames of at most :data:`CELLS_PER_CHUNK` cells, so
memory stays bounded for any table size. Column frames of columns with the same checks (a wide binary table's)
are stacked into frames of up to that bound (:func:`_stacked`), so GX's fixed cost a frame does not grow with the
width; on a wide table of few rows DuckDB collapses each such set of columns in one statement too
(:data:`UNPIVOT_ROWS`). The synthetic table is validated the same way while it is written, a chunk
of decoded rows at a time (:class:`SyntheticValidation`), so it is never held whole; when its rows are copies of the
mechanism's records (bucket labels), the records are validated once with how many rows copy each
(:meth:`SyntheticValidation.send_copies`: the ``GROUP BY`` sums the copies). The counts, the failures and
their order (the suite's) do not depend on how the table is cut into chunks. On a Dask cluster the raw table is
collapsed by chunks of rows on the workers (:func:`_collapsed_by_chunk`: the same ``GROUP BY`` per chunk in an
in-memory DuckDB, and the same ``UNPIVOT`` of each stack when a chunk's rows are at most :data:`UNPIVOT_ROWS`, as
they are beyond about 4,000 columns) and the chunks' rows summed here by value before GX sees the frames. This
module does not import GX.

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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from dqrelease.errors import ValidationFailedError
from dqrelease.expectations.engine import (
    COLUMN_SET,
    Collapsed,
    Outcome,
    SuiteShape,
    SuiteSpec,
    check_chunk,
    suite_shape,
)
from dqrelease.expectations.frame import ROWS_COLUMN
from dqrelease.inputs.ingest import is_basket_table
from dqrelease.inputs.schema import Schema
from dqrelease.runtime import chunks as chunks_module
from dqrelease.runtime import side_process
from dqrelease.runtime.chunks import ChunkWorkers, chunk_rows_for, map_chunks, sum_counts, table_chunks
from dqrelease.warehouse import (
    connect,
    materialize,
    quote_column,
    render,
    row_count,
    stream_sql,
    table_columns,
)

__all__ = ["CELLS_PER_CHUNK", "SyntheticValidation", "validate_synthetic", "validate_table"]

CELLS_PER_CHUNK = 16_000_000
"""Upper bound on rows x columns of one validated pandas chunk (distinct values, or combinations of a rule's)."""

MIN_ROWS_PER_CHUNK = 1024

_ROW_COUNT = "expect_table_row_count_to_equal"  # a broken rule's failure record (no count), as it always was
_SYNTHETIC = "synthetic table"
_MESSAGE_FAILURES = 6


class _RenderedRows(Protocol):
    """A chunk of decoded rows as :class:`~dqrelease.outputs.publish.RenderedChunk` holds them."""

    @property
    def table(self) -> pa.Table:
        """The rows."""


C = TypeVar("C", pd.DataFrame, _RenderedRows)
_CHUNK_VIEW = "table_chunk"  # a chunk of rows in a worker's in-memory DuckDB

COPY_ABOVE_COLUMNS = 256
"""A chunk (published, or of the raw table on a Dask worker) wider than this is copied into DuckDB before grouping.

Each statement over a registered Arrow table binds all of its columns: 0.15 s a statement at 4,000 columns (against
0.012 s on a DuckDB table), and a chunk has one statement per column, so a wide chunk cost time in proportion to the
square of its width. The copy costs about 0.06 µs a cell, at most about 4 s for a chunk's 64M cells
(:data:`~dqrelease.runtime.chunks.CHUNK_CELLS`), which the statements' binding exceeds from about 300 columns on;
narrower chunks (KDD99's 42 columns, Adult's 15) are read in place, as before."""


UNPIVOT_ROWS = 16_384
"""A table (or published chunk) of at most this many rows collapses each stack of columns with one ``UNPIVOT``.

One ``GROUP BY`` statement per column costs about 5-15 ms on a table of thousands of columns, whatever its rows
(binding), plus about 0.05 µs a cell; ``sql/validation_stack.sql`` costs about 0.07-0.26 µs a cell and one
statement. Measured (in-process, 2 cores, one run each): 2,000 int8 columns × 5,000 rows 11.0-13.7 s by column
against 1.9-2.6 s; 300 × 50,000 1.6 s against 1.25 s; 20 × 2,000,000 1.9-2.1 s against 2.8-3.4 s. Below about
20,000 rows the statement per column always costs more; the bound is a power of two under that. Time only: the
frames are the same distinct values with the same rows (tested)."""


def validate_table(
    con: duckdb.DuckDBPyConnection, table: str, schema: Schema, *, label: str, workers: ChunkWorkers | None = None
) -> dict[str, int]:
    """Validate ``table`` against the schema suite (:func:`expectations.suite.build_suite`).

    A long basket table (columns ``row_id, item`` with an all-binary schema) is validated with the basket
    suite; any other table with the wide suite.

    With ``workers`` (a Dask cluster's) a wide table is collapsed by chunks of
    :data:`~dqrelease.runtime.chunks.READ_CHUNK_ROWS` rows on the workers (each column's and each rule column
    set's distinct values and rows, by the same SQL in an in-memory DuckDB over the chunk), the chunks' counts are
    summed here by value (:func:`~dqrelease.runtime.chunks.sum_counts`) and GX checks the summed frames as it
    checks the whole table's: the same verdict, failure records, rule counts and message. A basket table is
    collapsed here.

    Args:
        con: DuckDB connection holding ``table``.
        table: Table name (given by code).
        schema: The public schema.
        label: What the table is, for the message (e.g. ``"raw table"``).
        workers: The cluster's workers, or None to collapse the table in ``con``'s DuckDB.

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
    return _validate(con, table, spec, label=label, failing_rules=failing,
                     workers=workers if layout == "wide" else None)


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

    Each chunk (a pandas frame of the published columns) is collapsed to distinct values through DuckDB, as
    :func:`validate_synthetic` collapses a table, and sent to the side process in frames of at most
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

    def check_each(self, chunks: Iterable[C]) -> Iterator[C]:
        """Yield each chunk of ``chunks`` (frames, or rendered chunks with their ``table``) after sending it."""
        for chunk in chunks:
            self.send(chunk if isinstance(chunk, pd.DataFrame) else chunk.table)
            yield chunk

    def send(self, frame: pd.DataFrame | pa.Table) -> None:
        """Start checking the next chunk of the table (waits for earlier chunks beyond the ones in flight)."""
        self._send(frame, weight=None)

    def send_copies(self, table: pa.Table, copies: np.ndarray) -> None:
        """Start checking rows given as distinct rows and their copies: ``table``'s row ``i`` stands for ``copies[i]``.

        The same failures and counts as sending the ``copies[i]`` copies of every row (none when 0), for a
        ``GROUP BY`` over ``table``'s rows instead of over the copies: a published table whose rows copy the
        mechanism's records is checked as the records with how many rows copy each.

        Raises:
            ValueError: If ``copies`` is not one non-negative count per row of ``table``.
        """
        copies = np.asarray(copies)
        if copies.shape != (table.num_rows,) or (copies.size and copies.min() < 0):
            # no count in the message: a table of records can have n rows (randomized response)
            raise ValueError("copies must be one non-negative count per row of the table")
        kept = np.flatnonzero(copies)
        rows = table.take(pa.array(kept)).append_column(ROWS_COLUMN, pa.array(copies[kept], type=pa.int64()))
        self._send(rows, weight=ROWS_COLUMN)

    def _send(self, frame: pd.DataFrame | pa.Table, *, weight: str | None) -> None:
        with connect(None) as con:
            con.register("synthetic_chunk", frame)  # read through a view on the rows: no copy into DuckDB
            table = _groupable(con, "synthetic_chunk", width=len(frame.columns))
            if self._columns is None:
                self._columns = [name for name, _ in table_columns(con, table) if name != weight]
            collapsed = _collapsed(con, table, self._shape, self._columns, weight=weight)
            for chunk in _stacked(collapsed, self._shape):
                self._pending.append(side_process.begin(check_chunk, chunk, suite=self._shape.suite))
                while len(self._pending) > side_process.IN_FLIGHT:
                    self._tally.add(self._pending.popleft().result())

    def finish(self) -> None:
        """Wait for the chunks still being checked; raise the table's failures.

        Raises:
            ValidationFailedError: As :func:`validate_synthetic`.
        """
        while self._pending:
            self._tally.add(self._pending.popleft().result())
        if self._tally.tables == 0:  # no row was sent: the suite on an empty table of the schema's columns
            empty = _table_frame(self._shape, list(self._spec.schema.names), rows=0)
            self._tally.add(side_process.call(check_chunk, empty, suite=self._shape.suite))
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


# ---------------------------------------------------------------------- collapsing
@dataclass(frozen=True, kw_only=True)
class _Grouping:
    """One ``GROUP BY`` of the collapsing: one column's values, or the combinations of a set of rule columns.

    Attributes:
        names: The grouped columns.
        column: The column of a column frame; None for a rule frame.
        rules: The rules a rule frame checks (rules on the same columns share it).
        numbers: The grouped numeric columns, whose numbers the frame derives (:class:`Collapsed`).
    """

    names: tuple[str, ...]
    column: str | None = None
    rules: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()

    def frame(self, values: pd.DataFrame) -> Collapsed:
        """The frame of some of its distinct values (with their rows)."""
        return Collapsed(values=values, column=self.column, rules=self.rules, numbers=self.numbers)


def _groupings(shape: SuiteShape, columns: list[str]) -> list[_Grouping]:
    """Every column's grouping, then each set of rule columns' (rules on the same columns share one)."""
    groupings = [
        _Grouping(names=(name,), column=name, numbers=(name,) if name in shape.numbers else ()) for name in columns
    ]
    sharing: dict[tuple[str, ...], list[str]] = {}
    for rule, names in zip(shape.rules, shape.rule_columns, strict=True):
        sharing.setdefault(names, []).append(rule)
    for names, rules in sharing.items():
        numbers = tuple(name for name in shape.numbers if name in names and name in columns)
        groupings.append(_Grouping(names=names, rules=tuple(rules), numbers=numbers))
    return groupings


def _collapsed(
    con: duckdb.DuckDBPyConnection, table: str, shape: SuiteShape, columns: list[str], *, weight: str | None = None
) -> Iterator[Collapsed]:
    """``table`` collapsed to distinct values: its table frame, each column's frames, each rule columns' frames.

    Nothing for an empty table (:func:`_table_frame` then checks it). DuckDB computes the distinct values
    (``GROUP BY``), so what reaches pandas and GX grows with them, not with the rows; each frame has at most
    :data:`CELLS_PER_CHUNK` cells (or :data:`MIN_ROWS_PER_CHUNK` rows). Rules on the same columns share frames.
    """
    rows = row_count(con, table)
    if rows == 0:
        return
    yield _table_frame(shape, columns, rows=1)
    groupings, stacks = _plan(shape, columns, rows=rows, unpivot=weight is None)
    for grouping in groupings:
        for values in _frames(_combinations(con, table, grouping.names, weight=weight), grouping):
            yield grouping.frame(values)
    for names in stacks:
        yield from _stack_frames(_unpivoted(con, table, names), names, shape)


def _collapsed_by_chunk(
    con: duckdb.DuckDBPyConnection, table: str, shape: SuiteShape, columns: list[str], workers: ChunkWorkers
) -> Iterator[Collapsed]:
    """:func:`_collapsed`, each chunk of rows grouped on a worker and the chunks' rows summed here by value.

    Whether stacks are unpivoted follows the chunks' rows (a function of the width: every chunk but the last has
    them), so every chunk returns the same parts in the same order.
    """
    groupings, stacks = _plan(shape, columns, rows=chunk_rows_for(len(columns), most=chunks_module.READ_CHUNK_ROWS))
    partials = map_chunks(_grouped_chunk, table_chunks(con, table), workers=workers,
                          groupings=[grouping.names for grouping in groupings], stacks=stacks)
    summed: list[pa.Table | None] = [None] * (len(groupings) + len(stacks))
    for parts in partials:
        summed = [sum_counts([part] if total is None else [total, part], count=ROWS_COLUMN)
                  for total, part in zip(summed, parts, strict=True)]
    if not summed or summed[0] is None or summed[0].num_rows == 0:  # no chunk: an empty table
        return
    yield _table_frame(shape, columns, rows=1)
    for grouping, total in zip(groupings, summed[:len(groupings)], strict=True):
        yield from (grouping.frame(values) for values in _frames(total.to_batches(), grouping))
    for names, total in zip(stacks, summed[len(groupings):], strict=True):
        yield from _stack_frames(total, names, shape)


def _grouped_chunk(
    chunk: pa.RecordBatch, *, groupings: Sequence[tuple[str, ...]], stacks: Sequence[tuple[str, ...]] = ()
) -> list[pa.Table]:
    """Each grouping's distinct values and rows in one chunk of the table, in an in-memory DuckDB (on a worker).

    Then each stack's unpivoted values (:func:`_unpivoted`), in the order of ``stacks``.
    """
    with connect(None) as con:
        con.register(_CHUNK_VIEW, chunk)
        table = _groupable(con, _CHUNK_VIEW, width=chunk.num_columns)
        return [*(pa.Table.from_batches(list(_combinations(con, table, names))) for names in groupings),
                *(_unpivoted(con, table, names) for names in stacks)]


def _plan(
    shape: SuiteShape, columns: list[str], *, rows: int, unpivot: bool = True
) -> tuple[list[_Grouping], list[tuple[str, ...]]]:
    """The groupings collapsed by their own statement and the stacks collapsed by one ``UNPIVOT`` each.

    Stacks (of at least two of ``columns``) are unpivoted when ``unpivot`` and a table or chunk of ``rows`` rows is
    at most :data:`UNPIVOT_ROWS`; their columns then have no grouping of their own. (Either way gives the same
    frames: it changes time only. A table of rows with their copies is not unpivoted: ``validation_stack`` counts
    rows, not copies.)
    """
    present = set(columns)
    stacks = [names for names in (tuple(n for n in stack if n in present) for stack in shape.stacks)
              if len(names) > 1] if unpivot and rows <= UNPIVOT_ROWS else []
    unpivoted = {name for names in stacks for name in names}
    return [g for g in _groupings(shape, columns) if g.column not in unpivoted], stacks


def _groupable(con: duckdb.DuckDBPyConnection, view: str, *, width: int) -> str:
    """The table to group the registered Arrow ``view``'s frames from: itself, or a DuckDB copy when it is wide.

    See :data:`COPY_ABOVE_COLUMNS`; the copy is a temporary table of ``con`` (gone with the connection).
    """
    if width <= COPY_ABOVE_COLUMNS:
        return view
    materialize(con, "table_copy", f"{view}_copy", tables={"table": view}, temporary=True)
    return f"{view}_copy"


def _combinations(
    con: duckdb.DuckDBPyConnection, table: str, names: tuple[str, ...], *, weight: str | None = None
) -> Iterator[pa.RecordBatch]:
    """The distinct combinations of the columns ``names`` as text, the last column (:data:`ROWS_COLUMN`) their rows.

    With ``weight`` (a column of ``table`` holding each row's number of copies) the rows are the sum of the copies.
    """
    params = {"columns": list(names)}
    sql = render("validation_combinations", {"table": table})
    if weight is not None:
        if _COUNTED_ROWS not in sql:
            raise ValueError(f"sql/validation_combinations.sql has no {_COUNTED_ROWS!r} to weigh")
        sql = sql.replace(_COUNTED_ROWS, f"sum({quote_column(weight)})::bigint")
    for batch in stream_sql(con, sql, params=params):
        yield batch.rename_columns([*batch.schema.names[:-1], ROWS_COLUMN])


_COUNTED_ROWS = "count(*) /* rows */"
"""The count of rows in ``sql/validation_combinations.sql`` that a table of rows with their copies replaces by the
sum of its copies (:meth:`SyntheticValidation.send_copies`)."""


def _unpivoted(con: duckdb.DuckDBPyConnection, table: str, names: tuple[str, ...]) -> pa.Table:
    """The distinct values of each of the stack's columns ``names``: ``column, value,`` and their rows (last)."""
    sql = render("validation_stack", {"table": table}).replace(
        "/* columns */", ", ".join(quote_column(name) for name in names))
    counted = con.sql(sql, params={"columns": list(names)}).to_arrow_table()
    return counted.rename_columns(["column", "value", ROWS_COLUMN])


def _stack_frames(counted: pa.Table, names: tuple[str, ...], shape: SuiteShape) -> Iterator[Collapsed]:
    """A stack's column frames, stacked (:attr:`Collapsed.members`), from its unpivoted values (:func:`_unpivoted`).

    Frames are cut between members at :data:`CELLS_PER_CHUNK` cells; the values are under the first member's name.
    """
    numbers = (names[0],) if names[0] in shape.numbers else ()
    counted = counted.to_pandas()
    order = pd.Categorical(counted["column"], categories=list(names))
    counted = counted.assign(member=order.codes).sort_values("member", kind="stable")
    sizes = counted["member"].value_counts(sort=False).reindex(range(len(names)), fill_value=0).to_numpy()
    values = pd.DataFrame({names[0]: counted["value"].to_numpy(), ROWS_COLUMN: counted[ROWS_COLUMN].to_numpy()})
    limit = max(MIN_ROWS_PER_CHUNK, CELLS_PER_CHUNK // (2 + len(numbers)))

    def frame(start: int, held: int, members: list[tuple[str, int]]) -> Collapsed:
        return Collapsed(values=values.iloc[start:start + held].reset_index(drop=True), column=names[0],
                         numbers=numbers, members=tuple(members))

    start, held, members = 0, 0, []
    for name, size in zip(names, sizes.tolist(), strict=True):
        if members and held + size > limit:
            yield frame(start, held, members)
            start, held, members = start + held, 0, []
        members.append((name, size))
        held += size
    yield frame(start, held, members)


def _frames(batches: Iterable[pa.RecordBatch], grouping: _Grouping) -> Iterator[pd.DataFrame]:
    """The batches regrouped into frames of at most the cells bound (the frame's derived number columns counted)."""
    size = max(MIN_ROWS_PER_CHUNK, CELLS_PER_CHUNK // (len(grouping.names) + len(grouping.numbers) + 1))
    held: list[pa.RecordBatch] = []  # DuckDB's batches may be small: regrouped into frames of ``size`` rows
    count = 0
    for batch in batches:
        held.append(batch)
        count += batch.num_rows
        while count >= size:
            joined = pa.Table.from_batches(held)
            yield joined.slice(0, size).to_pandas()
            held, count = joined.slice(size).to_batches(), count - size
    if count:
        yield pa.Table.from_batches(held).to_pandas()


def _stacked(frames: Iterable[Collapsed], shape: SuiteShape) -> Iterator[Collapsed]:
    """The frames, with the column frames of each of :attr:`SuiteShape.stacks` stacked into frames of its members.

    Other frames pass at once; stackable column frames are held until the held frames reach
    :data:`CELLS_PER_CHUNK` cells (then every held set is sent) or the frames end.
    """
    stack_of = {name: index for index, names in enumerate(shape.stacks) for name in names}
    held: dict[int, list[Collapsed]] = {}
    cells = 0
    for frame in frames:
        stackable = frame.column is not None and not frame.rules and not frame.members  # (already stacked)
        index = stack_of.get(frame.column) if stackable else None
        if index is None:
            yield frame
            continue
        held.setdefault(index, []).append(frame)
        cells += frame.values.size
        if cells >= CELLS_PER_CHUNK:
            yield from (_stack(group) for group in held.values())
            held, cells = {}, 0
    yield from (_stack(group) for group in held.values())


def _stack(frames: list[Collapsed]) -> Collapsed:
    """Column frames of one stack as one frame under the first one's column (:attr:`Collapsed.members`)."""
    if len(frames) == 1:
        return frames[0]
    first = frames[0]
    values = pd.concat([frame.values.rename(columns={frame.column: first.column}) for frame in frames],
                       ignore_index=True)
    members = tuple((frame.column, len(frame.values)) for frame in frames)
    return Collapsed(values=values, column=first.column, numbers=first.numbers, members=members)


def _table_frame(shape: SuiteShape, columns: list[str], *, rows: int) -> Collapsed:
    """The table frame: every column, ``rows`` (0 or 1) rows of NULLs: what the table expectations look at."""
    frame = pd.DataFrame({name: pd.Series([None] * rows, dtype=object) for name in columns})
    return Collapsed(values=frame, numbers=tuple(name for name in shape.numbers if name in columns))


def _validate(
    con: duckdb.DuckDBPyConnection,
    table: str,
    spec: SuiteSpec,
    *,
    label: str,
    failing_rules: set[str] | None = None,
    public: bool = False,
    workers: ChunkWorkers | None = None,
) -> dict[str, int]:
    """Validate frame by frame; return the rows breaking each rule; raise on failures and broken failing rules.

    ``public`` (the synthetic table only) lets the message show how many rows break a rule; ``workers``: collapse
    the table by chunks on them (:func:`_collapsed_by_chunk`).
    """
    columns = [name for name, _ in table_columns(con, table)]
    shape = side_process.call(suite_shape, spec)
    tally = _Tally(shape, label=label, failing_rules=failing_rules or set(), public=public)
    collapsed = _stacked(_collapsed(con, table, shape, columns) if workers is None
                         else _collapsed_by_chunk(con, table, shape, columns, workers), shape)
    for outcomes in side_process.call_each(check_chunk, collapsed, suite=shape.suite):
        tally.add(outcomes)
    if tally.tables == 0:  # an empty table
        tally.add(side_process.call(check_chunk, _table_frame(shape, columns, rows=0), suite=shape.suite))
    return tally.result()


class _Tally:
    """A suite's outcomes summed over the frames of one table, and the table's verdict.

    Failures are listed in the suite's order, so the message does not depend on which frame failed first.
    """

    def __init__(self, shape: SuiteShape, *, label: str, failing_rules: set[str], public: bool) -> None:
        self.label, self.failing_rules, self.public = label, failing_rules, public
        self.tables = 0  # table frames counted (one per non-empty chunk of rows)
        self.failed: dict[tuple[str, str], int] = {}
        self.broken = dict.fromkeys(shape.rules, 0)
        self.order = {key: position for position, key in reversed(list(enumerate(shape.order)))}

    def add(self, outcomes: list[Outcome]) -> None:
        """Count one frame's outcomes (the first table frame's column check raises at once)."""
        if any(outcome.expectation == COLUMN_SET for outcome in outcomes):  # a table frame
            if self.tables == 0:
                _raise_on_column_mismatch(outcomes, self.label)
            self.tables += 1
        _count(outcomes, self.failed, self.broken)

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
