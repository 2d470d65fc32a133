"""DuckDB connection helpers: open a connection, run the SQL models of ``sql/``, stream results.

Invariants:

* SQL text comes only from the ``sql`` package (:func:`sql.load_sql`). Values reach it as bound ``$name``
  parameters (single-statement models) or as session variables read with ``getvariable`` (scripts of
  several statements: DuckDB binds parameters to the last statement of a script only).
* The only identifiers ever placed into SQL text are table names given by code (``raw``, ``synthetic``):
  a model names them ``{{ raw_table }}`` and :func:`render` substitutes them after checking them against a
  plain-identifier pattern and double-quoting them (:func:`quote_identifier`). Models that only read a
  table take its name as a bound parameter (``query_table($table)``) instead; a placeholder is used where
  the base table itself is needed (its ``rowid``).
* Results are read completely before the next statement runs: a half-read DuckDB result blocks its
  connection. Streams (:func:`stream_batches`) must be consumed or closed before the connection is reused.
* One connection per thread; a connection is not shared across threads.
* A database file that holds private data (the run's working database) is opened with :func:`private_database`:
  the file, its write-ahead log and its spill folder are created owner-only (0600 / 0700).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dqrelease.sql import load_sql

__all__ = [
    "connect",
    "drop_table",
    "materialize",
    "private_database",
    "query_rows",
    "quote_identifier",
    "render",
    "row_count",
    "run_script",
    "set_variables",
    "stream_batches",
    "stream_sql",
    "table_columns",
]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


def connect(path: Path | None, *, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB connection with the progress bar disabled.

    Args:
        path: Database file (created if missing), or ``None`` for an in-memory database.
        threads: DuckDB's worker threads; ``None`` keeps its default (one per core).

    Returns:
        The connection; use it as a context manager or close it.
    """
    config = {} if threads is None else {"threads": threads}
    con = duckdb.connect(":memory:" if path is None else str(path), config=config)
    con.execute("set enable_progress_bar = false")
    return con


PRIVATE_UMASK = 0o077
"""The umask while a private database is open: DuckDB's files (0666 minus the umask) become 0600."""

_umask_guard = threading.Lock()
_umask_state: dict[str, int] = {"open": 0, "previous": 0}  # private connections open; the umask before the first


@contextmanager
def _private_umask() -> Iterator[None]:
    """Hold the process's umask at :data:`PRIVATE_UMASK` while at least one private database is open.

    DuckDB creates the database file, its write-ahead log (created and removed as the connection writes and
    checkpoints) and its spill folder itself, with no mode of its own: the umask is the one way to have them
    created owner-only. The umask is per process; a file another thread creates meanwhile is only more
    restricted, and the previous umask is back once the last private connection closes.
    """
    with _umask_guard:
        if _umask_state["open"] == 0:
            _umask_state["previous"] = os.umask(PRIVATE_UMASK)
        _umask_state["open"] += 1
    try:
        yield
    finally:
        with _umask_guard:
            _umask_state["open"] -= 1
            if _umask_state["open"] == 0:
                os.umask(_umask_state["previous"])


@contextmanager
def private_database(
    path: Path, *, row_group_rows: int | None = None, threads: int | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection (see :func:`connect`) to a database file of private data, closed on exit.

    The file and everything DuckDB creates beside it while the connection is open are created 0600 (folders 0700),
    never chmod-ed after (:func:`_private_umask`).

    Args:
        path: The database file (created if missing).
        row_group_rows: Rows per row group of the tables this connection writes (DuckDB's ``ROW_GROUP_SIZE``, a
            multiple of 2,048); ``None`` keeps DuckDB's default (122,880). DuckDB holds a row group being written
            in memory, so a wide table is written in smaller ones (:func:`dqrelease.inputs.ingest.ingest_database`).
            The file is then attached (``sql/attach_working.sql``) to an in-memory connection, whose spill folder is
            set to the one DuckDB uses beside the file.
        threads: DuckDB's worker threads (:func:`connect`).
    """
    with _private_umask():
        if row_group_rows is None:
            with connect(path, threads=threads) as con:
                yield con
            return
        with connect(None, threads=threads) as con:
            run_script(con, "attach_working", variables={
                "working_path": str(path), "spill_folder": f"{path}.tmp", "row_group_rows": row_group_rows})
            yield con


def quote_identifier(name: str) -> str:
    """Double-quote a table or variable name given by code.

    Raises:
        ValueError: If ``name`` is not a plain identifier (letters, digits, underscore; not starting with a
            digit). Names from data or from user files never reach this function.
    """
    if not _IDENTIFIER.match(name):
        raise ValueError(f"{name!r} is not a plain identifier (letters, digits, underscore)")
    return f'"{name}"'


def render(model: str, tables: Mapping[str, str] | None = None) -> str:
    """Text of ``sql/<model>.sql`` with each ``{{ name }}`` replaced by the quoted table ``tables[name]``.

    Raises:
        ValueError: A placeholder has no table, or a table name is not a plain identifier.
    """
    tables = tables or {}

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) not in tables:
            raise ValueError(f"SQL model {model!r} needs a table for {{{{ {match.group(1)} }}}}")
        return quote_identifier(tables[match.group(1)])

    return _PLACEHOLDER.sub(substitute, load_sql(model))


def set_variables(con: duckdb.DuckDBPyConnection, values: Mapping[str, Any]) -> None:
    """Set DuckDB session variables (read in SQL with ``getvariable('name')``), each value bound."""
    for name, value in values.items():
        quote_identifier(name)
        con.execute(f"set variable {name} = $value", {"value": value})  # name checked above


def run_script(
    con: duckdb.DuckDBPyConnection, model: str, *, variables: Mapping[str, Any] | None = None
) -> None:
    """Set ``variables`` and run the statements of ``sql/<model>.sql`` (no result is returned)."""
    if variables:
        set_variables(con, variables)
    con.execute(load_sql(model))


def materialize(
    con: duckdb.DuckDBPyConnection,
    model: str,
    table: str,
    *,
    params: Mapping[str, Any] | None = None,
    tables: Mapping[str, str] | None = None,
    temporary: bool = False,
) -> None:
    """Create (or replace) ``table`` as the result of the single-statement model ``sql/<model>.sql``."""
    kind = "temp table" if temporary else "table"
    con.execute(f"create or replace {kind} {quote_identifier(table)} as\n{render(model, tables)}", params or {})


def drop_table(con: duckdb.DuckDBPyConnection, table: str, *, temporary: bool = False) -> None:
    """Drop ``table`` if it exists (``temporary``: the connection's temporary table of that name)."""
    qualified = f"temp.{quote_identifier(table)}" if temporary else quote_identifier(table)
    con.execute(f"drop table if exists {qualified}")


def query_rows(
    con: duckdb.DuckDBPyConnection,
    model: str,
    params: Mapping[str, Any] | None = None,
    *,
    tables: Mapping[str, str] | None = None,
) -> list[tuple[Any, ...]]:
    """Run the single-statement model ``sql/<model>.sql`` and return all its rows."""
    return con.execute(render(model, tables), params or {}).fetchall()


def stream_batches(
    con: duckdb.DuckDBPyConnection,
    model: str,
    *,
    params: Mapping[str, Any] | None = None,
    tables: Mapping[str, str] | None = None,
    batch_size: int = 1 << 17,
) -> Iterator[pa.RecordBatch]:
    """Yield the result of ``sql/<model>.sql`` as Arrow record batches of at most ``batch_size`` rows.

    The connection is busy until the iterator is exhausted or closed.
    """
    yield from stream_sql(con, render(model, tables), params=params, batch_size=batch_size)


def stream_sql(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    params: Mapping[str, Any] | None = None,
    batch_size: int = 1 << 17,
) -> Iterator[pa.RecordBatch]:
    """:func:`stream_batches` of a statement's text (a model rendered by :func:`render`, then adapted by the caller)."""
    relation = con.sql(sql, params=dict(params or {}))
    reader = relation.to_arrow_reader(batch_size)
    try:
        yield from reader
    finally:
        reader.close()


def quote_column(name: str) -> str:
    """A schema's column name (any text, from a user file) as a SQL identifier, safe for any text.

    In double quotes, each double quote in it doubled (the SQL standard's escape), so no text can end the identifier.

    For wide tables, where a name must be bound in each of thousands of select items: DuckDB binds
    ``columns(lambda c: c = $name)`` against every column of the table, which made one statement over 10,000
    columns quadratic (about 13 s at 1,000 columns and 41 s at 2,000 against 1.1 and 2.5 quoted).
    """
    return '"' + name.replace('"', '""') + '"'


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """``(name, type)`` of every column of ``table``, in order."""
    return [(str(name), str(kind)) for name, kind in query_rows(con, "table_columns", {"table": table})]


def row_count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Number of rows of ``table``."""
    return int(query_rows(con, "table_row_count", {"table": table})[0][0])
