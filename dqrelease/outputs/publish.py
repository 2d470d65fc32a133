"""Writing the synthetic table in the requested formats, chunk by chunk, and hashing outputs.

Files are written into the run's staging directory; :meth:`dqrelease.outputs.runs.RunContext.publish` renames them
into place, so a failure while writing leaves no partial output. Hashes: SHA-256 of each file's bytes, plus a
*content* hash of the DuckDB table (its rows serialised as the published CSV text), because DuckDB database files are
not byte-reproducible.

**Chunks.** :class:`TableWriter` takes the table as consecutive chunks (pandas frames with the same columns and
dtypes), turns each into an Arrow table once (the first chunk's schema for all) and never holds more than one chunk
and one Parquet row group: the CSV text (:mod:`dqrelease.outputs.csv_text`, DuckDB's ``COPY``) is appended chunk by
chunk (and hashed as it goes: it is also the DuckDB table's content hash), each chunk is inserted into the DuckDB
table, and Parquet rows are buffered into row groups of :data:`PARQUET_ROW_GROUP_ROWS` rows. Every file's bytes
(the DuckDB table's content) are the same whatever the chunks: CSV is formatted value by value, and each Parquet
row group is written from one contiguous Arrow table of fixed length. A chunk may also come rendered already
(:class:`RenderedChunk`, :func:`render_chunk`: its Arrow table and CSV text made elsewhere, e.g. on a Dask worker);
the writer then only writes it, in order.

**Overlap.** The Parquet file and the DuckDB table are each written by a thread of their own (one per format, so
each format still gets the chunks in order), while the caller decodes and renders the next chunk: pyarrow and
DuckDB release the GIL while they write, so on two cores the chunk's formats and the next chunk's decoding run at the
same time. Each thread holds at most one chunk: :meth:`TableWriter.append` waits for a format's previous chunk before
handing it the next, so the writer holds at most two chunks (the one being written and the caller's next) and the
bytes do not depend on the threads.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dqrelease.inputs.config import file_sha256
from dqrelease.memory_estimate import PUBLISH_CHUNK_ROWS
from dqrelease.outputs.csv_text import CsvText, canonical_csv
from dqrelease.runtime.chunks import chunk_rows_for

__all__ = [
    "PARQUET_ROW_GROUP_ROWS", "RenderedChunk", "RenderedRecords", "TableWriter", "canonical_csv", "render_chunk",
    "renders_csv", "table_content_hash", "write_outputs",
]

TABLE = "synthetic"

PUBLISHED_DUCKDB_MEMORY = "256MiB"
"""DuckDB's memory limit for the published ``synthetic.duckdb`` while it is written (up to
:data:`NARROW_COLUMNS` columns; :func:`published_duckdb_memory`). Inserting only appends blocks, which DuckDB writes
to the file and can then drop; without a limit its buffer pool keeps every block written (its default limit is 80%
of the machine), so the writer grew by about 25 MB per million KDD99 rows, 2.5 GB at 100M."""

NARROW_COLUMNS = 256
WIDE_DUCKDB_MEMORY_BYTES = 1 << 30
WIDE_DUCKDB_BYTES_PER_COLUMN = 128 << 10
"""A wider table's writer needs more: DuckDB holds a row group being filled (122,880 rows) in memory, and a wide
chunk has few rows, so its whole row group (every column's segment) is held. Measured (one insert of two chunks of
64M text cells each): 300 columns fit 256 MiB; 1,000 and 2,500 columns fail at 256 MiB and 320 MiB and fit 1 GiB;
10,000 columns fail at 768 MiB and fit 1 GiB and 1.25 GiB. Above :data:`NARROW_COLUMNS` columns the limit is the
larger of 1 GiB and 128 KiB a column (1.22 GiB at 10,000)."""

def published_duckdb_memory(columns: int) -> str:
    """The published ``synthetic.duckdb`` writer's memory limit for a table of ``columns`` columns (DuckDB's text)."""
    if columns <= NARROW_COLUMNS:
        return PUBLISHED_DUCKDB_MEMORY
    return f"{max(WIDE_DUCKDB_MEMORY_BYTES, WIDE_DUCKDB_BYTES_PER_COLUMN * columns) >> 20}MiB"


PARQUET_ROW_GROUP_ROWS = PUBLISH_CHUNK_ROWS
"""Rows of every Parquet row group but the last (pyarrow's default, 1,048,576) for a table of at most 64 columns,
fewer for a wider one (:func:`~dqrelease.runtime.chunks.chunk_rows_for` of its width): fixed by the schema, so
the file does not depend on the chunks it is written from. Equal to the publishing chunk, so that each chunk is
written as one row group as it arrives (no rows carried over to the next chunk, no copy of two chunks joined)."""


CSV_SCRATCH = ".synthetic.csv.chunk"
"""File in the staging directory that DuckDB writes one chunk's CSV text to (removed as soon as it is read)."""


def table_content_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of the table as the published CSV text (:func:`~dqrelease.outputs.csv_text.canonical_csv`)."""
    return hashlib.sha256(canonical_csv(frame)).hexdigest()


@dataclass(frozen=True, kw_only=True, eq=False)
class RenderedChunk:
    """A chunk of the published table ready to be written: its Arrow table and, if a format needs it, its CSV text.

    Attributes:
        table: The chunk's rows (the Parquet and DuckDB formats, and the published suite's validation).
        csv: Its CSV text (:mod:`dqrelease.outputs.csv_text`; the header line in the first chunk's), or None when
            no format needs it.
    """

    table: pa.Table
    csv: bytes | None = None


def render_chunk(frame: pd.DataFrame, *, header: bool, csv: bool, scratch: Path | None = None) -> RenderedChunk:
    """``frame`` as a :class:`RenderedChunk`: its Arrow table (the frame's dtypes decide the types) and CSV text.

    The decoder's columns have one dtype per schema column whatever the rows (:mod:`dqrelease.outputs.decode`), so
    every chunk of a table gets the same Arrow schema.

    Args:
        frame: The chunk's decoded rows.
        header: The chunk is the table's first: its CSV text starts with the header line.
        csv: Render the CSV text.
        scratch: The folder DuckDB writes the text to (then read back and removed); None: a temporary folder of
            the process's (on a Dask worker, the worker's machine's).
    """
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if not csv:
        return RenderedChunk(table=table)
    with tempfile.TemporaryDirectory(dir=scratch) as folder, CsvText(Path(folder) / CSV_SCRATCH) as text:
        return RenderedChunk(table=table, csv=text.render(table, header=header))


@dataclass(frozen=True, kw_only=True, eq=False)
class RenderedRecords:
    """Records rendered once, for a table whose rows are copies of them: each chunk is gathered, not decoded.

    When decoding draws nothing (bucket labels), a published row is the decoded and rendered record it copies, value
    by value: its Arrow row, and its CSV line (the text formats every value on its own, so a row's line does not
    depend on its neighbours). A chunk is then the records' rows taken in the chunk's order
    (:meth:`chunk`): Arrow's ``take`` of the table, and of the lines as one binary array, whose values are the
    chunk's text end to end. The same table and bytes as decoding and rendering the chunk (tested), for a gather
    (a copy per cell) instead of a lookup and a formatting per cell.

    Attributes:
        table: The records' rows (the first chunk's Arrow schema: the same pandas metadata as a rendered chunk).
        header: The CSV header line, or None without CSV text.
        lines: Each record's CSV line (``large_binary``), or None without CSV text.
    """

    table: pa.Table
    header: bytes | None = None
    lines: pa.LargeBinaryArray | None = None

    @classmethod
    def render(cls, frame: pd.DataFrame, *, csv: bool, scratch: Path | None = None) -> RenderedRecords | None:
        """The decoded records ``frame`` rendered once (arguments as :func:`render_chunk`).

        None when a line of the text is not a record: a value or a column name holds a line break (a quoted field
        spans lines), so the text cannot be cut into rows at its line feeds; the caller then renders each chunk.
        """
        rendered = render_chunk(frame, header=True, csv=csv, scratch=scratch)
        if rendered.csv is None:
            return cls(table=rendered.table)
        ends = np.flatnonzero(np.frombuffer(rendered.csv, dtype=np.uint8) == ord("\n"))
        if len(ends) != rendered.table.num_rows + 1:  # the header's line and one per record, or a quoted line break
            return None
        head = int(ends[0]) + 1
        offsets = np.concatenate([[0], ends[1:] + 1 - head]).astype(np.int64)
        lines = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1,
                                                 [None, pa.py_buffer(offsets), pa.py_buffer(rendered.csv[head:])])
        return cls(table=rendered.table, header=rendered.csv[:head], lines=lines)

    def chunk(self, part: np.ndarray, *, header: bool) -> RenderedChunk:
        """The rows copying records ``part`` (indices, in row order) as a :class:`RenderedChunk`.

        Args:
            part: The record each row of the chunk copies.
            header: The chunk is the table's first: its CSV text starts with the header line.
        """
        index = pa.array(part)
        table = self.table.take(index)
        if self.lines is None:
            return RenderedChunk(table=table)
        taken = self.lines.take(index)
        offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)[taken.offset : taken.offset + len(taken) + 1]
        text = taken.buffers()[2][int(offsets[0]) : int(offsets[-1])].to_pybytes() if len(taken) else b""
        return RenderedChunk(table=table, csv=self.header + text if header else text)


def renders_csv(formats: Iterable[str]) -> bool:
    """Whether writing ``formats`` needs the CSV text: the CSV file, or the DuckDB table's content hash."""
    return bool({"csv", "duckdb"} & set(formats))


class TableWriter:
    """Write a table given chunk by chunk as ``synthetic.<format>`` files (see the module docstring).

    Use as a context manager: :meth:`append` each chunk in order, then :meth:`finish`; leaving the block without
    :meth:`finish` (an error) closes the files half written, for the caller to remove with the staging directory.
    """

    def __init__(self, directory: Path, formats: list[str], *, row_group_rows: int | None = None) -> None:
        """Prepare the writers (files are created by the first chunk).

        Args:
            directory: The staging directory (created if missing).
            formats: Any of ``"parquet"``, ``"csv"``, ``"duckdb"``.
            row_group_rows: Rows of a Parquet row group; None: :func:`~dqrelease.runtime.chunks.chunk_rows_for`
                of the first chunk's width, at most :data:`PARQUET_ROW_GROUP_ROWS` (read at the call, so tests may
                lower it).

        Raises:
            ValueError: If ``row_group_rows`` is below 1.
        """
        if row_group_rows is not None and row_group_rows < 1:
            raise ValueError(f"row_group_rows ({row_group_rows}) must be at least 1")
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.formats = directory, list(formats)
        self.row_group_rows: int | None = row_group_rows  # None: set by the first chunk's width
        hashed = renders_csv(formats)
        self._csv_hash = hashlib.sha256() if hashed else None
        self._csv_text = CsvText(directory / CSV_SCRATCH) if hashed else None
        self._csv: BinaryIO | None = None
        self._schema: pa.Schema | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._duckdb: duckdb.DuckDBPyConnection | None = None
        self._chunks = 0
        self._threads = {name: ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"write-{name}")
                         for name in ("parquet", "duckdb") if name in self.formats}
        self._pending: dict[str, Future[None]] = {}

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._close()

    def append(self, chunk: pd.DataFrame | RenderedChunk) -> None:
        """Write the next chunk of rows: a frame (the same columns and dtypes as the first), or one rendered already.

        A frame is turned into an Arrow table once, with the first chunk's schema, and its CSV text rendered here; a
        :class:`RenderedChunk` (:func:`render_chunk`, e.g. on a Dask worker) is written as it is: its text must
        have been rendered when the formats need it (:func:`renders_csv`), with the header line in the first chunk's
        only.
        """
        first = self._chunks == 0
        if isinstance(chunk, pd.DataFrame):
            table = pa.Table.from_pandas(chunk, schema=self._schema, preserve_index=False)  # once, for every format
            text = self._csv_text.render(table, header=first) if self._csv_text is not None else None
        else:
            table, text = chunk.table, chunk.csv
            if self._schema is not None and not table.schema.equals(self._schema, check_metadata=False):
                raise ValueError("a rendered chunk's column types differ from the first chunk's: decode every chunk "
                                 "with the same schema and settings")
        self._schema = self._schema or table.schema
        if self.row_group_rows is None:
            self.row_group_rows = chunk_rows_for(table.num_columns, most=PARQUET_ROW_GROUP_ROWS)
        if self._csv_hash is not None:
            if text is None:
                raise ValueError("a rendered chunk without CSV text: render it with csv=True for these formats")
            self._csv_hash.update(text)  # serialised once: the CSV file and the content hash
            if "csv" in self.formats:
                if self._csv is None:
                    self._csv = (self.directory / "synthetic.csv").open("wb")
                self._csv.write(text)
        if "parquet" in self.formats:
            self._hand("parquet", lambda: self._append_parquet(table))
        if "duckdb" in self.formats:
            self._hand("duckdb", lambda: self._append_duckdb(table, first=first))
        self._chunks += 1

    def finish(self) -> dict[str, dict[str, str]]:
        """Flush and close the files; return ``{format: {path, sha256[, table, content_sha256]}}``.

        Raises:
            ValueError: If no chunk was appended (the table's columns are not known).
        """
        if self._chunks == 0:
            raise ValueError("no chunk was written: append at least one (possibly empty) frame")
        self.wait()
        if self._parquet is not None:
            self._write_row_groups(self._parquet, final=True)
        self._close()
        outputs: dict[str, dict[str, str]] = {}
        for name in ("parquet", "csv"):
            if name in self.formats:
                path = self.directory / f"synthetic.{name}"
                outputs[name] = {"path": path.name, "sha256": file_sha256(path)}
        if "duckdb" in self.formats:
            path = self.directory / "synthetic.duckdb"
            outputs["duckdb"] = {
                "path": path.name,
                "table": TABLE,
                "sha256": file_sha256(path),
                "content_sha256": self._csv_hash.hexdigest(),  # type: ignore[union-attr]
            }
        return outputs

    def _hand(self, name: str, write: Callable[[], None]) -> None:
        """Give ``write`` to format ``name``'s thread, once its previous chunk is written (its error raised here)."""
        previous = self._pending.pop(name, None)
        if previous is not None:
            previous.result()
        self._pending[name] = self._threads[name].submit(write)

    def wait(self) -> None:
        """Block until every chunk appended so far is written in every format (a format thread's error is raised)."""
        pending, self._pending = self._pending, {}
        errors = [future.exception() for future in pending.values()]
        for error in errors:
            if error is not None:
                raise error

    def _append_duckdb(self, table: pa.Table, *, first: bool) -> None:
        if self._duckdb is None:
            self._duckdb = duckdb.connect(str(self.directory / "synthetic.duckdb"),
                                          config={"memory_limit": published_duckdb_memory(table.num_columns)})
        self._duckdb.register("chunk", table)
        # TABLE is a module constant: no identifier from input reaches the SQL text
        verb = f"create table {TABLE} as" if first else f"insert into {TABLE}"
        self._duckdb.execute(f"{verb} select * from chunk")
        self._duckdb.unregister("chunk")

    def _append_parquet(self, table: pa.Table) -> None:
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.directory / "synthetic.parquet", table.schema)
        self._buffer.append(table)
        self._buffered += table.num_rows
        self._write_row_groups(self._parquet, final=False)

    def _write_row_groups(self, writer: pq.ParquetWriter, *, final: bool) -> None:
        """Write every full row group buffered (and the rest when ``final``), each from one contiguous table."""
        if self._buffered < self.row_group_rows and not (final and self._buffered):
            return
        rows = pa.concat_tables(self._buffer).combine_chunks()  # contiguous: pages never depend on the chunks
        start = 0
        while rows.num_rows - start >= self.row_group_rows or (final and start < rows.num_rows):
            group = rows.slice(start, self.row_group_rows)
            writer.write_table(group, row_group_size=self.row_group_rows)
            start += group.num_rows
        rest = rows.slice(start)  # a slice keeps the concatenated table's buffers: kept only when rows remain
        self._buffer, self._buffered = ([rest] if rest.num_rows else []), rest.num_rows

    def _close(self) -> None:
        for thread in self._threads.values():  # a chunk still being written finishes first (errors: the caller's)
            thread.shutdown(wait=True, cancel_futures=True)
        self._pending = {}
        for closing in (self._csv, self._parquet, self._duckdb, self._csv_text):
            if closing is not None:
                closing.close()
        self._csv = self._parquet = self._duckdb = self._csv_text = None


def write_outputs(
    chunks: Iterable[pd.DataFrame | RenderedChunk], directory: Path, formats: list[str]
) -> dict[str, dict[str, str]]:
    """Write the table given as consecutive ``chunks`` as ``synthetic.<format>`` files (:class:`TableWriter`).

    The chunks are frames, or chunks rendered already (:meth:`TableWriter.append`).

    Returns:
        ``{format: {path, sha256[, table, content_sha256]}}``.
    """
    with TableWriter(directory, formats) as writer:
        for chunk in chunks:
            writer.append(chunk)
        return writer.finish()
