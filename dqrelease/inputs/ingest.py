"""Load the private source into the working DuckDB database as the raw table.

Two layouts of the raw table:

* **wide** (formats ``csv``, ``parquet``, ``duckdb``): one row per record and one ``VARCHAR`` column per
  *declared* schema column. Every value is trimmed (spaces, tabs, CR, LF), and blank cells and the
  configured ``null_strings`` become NULL. Source columns the schema does not declare are not loaded.
* **baskets** (format ``transactions``): the long table ``(row_id BIGINT, item VARCHAR)``, one row per item
  of a basket. A basket is a non-blank line of the files, its items separated by whitespace; baskets are
  numbered ``0 .. n-1`` and an item repeated within a basket counts once. The schema declares the item
  universe: one ``binary`` column per item id (the column name *is* the item id). Items outside it fail
  validation (:mod:`expectations.validate`).

A wide source of more than :data:`WIDE_INGEST_COLUMNS` declared columns is written on one thread in row groups of
:data:`WIDE_ROW_GROUP_ROWS` rows (:func:`ingest_database`): DuckDB holds each row group being written in memory, a
string per cell, and its parallel writer several per thread, so that 10,000 binary columns of 100,000 rows peaked at
11.3 GiB in 186 s with DuckDB's defaults and peak at 3.5 GiB in 123 s this way (docs/decisions.md, "A wide table is
ingested on one thread in small row groups"). The memory forecast counts this stage
(:func:`dqrelease.memory_estimate.ingest_bytes`).

Invariants: no value of the source ever appears in an error message (DuckDB read errors quote the
offending line, so they are replaced by a message naming only the files' format options); the raw table
is replaced, never appended to.
"""

from __future__ import annotations

import csv
import glob
import gzip
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from dqrelease.errors import ConfigInvalidError, ValidationFailedError
from dqrelease.inputs.columns import BinaryColumn
from dqrelease.inputs.config import SourceConfig
from dqrelease.inputs.schema import Schema
from dqrelease.runtime.pause_points import pause_point
from dqrelease.warehouse import materialize, private_database, query_rows, row_count, run_script, table_columns

__all__ = [
    "BASKET_COLUMNS", "WIDE_INGEST_COLUMNS", "WIDE_ROW_GROUP_ROWS", "check_source_files", "ingest_database",
    "ingest_source", "is_basket_table", "is_wide_ingest", "source_header",
]

WIDE_INGEST_COLUMNS = 256
"""Declared columns above which a source is ingested on one thread in row groups of :data:`WIDE_ROW_GROUP_ROWS` rows.
Measured (``bench/wide_ingest.py``, generated binary columns read from Parquet, medians of 3; peaks above the
imports): at 100 columns and 2 million rows DuckDB's parallel default is the faster (10.0 s against 13.3 s; 0.38
against 0.17 GiB); at 1,000 columns and 100,000 rows one thread is faster and smaller (8.3 s and 0.66 GiB against
12.4 s and 1.07 GiB), at 3,000 columns 28.0 s and 1.86 GiB against 45.9 s and 3.14 GiB, at 10,000 columns 123 s and
2.67 GiB against 186 s and 10.4 GiB. The boundary lies between 100 and 1,000 columns; at 256 columns DuckDB's default
holds about a row group of text per thread (2 x 122,880 x 256 x 16 bytes: 0.94 GiB)."""

WIDE_ROW_GROUP_ROWS = 32_768
"""Rows per row group of a wide source's raw table (DuckDB's default is 122,880). Tried at 10,000 columns on one
thread (exploratory, one run each, not kept in bench/results): 2,048, 8,192 and 32,768 rows all peaked at 3.2 to
3.8 GiB (each column's segment holds at least a 256 KiB block), DuckDB's default row group at 10.8 GiB (it holds the
whole row group being written); the largest of the three keeps the most rows per group for the scans after."""

BASKET_COLUMNS = ("row_id", "item")
"""Columns of the long basket table written for ``format = "transactions"``."""

_SOURCE_VIEW = "source_rows"
_SOURCE_DATABASE = "dqrelease_source"


def ingest_source(con: duckdb.DuckDBPyConnection, source: SourceConfig, schema: Schema, *, table: str = "raw") -> int:
    """Load the source described by ``source`` into ``table`` (replacing it) and return its record count.

    Args:
        con: Working DuckDB connection.
        source: The release config's ``[source]`` section (paths already resolved).
        schema: The public schema; only its declared columns are loaded.
        table: Name of the raw table (a plain identifier chosen by the caller's code).

    Returns:
        Number of records: rows of the wide table, or baskets for ``format = "transactions"``.

    Raises:
        ConfigInvalidError: A source file is missing, or a transactions source has a non-binary schema.
        ValidationFailedError: Declared columns are missing from the source, or the files cannot be read
            with the configured options (the message never quotes the data).
    """
    check_source_files(source)
    if source.format != "duckdb":
        _check_not_empty(source)
    run_script(con, "macros")
    try:
        if source.format == "transactions":
            records = _ingest_baskets(con, source, schema, table)
        else:
            records = _ingest_wide(con, source, schema, table)
    finally:
        run_script(con, "source_cleanup")
    pause_point("ingest")  # test-only (dqrelease.runtime.pause_points); inert unless DQRELEASE_TEST_PAUSE_AT=ingest
    return records


def is_wide_ingest(source_format: str, columns: int) -> bool:
    """Whether a source is ingested as a wide one: a table, not baskets, of many columns.

    Wide means more than :data:`WIDE_INGEST_COLUMNS` declared columns.
    """
    return source_format != "transactions" and columns > WIDE_INGEST_COLUMNS


@contextmanager
def ingest_database(path: Path, source: SourceConfig, schema: Schema) -> Iterator[duckdb.DuckDBPyConnection]:
    """The working database's connection that :func:`ingest_source` loads ``source`` with.

    A wide source (:func:`is_wide_ingest`) gets one thread and row groups of :data:`WIDE_ROW_GROUP_ROWS` rows; any
    other the defaults of :func:`dqrelease.warehouse.private_database`. The raw table's rows do not depend on it.
    """
    wide = is_wide_ingest(source.format, len(schema.names))
    layout = {"row_group_rows": WIDE_ROW_GROUP_ROWS, "threads": 1} if wide else {}
    with private_database(path, **layout) as con:
        yield con


def is_basket_table(columns: list[str], schema: Schema) -> bool:
    """Whether a table with these column names is a long basket table for ``schema``.

    True when every schema column is binary, the table has exactly the columns ``row_id, item`` and the
    schema declares neither name as an item.
    """
    return (
        all(isinstance(c, BinaryColumn) for c in schema.columns)
        and list(columns) == list(BASKET_COLUMNS)
        and not set(BASKET_COLUMNS) & set(schema.names)
    )


# ---------------------------------------------------------------------- formats
def _ingest_wide(con: duckdb.DuckDBPyConnection, source: SourceConfig, schema: Schema, table: str) -> int:
    _check_unique_header(source, schema)
    _read_source(con, f"source_{source.format}", _source_variables(source), source)
    present = {name for name, _ in table_columns(con, _SOURCE_VIEW)}
    missing = [name for name in schema.names if name not in present]
    if missing:
        hint = _delimiter_hint(source, schema, present)
        raise ValidationFailedError(
            hint or f"the source has no column {_names(missing)} declared in the schema; fix the schema's column "
            "names or the source (header / column_names)",
            [
                {"expectation": "expect_table_columns_to_match_set", "column": name, "unexpected_count": "1"}
                for name in missing
            ],
        )
    params = {"columns": schema.names, "null_strings": ["", *source.null_strings]}
    _guard_read(lambda: materialize(con, "raw_table", table, params=params), source)
    return row_count(con, table)


OTHER_DELIMITERS = {";": "';'", "\t": "tabs", "|": "'|'", ",": "','"}
"""Delimiters CSV files commonly use, and how a message names them."""


def _delimiter_hint(source: SourceConfig, schema: Schema, present: set[str]) -> str | None:
    """Why no schema column was found when a CSV header was read as one column: a likely wrong ``delimiter``.

    The one column's name is the whole header line. When splitting it at another common delimiter yields names the
    schema declares, that delimiter is likely the file's. The message names only schema columns and the delimiter
    (the header is compared with the schema, never quoted).
    """
    if source.format != "csv" or len(present) != 1:
        return None
    (header,) = present
    declared = set(schema.names)
    for delimiter, written in OTHER_DELIMITERS.items():
        if delimiter == source.delimiter or delimiter not in header:
            continue
        found = [name for name in header.split(delimiter) if name.strip() in declared]
        if found:
            shown = _names([name.strip() for name in found[:3]])
            return (
                f"the source's header was read as a single column although it holds the schema's columns {shown} "
                f"separated by {written}: the delimiter is likely wrong; set source.delimiter = "
                f"{json.dumps(delimiter)} in the config (it is {json.dumps(source.delimiter)})"
            )
    return None


def _ingest_baskets(con: duckdb.DuckDBPyConnection, source: SourceConfig, schema: Schema, table: str) -> int:
    not_binary = [c.name for c in schema.columns if not isinstance(c, BinaryColumn)]
    if not_binary:
        raise ConfigInvalidError(
            f"source format 'transactions' needs a schema of binary columns (one per item id); "
            f"column {_names(not_binary)} is not type = 'binary'"
        )
    clash = sorted(set(BASKET_COLUMNS) & set(schema.names))
    if clash:
        raise ConfigInvalidError(
            f"item ids {clash} are reserved for the basket table's columns; rename those items in the source"
        )
    _read_source(con, "source_transactions", _source_variables(source), source)
    _guard_read(lambda: materialize(con, "raw_baskets", table), source)
    return int(query_rows(con, "basket_count", {"table": table})[0][0])


def _source_variables(source: SourceConfig) -> dict[str, Any]:
    paths = [str(p) for p in source.paths]
    compression = "gzip" if source.gzip else "auto"
    if source.format == "csv":
        return {
            "source_paths": paths,
            "source_header": source.header,
            "source_names": list(source.column_names or []),
            "source_delimiter": source.delimiter,
            "source_comment": source.comment or "",
            "source_compression": compression,
        }
    if source.format == "parquet":
        return {"source_paths": paths}
    if source.format == "duckdb":
        return {
            "source_database": str(source.database),
            "source_relation": f"{_SOURCE_DATABASE}.{source.table}",
        }
    return {"source_paths": paths, "source_comment": source.comment or "", "source_compression": compression}


# ---------------------------------------------------------------------- checks
def check_source_files(source: SourceConfig) -> None:
    """Refuse a source file, glob or database that names nothing readable (before anything is read).

    The CLI calls it before a run starts, so a wrong path is refused without starting Prefect.
    """
    if source.format == "duckdb":
        if not Path(source.database).is_file():
            raise ConfigInvalidError(
                f"source database {source.database} does not exist; fix source.database in the release config "
                "(relative paths are resolved against the config file's directory)"
            )
        return
    for path in source.paths:
        text = str(path)
        if Path(text).is_dir():
            raise ConfigInvalidError(
                f"source path {path} is a directory, not a file; list its files in source.paths "
                "(a glob such as 'folder/*.csv' works)"
            )
        found = glob.glob(text) if glob.has_magic(text) else ([text] if Path(text).is_file() else [])
        if not found:
            what = f"source file {path} does not exist"
            if glob.has_magic(text):
                what = f"no file matches source path {path}"
            raise ConfigInvalidError(
                f"{what}; fix source.paths in the release config "
                "(relative paths are resolved against the config file's directory)"
            )


def _check_not_empty(source: SourceConfig) -> None:
    """Refuse a source file of 0 bytes by name (DuckDB would report it as a file without the schema's columns)."""
    for path in source.paths:
        text = str(path)
        for name in sorted(glob.glob(text)) if glob.has_magic(text) else [text]:
            if Path(name).stat().st_size == 0:
                raise ValidationFailedError(
                    f"source file {Path(name).name} is empty (0 bytes); export the table again or remove the file "
                    "from source.paths",
                    [{"expectation": "source_is_readable", "column": "(table)", "unexpected_count": "1"}],
                )


def _check_unique_header(source: SourceConfig, schema: Schema) -> None:
    """Refuse CSV files whose header names a declared column twice (DuckDB would rename one and read the other).

    Only plain and gzip files are checked (other compressions are left to DuckDB); a header that cannot be
    decoded is left to the read, which refuses it with its own message.
    """
    if source.format != "csv" or not source.header:
        return
    declared = set(schema.names)
    for pattern in source.paths:
        text = str(pattern)
        for name in sorted(glob.glob(text)) if glob.has_magic(text) else [text]:
            fields = _header_fields(Path(name), source)
            repeated = sorted({f for f in fields if f in declared and fields.count(f) > 1})
            if repeated:
                raise ValidationFailedError(
                    f"the header of source file {Path(name).name} names column {_names(repeated)} more than once; "
                    "rename or remove the duplicate column in the file",
                    [{"expectation": "unique_column_names", "column": c, "unexpected_count": "1"} for c in repeated],
                )


def _header_fields(path: Path, source: SourceConfig) -> list[str]:
    """The trimmed fields of the first non-comment line of a CSV file (empty if it cannot be read as text)."""
    try:
        return _csv_header(path, source)
    except _HEADER_ERRORS:
        return []


_HEADER_ERRORS = (OSError, UnicodeDecodeError, EOFError, csv.Error)
"""What reading a CSV header line can raise (a file that is not gzip, not UTF-8, or not CSV)."""


def _csv_header(path: Path, source: SourceConfig) -> list[str]:
    """The trimmed fields of the first non-comment line of a CSV file: the only line read.

    Raises:
        OSError, UnicodeDecodeError, EOFError, csv.Error: The line cannot be read (:data:`_HEADER_ERRORS`).
    """
    gzipped = source.gzip or path.suffix == ".gz"
    with (gzip.open(path, "rt", encoding="utf-8-sig", newline="") if gzipped
          else open(path, encoding="utf-8-sig", newline="")) as handle:
        lines = (line for line in handle if not (source.comment and line.startswith(source.comment)))
        first = next(csv.reader(lines, delimiter=source.delimiter), [])
    return [field.strip(" \t\r\n") for field in first]


def source_header(source: SourceConfig) -> list[tuple[str, str | None]]:
    """The source's column names, from its header only, each with its stored type where the format declares one.

    What is read: the configured ``column_names`` (no file at all); else the header line of every CSV file (the
    files' names in first-seen order, as ingestion matches them by name); the Parquet files' schemas (their footers);
    a DuckDB table's catalog entry. No data row is read, so no value of the data can reach the result.

    Returns:
        ``(name, stored type)`` in source order; the type is None for CSV (text) and given names.

    Raises:
        ConfigInvalidError: A transactions source (it has no header), a header-less CSV without ``column_names``,
            a missing file or table, or a header that cannot be read (the message never quotes the file).
    """
    if source.format == "transactions":
        raise ConfigInvalidError(
            "source format 'transactions' has no header: declare one binary column per item id of the public item "
            "universe (docs/schema.md, 'type = \"binary\"')"
        )
    if source.column_names:
        return [(name, None) for name in source.column_names]
    if source.format == "csv" and not source.header:
        raise ConfigInvalidError(
            "source.header = false and no source.column_names: the files' first line is data, not names; give "
            "source.column_names from the table's documentation"
        )
    check_source_files(source)
    if source.format == "csv":
        names: dict[str, None] = {}
        for pattern in source.paths:
            text = str(pattern)
            for name in sorted(glob.glob(text)) if glob.has_magic(text) else [text]:
                try:
                    names.update(dict.fromkeys(_checked_header(Path(name), source)))
                except _HEADER_ERRORS as error:
                    raise ConfigInvalidError(
                        f"the header line of source file {Path(name).name} could not be read ({type(error).__name__}); "
                        "check source.delimiter, source.comment and source.gzip, and that the file is UTF-8 text"
                    ) from None
        return [(name, None) for name in names]
    con = duckdb.connect()
    try:
        _read_source(con, f"source_{source.format}", _source_variables(source), source)
        return [(name, kind) for name, kind in table_columns(con, _SOURCE_VIEW)]
    finally:
        run_script(con, "source_cleanup")
        con.close()


def _checked_header(path: Path, source: SourceConfig) -> list[str]:
    """A CSV file's header fields; refused when a name is blank or repeated (ingestion could not match it)."""
    fields = _csv_header(path, source)
    if not fields:
        raise ConfigInvalidError(
            f"source file {path.name} has no header line (it is empty, or every line is a comment); export the "
            "table again or remove the file from source.paths"
        )
    if any(not field for field in fields):
        raise ConfigInvalidError(
            f"the header of source file {path.name} has a blank column name; name every column in the file's header "
            "or give source.column_names"
        )
    repeated = sorted({field for field in fields if fields.count(field) > 1})
    if repeated:
        raise ConfigInvalidError(
            f"the header of source file {path.name} names column {_names(repeated)} more than once; rename the "
            "duplicate column in the file or give source.column_names"
        )
    return fields


def _read_source(con: duckdb.DuckDBPyConnection, model: str, variables: dict[str, Any], source: SourceConfig) -> None:
    _guard_read(lambda: run_script(con, model, variables=variables), source)


def _guard_read(action: Callable[[], None], source: SourceConfig) -> None:
    """Run ``action``; replace a DuckDB read error (which may quote a line of the data) by a safe message."""
    try:
        action()
    except duckdb.CatalogException:
        if source.format != "duckdb":
            raise
        raise ConfigInvalidError(
            f"source table {source.table!r} was not found in {source.database}; fix source.table"
        ) from None
    except duckdb.OutOfMemoryException:
        raise ConfigInvalidError(
            "the source could not be ingested: DuckDB ran out of memory writing the raw table (a wide table holds "
            "about 256 KiB a column, see `dqrelease plan`'s memory line); free memory on this machine, or release "
            "fewer columns at a time"
        ) from None
    except duckdb.Error as error:
        raise ValidationFailedError(
            f"the source files could not be read as {source.format} ({type(error).__name__}); "
            f"{_READ_FIXES[source.format]}",
            [{"expectation": "source_is_readable", "column": "(table)", "unexpected_count": "1"}],
        ) from None


_READ_FIXES = {
    "csv": "check the format options in [source] (header, column_names, delimiter, comment, gzip), that the files "
    "are UTF-8 and that every row has the header's number of fields",
    "parquet": "check that every file is a complete Parquet file (export it again if it was cut short)",
    "duckdb": "check that source.database is a DuckDB database file that this DuckDB version can open",
    "transactions": "check the format options in [source] (comment, gzip) and that the files are UTF-8 text",
}
"""What to check when DuckDB cannot read the source, by format (the error itself may quote data: never shown)."""


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)
