r"""The published CSV text (``synthetic.csv``, and the DuckDB table's content hash): DuckDB's ``COPY`` of Arrow tables.

The text is RFC 4180 CSV in UTF-8: a header line of the column names, one line per row, every line ended by ``\n``;
fields separated by ``,``; a field quoted with ``"`` (a quote inside doubled) only when it holds a comma, a quote, a
line feed or a carriage return; NULL and the empty text both an empty field, except that a row of a one-column
table whose field is empty is written ``""`` (not a blank line); integers in decimal; floats (``float64`` only) as
Python's ``repr`` writes them, the shortest text that reads back to the same number (``0.1``, ``1e-07``,
``1e+20``, ``-0.0``, ``17.0``). These are the bytes pandas' ``to_csv(index=False, lineterminator="\n")`` writes for
the published columns (text, ``int8``, ``Int64``, ``Float64``; :mod:`dqrelease.outputs.decode`) on a Python whose
``csv`` module quotes a lone carriage return (3.11.9, 3.12.3 and later); the SQL is ``sql/published_csv.sql``.

Chunks: every value is formatted on its own, so the texts of consecutive chunks, the first with the header, are
together the text of the whole table. DuckDB writes a chunk's text to a scratch file, read back and removed at once.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import TracebackType

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dqrelease.sql import load_sql

__all__ = ["CsvText", "canonical_csv"]


class CsvText:
    """Render tables as the published CSV text, one chunk after the other (see the module docstring).

    Use as a context manager, or :meth:`close` when done; one instance per thread.
    """

    def __init__(self, scratch: Path) -> None:
        """Open an in-memory DuckDB connection that writes each chunk's text to ``scratch``.

        The rows keep their order (``preserve_insertion_order``, DuckDB's default, set here because the text
        depends on it); anything DuckDB spills to disk goes beside ``scratch`` and is removed when it is closed.

        Args:
            scratch: A file path of the caller's (its folder must exist), overwritten and removed by every
                :meth:`render`.
        """
        self.scratch = scratch
        self._con = duckdb.connect(config={"preserve_insertion_order": True, "temp_directory": str(scratch.parent)})

    def __enter__(self) -> CsvText:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def render(self, table: pa.Table, *, header: bool) -> bytes:
        """The rows of ``table`` as CSV bytes, preceded by the header line when ``header``.

        Raises:
            ValueError: If a column is not text, integers or ``float64`` (the published types; any other type
                would not be written as pandas writes it).
        """
        for name, kind in zip(table.column_names, table.schema.types, strict=True):
            if not _published_type(kind):
                raise ValueError(f"column {name!r} has type {kind}: the published CSV takes text, integers and "
                                 "float64 only; decode the column to one of them")
        one_column = table.num_columns == 1
        self._con.register("csv_chunk", table if one_column else _empty_text_as_null(table))
        try:
            self._con.execute(load_sql("published_csv"), {"table": "csv_chunk", "path": str(self.scratch),
                                                          "header": header, "fill": "" if one_column else None})
            return self.scratch.read_bytes()
        finally:
            self._con.unregister("csv_chunk")
            self.scratch.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the DuckDB connection."""
        self._con.close()


def canonical_csv(frame: pd.DataFrame, *, header: bool = True) -> bytes:
    """The table as the published CSV bytes (column order, row order, no index): ``synthetic.csv`` exactly.

    ``header=False`` gives the rows of a later chunk: the chunks' bytes, concatenated, are the whole table's.

    Raises:
        ValueError: As :meth:`CsvText.render`.
    """
    with tempfile.TemporaryDirectory() as folder, CsvText(Path(folder) / "chunk.csv") as text:
        return text.render(pa.Table.from_pandas(frame, preserve_index=False), header=header)


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)


def _published_type(kind: pa.DataType) -> bool:
    return _is_text(kind) or pa.types.is_integer(kind) or kind == pa.float64() or pa.types.is_null(kind)


def _empty_text_as_null(table: pa.Table) -> pa.Table:
    """``table`` with every empty text NULL (both are an empty field of the published text; ``published_csv.sql``)."""
    columns = [pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column) if _is_text(column.type)
               else column for column in table.columns]
    return pa.Table.from_arrays(columns, schema=table.schema)
