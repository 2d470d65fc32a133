"""The rows a release publishes: which synthetic record each row copies, decoded a chunk at a time.

The mechanism's result is a small set of synthetic records (weighted or not); the published table expands it to
the requested number of rows (:meth:`dq_engine.SynthesisResult.sample_index`). A :class:`PublishedRows` holds that
expansion as one compact index (4 bytes a row) and hands the rows out in chunks of :data:`PUBLISH_CHUNK_ROWS`:
value codes (:meth:`PublishedRows.code_chunks`), decoded frames (:meth:`PublishedRows.frames`), decoded and rendered
chunks ready to write, here or on a Dask cluster's workers (:meth:`PublishedRows.rendered`; with bucket labels the
records are rendered once, here, and each chunk is gathered from them: a row is a copy) and how many rows
copy each record (:meth:`PublishedRows.record_counts`, what the error report evaluates). Nothing here holds the
whole table: memory is the index plus one chunk.

Invariant: nothing depends on the chunk size. The index is drawn in one call, as the whole table always was, and
the decoder draws each numeric column's uniform values from a stream of its own in row order
(:class:`~dqrelease.outputs.decode.RecordDecoder`), so any chunking gives the same rows, values and bytes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from dq_engine import SynthesisResult
from dqrelease.inputs.schema import Schema
from dqrelease.memory_estimate import PUBLISH_CHUNK_ROWS
from dqrelease.outputs.decode import RecordDecoder
from dqrelease.outputs.publish import RenderedChunk, RenderedRecords, render_chunk
from dqrelease.runtime.chunks import ChunkWorkers, chunk_rows_for, map_chunks

if TYPE_CHECKING:
    from dqrelease.expectations.validate import SyntheticValidation

__all__ = ["PUBLISH_CHUNK_ROWS", "PublishedRows"]


@dataclass(frozen=True, kw_only=True, eq=False)
class PublishedRows:
    """The published rows before decoding: row ``i`` is a copy of ``records[index[i]]``.

    Attributes:
        records: The synthetic records (value codes ``(r, m)``), the mechanism's.
        index: The record each published row copies, in publication order (``int32`` for fewer than 2^31 records).
        decoder: How rows are decoded; never advanced itself: each pass over the rows decodes with a copy, so every
            pass gives the same values.
        chunk_rows: Rows per chunk.
    """

    records: np.ndarray
    index: np.ndarray
    decoder: RecordDecoder
    chunk_rows: int

    @classmethod
    def draw(
        cls,
        result: SynthesisResult,
        rows: int,
        rng: np.random.Generator,
        *,
        schema: Schema,
        numeric_values: Literal["bucket_label", "uniform"],
        single_value_numbers: bool = True,
        chunk_rows: int | None = None,
    ) -> PublishedRows:
        """Draw which record each of ``rows`` published rows copies, and prepare their decoding.

        Args:
            result: The mechanism's result.
            rows: Rows to publish.
            rng: The release's decode stream: it draws the index, then the decoder's column streams are spawned
                from it.
            schema: The public schema.
            numeric_values: How numbers are published (:mod:`dqrelease.outputs.decode`).
            single_value_numbers: With bucket labels, a one-value integer bucket is written as its number.
            chunk_rows: Rows per chunk; None: :func:`~dqrelease.runtime.chunks.chunk_rows_for` of the schema's
                width, at most :data:`PUBLISH_CHUNK_ROWS` (read at the call, so tests may lower it).

        Raises:
            ValueError: If ``chunk_rows`` is below 1.
        """
        if chunk_rows is None:
            chunk_rows = chunk_rows_for(len(schema.columns), most=PUBLISH_CHUNK_ROWS)
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows ({chunk_rows}) must be at least 1")
        index = result.sample_index(rows, rng)
        decoder = RecordDecoder(schema, numeric_values=numeric_values, rng=rng,
                                single_value_numbers=single_value_numbers)
        return cls(records=result.records, index=index, decoder=decoder, chunk_rows=chunk_rows)

    @property
    def n_rows(self) -> int:
        """Number of published rows."""
        return int(self.index.shape[0])

    def code_chunks(self) -> Iterator[np.ndarray]:
        """The rows' value codes ``(c, m)``, a chunk of at most :attr:`chunk_rows` rows at a time, in order."""
        for part in self._index_chunks():
            yield self.records[part]

    def frames(self) -> Iterator[pd.DataFrame]:
        """The rows decoded to the schema's columns, a chunk at a time (the same values on every pass)."""
        decoder = copy.deepcopy(self.decoder)
        for codes in self.code_chunks():
            yield decoder.decode(codes)

    def rendered(
        self, *, csv: bool, workers: ChunkWorkers | None = None, scratch: Path | None = None
    ) -> Iterator[RenderedChunk]:
        """The rows decoded and rendered (:func:`~dqrelease.outputs.publish.render_chunk`) a chunk at a time, in order.

        When every copy of a record is the same row (:attr:`copies_rendered_once`) the records are decoded and
        rendered once, here, and each chunk is gathered from them (:class:`~dqrelease.outputs.publish.RenderedRecords`),
        with or without ``workers``: a gather costs about what writing the chunk costs, and a worker would have to send
        the chunk back. Otherwise, without ``workers`` each chunk is decoded and rendered here, the CSV text in
        ``scratch``; with ``workers`` each chunk's codes go to a worker with a decoder standing where the chunk starts
        (:meth:`~dqrelease.outputs.decode.RecordDecoder.hand_off`, which draws the chunk's uniform numbers here to
        move past them) and come back decoded and rendered: the same tables and text, the same bytes once written.

        Args:
            csv: Render each chunk's CSV text (the CSV file, or the DuckDB table's content hash, needs it).
            workers: A Dask cluster's workers, or None.
            scratch: The folder the CSV text is rendered in here (None: a temporary folder); workers use their own.
        """
        if self.copies_rendered_once:
            records = RenderedRecords.render(self.decoder.decode(self.records), csv=csv, scratch=scratch)
            if records is not None:
                return (records.chunk(part, header=number == 0) for number, part in enumerate(self._index_chunks()))
        decoder = copy.deepcopy(self.decoder)
        elsewhere = workers is not None

        def pieces() -> Iterator[_Piece]:
            for number, codes in enumerate(self.code_chunks()):
                yield _Piece(codes=codes, decoder=decoder.hand_off(codes) if elsewhere else decoder, first=number == 0)

        return map_chunks(_render_piece, pieces(), workers=workers, csv=csv, scratch=None if elsewhere else scratch)

    @property
    def copies_rendered_once(self) -> bool:
        """Whether :meth:`rendered` renders the records once and gathers each chunk from them.

        So it does when decoding draws nothing (:attr:`~dqrelease.outputs.decode.RecordDecoder.draws`: every copy of a
        record is the same row) and there are at most :attr:`chunk_rows` records (the rendered records then hold no
        more than a chunk does, so memory stays within the publishing forecast) and at most :attr:`n_rows` (rendering
        the records then costs no more than rendering the rows: a table of 48,842 rows from 200,000 particles is
        rendered row by row, as before).
        """
        return not self.decoder.draws and self.records.shape[0] <= min(self.chunk_rows, self.n_rows)

    def checked(self, chunks: Iterator[RenderedChunk], validation: SyntheticValidation) -> Iterator[RenderedChunk]:
        """``chunks`` (of these rows, in order) with the published suite started on the rows.

        When every copy of a record is the same row (:attr:`copies_rendered_once`) the suite checks the records
        once, with how many rows copy each (:meth:`~dqrelease.expectations.validate.SyntheticValidation.send_copies`,
        started here) and the chunks pass as they are; otherwise each chunk is sent to it as it passes
        (:meth:`~dqrelease.expectations.validate.SyntheticValidation.check_each`). Either way the same failures and
        counts, raised by ``validation.finish()``.
        """
        if self.copies_rendered_once:
            validation.send_copies(self.decoded_records(), self.record_counts())
            return chunks
        return validation.check_each(chunks)

    def decoded_records(self) -> pa.Table:
        """The records decoded, as the Arrow table :func:`~dqrelease.outputs.publish.render_chunk` makes.

        When every copy of a record is the same row (:attr:`copies_rendered_once`) these are the published rows, each
        as often as :meth:`record_counts` says.
        """
        return render_chunk(self.decoder.decode(self.records), header=False, csv=False).table

    def record_counts(self) -> np.ndarray:
        """How many published rows copy each record (``int64``, one per record), summed chunk by chunk."""
        counts = np.zeros(self.records.shape[0], dtype=np.int64)
        for part in self._index_chunks():  # bincount converts its input to int64: a chunk at a time
            counts += np.bincount(part, minlength=len(counts))
        return counts

    def _index_chunks(self) -> Iterator[np.ndarray]:
        for start in range(0, self.n_rows, self.chunk_rows):
            yield self.index[start : start + self.chunk_rows]


@dataclass(frozen=True, kw_only=True, eq=False)
class _Piece:
    """One chunk of the published rows to decode.

    Attributes:
        codes: Its rows' value codes.
        decoder: A decoder standing at its first row.
        first: It is the table's first chunk (its CSV text starts with the header line).
    """

    codes: np.ndarray
    decoder: RecordDecoder
    first: bool


def _render_piece(piece: _Piece, *, csv: bool, scratch: Path | None) -> RenderedChunk:
    """Decode and render one chunk (here, or on a Dask worker)."""
    return render_chunk(piece.decoder.decode(piece.codes), header=piece.first, csv=csv, scratch=scratch)
