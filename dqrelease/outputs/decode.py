"""Decode synthetic value codes back to the schema's columns (the published representation).

Per column, in schema order:

* categorical: the declared value of the code (a ``missing`` value is published as its declared value),
  pandas ``string`` dtype;
* binary: 0 / 1, ``int8``;
* numeric with ``numeric_values = "bucket_label"``: the bucket label ``"[lo, hi)"``, ``string`` dtype; with
  ``single_value_numbers`` (``output.single_value_numbers``, on by default) an integer bucket that holds one value
  is written as that number (``16`` for ``[16, 17)``), and a column whose buckets all hold one value is an integer
  column (``Int64``) rather than text;
* numeric with ``numeric_values = "uniform"``: a value drawn uniformly inside the bucket ``[lo, hi)``:
  integer columns get integers ``lo .. hi-1`` (``Int64``; the schema's whole-number edges give every bucket at
  least one), float columns floats in ``[lo, hi)`` (``Float64``).

The missing bucket decodes to NULL in both modes. Values drawn uniformly depend only on the codes and the
passed generator, so decoding adds no privacy cost (post-processing) and is reproducible from a seed.

:func:`published_labels` names every code the way the published table writes it, for the internal error report
(its per-column panels and its tables say ``16`` where the published table says ``16``).

**Chunks.** A :class:`RecordDecoder` decodes a table a chunk of rows at a time, and the values do not depend on
where the chunks are cut: each numeric column draws from a generator of its own (spawned from the passed one when
the decoder is made), one value per row in row order, so the rows of a chunk continue the stream where the
previous chunk stopped. Only the uniform draws are random; labels and numbers of bucket labels are a lookup. To
decode a chunk elsewhere (a Dask worker), :meth:`RecordDecoder.hand_off` gives a copy standing at the chunk's first
row and moves this decoder past the chunk by drawing its numbers: a stream's position after a chunk is known only by
drawing it (bounded integers reject some words), so this part is sequential and stays with the caller.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from dq_engine.privacy.rng import spawn
from dqrelease.inputs.columns import BinaryColumn, CategoricalColumn, NumericColumn
from dqrelease.inputs.schema import Schema

__all__ = ["PublishedLabels", "RecordDecoder", "decode_records", "published_labels"]


class RecordDecoder:
    """Decode value codes to the schema's columns, one chunk of rows after the other (see the module docstring).

    Decoding the rows in one call or in any split into consecutive chunks gives the same values. A decoder is
    stateful (its column generators advance): decode each row once, in order.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        numeric_values: Literal["bucket_label", "uniform"],
        rng: np.random.Generator,
        single_value_numbers: bool = True,
    ) -> None:
        """Prepare the columns' lookups and, for uniform numbers, one generator per numeric column.

        Args:
            schema: The public schema.
            numeric_values: ``"bucket_label"`` or ``"uniform"`` (see the module docstring).
            rng: Generator the numeric columns' generators are spawned from (unused for bucket labels).
            single_value_numbers: With bucket labels, write a one-value integer bucket as its number (see the module
                docstring; :meth:`~dqrelease.inputs.columns.NumericColumn.published_labels`).
        """
        self.schema = schema
        self.numeric_values = numeric_values
        self.single_value_numbers = single_value_numbers
        numeric = [column.name for column in schema.columns if isinstance(column, NumericColumn)]
        drawn = numeric if numeric_values == "uniform" else []
        self._generators = dict(zip(drawn, spawn(rng, len(drawn)) if drawn else [], strict=True))

    @property
    def draws(self) -> bool:
        """Whether decoding draws values (uniform numbers): if not, equal codes always decode to equal rows."""
        return bool(self._generators)

    def hand_off(self, codes: np.ndarray) -> RecordDecoder:
        """A decoder of the next rows ``codes`` to decode elsewhere (a Dask worker); this one moves past them.

        The copy's column streams stand where this decoder's stand; this decoder then draws the rows' uniform
        numbers and drops them, so it stands where the copy will once it has decoded ``codes``. The numbers must be
        drawn to know where a stream ends: numpy's bounded integers reject some words (Lemire's method), so how
        many words a row takes depends on the words. With bucket labels nothing is drawn.

        Raises:
            ValueError: As :meth:`decode`.
        """
        piece = copy.copy(self)
        piece._generators = copy.deepcopy(self._generators)
        for column, code in self._column_codes(codes, numeric_only=True):
            if column.name in self._generators:
                _uniform(column, code, self._generators[column.name])
        return piece

    def decode(self, codes: np.ndarray) -> pd.DataFrame:
        """Turn the next ``r`` rows of value codes ``(r, m)`` into a table with the schema's columns.

        Args:
            codes: Integer codes, one row per record and one column per schema column, ``codes[:, j]`` in
                ``0 .. size_j - 1`` (the domain of :func:`dqrelease.inputs.encoding.domain_from_columns`).

        Returns:
            A DataFrame with the schema's column names, in order, and ``r`` rows (index ``0 .. r-1``).

        Raises:
            ValueError: If ``codes`` has the wrong shape or a code outside its column's range.
        """
        columns: dict[str, pd.api.extensions.ExtensionArray | np.ndarray] = {}
        for column, code in self._column_codes(codes):
            if isinstance(column, CategoricalColumn):
                columns[column.name] = _labels(column.values, code)
            elif isinstance(column, BinaryColumn):
                columns[column.name] = code.astype(np.int8)
            elif self.numeric_values == "bucket_label":
                columns[column.name] = _bucket_labels(column, code, single_value_numbers=self.single_value_numbers)
            else:
                columns[column.name] = _uniform(column, code, self._generators[column.name])
        return pd.DataFrame(columns)


    def _column_codes(self, codes: np.ndarray, *, numeric_only: bool = False) -> Iterator[tuple[Any, np.ndarray]]:
        """Each column (each numeric one when ``numeric_only``) with its codes, checked, in schema order."""
        codes = np.asarray(codes)
        m = len(self.schema.columns)
        if codes.ndim != 2 or codes.shape[1] != m:
            raise ValueError(f"codes must have shape (r, {m}), one column per schema column; got {codes.shape}")
        for j, column in enumerate(self.schema.columns):
            if numeric_only and not isinstance(column, NumericColumn):
                continue
            code = codes[:, j].astype(np.int64)
            if code.size and (code.min() < 0 or code.max() >= column.size):
                raise ValueError(f"codes of column {column.name!r} must lie in 0..{column.size - 1}")
            yield column, code


def decode_records(
    codes: np.ndarray,
    schema: Schema,
    *,
    numeric_values: Literal["bucket_label", "uniform"],
    rng: np.random.Generator,
    single_value_numbers: bool = True,
) -> pd.DataFrame:
    """Turn value codes ``(r, m)`` into a table with the schema's columns, in one chunk.

    The same values as a :class:`RecordDecoder` made with ``rng`` decoding the rows in any chunks. Arguments,
    result and errors as :class:`RecordDecoder` and :meth:`RecordDecoder.decode`.
    """
    decoder = RecordDecoder(schema, numeric_values=numeric_values, rng=rng, single_value_numbers=single_value_numbers)
    return decoder.decode(codes)


@dataclass(frozen=True, kw_only=True)
class PublishedLabels:
    """The label of every value code as the published table writes it (for the internal error report).

    Attributes:
        labels: Per schema column, in order, the label of each code: a categorical column's declared value, a
            binary column's ``0`` / ``1``, a numeric bucket's published label with bucket labels
            (:meth:`~dqrelease.inputs.columns.NumericColumn.published_labels`: ``16`` for a one-value integer bucket
            with ``single_value_numbers``) or its interval ``[lo, hi)`` with uniform values (the published numbers
            are drawn inside the bucket, so no one number names it); the missing bucket is ``missing`` (NULL in the
            published table).
        numeric_values: ``output.numeric_values`` of the release.
        single_value_numbers: ``output.single_value_numbers`` of the release.
        numeric_columns: Names of the schema's numeric columns.
    """

    labels: tuple[tuple[str, ...], ...]
    numeric_values: Literal["bucket_label", "uniform"]
    single_value_numbers: bool
    numeric_columns: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The settings the labels follow, for the report's JSON (the labels themselves are in its tables)."""
        return {"numeric_values": self.numeric_values, "single_value_numbers": self.single_value_numbers,
                "numeric_columns": list(self.numeric_columns)}


def published_labels(
    schema: Schema, *, numeric_values: Literal["bucket_label", "uniform"], single_value_numbers: bool = True
) -> PublishedLabels:
    """How a release with these output settings writes each column's codes (see :class:`PublishedLabels`).

    Args:
        schema: The public schema.
        numeric_values: ``output.numeric_values``.
        single_value_numbers: ``output.single_value_numbers``.
    """
    labels = []
    for column in schema.columns:
        if isinstance(column, NumericColumn) and numeric_values == "bucket_label":
            buckets = column.published_labels(single_value_numbers=single_value_numbers)
            labels.append((*buckets, *column.labels[len(buckets):]))  # the missing bucket keeps its name
        else:
            labels.append(tuple(column.labels))
    numeric = tuple(column.name for column in schema.columns if isinstance(column, NumericColumn))
    return PublishedLabels(labels=tuple(labels), numeric_values=numeric_values,
                           single_value_numbers=single_value_numbers, numeric_columns=numeric)


def _labels(labels: list[str], code: np.ndarray, *, missing: int | None = None) -> pd.api.extensions.ExtensionArray:
    """Labels of the codes as a ``string`` array; the code ``missing`` (the missing bucket) becomes NA.

    Built by Arrow's ``take`` on the label table (pandas' ``string`` dtype is Arrow-backed): the same array as
    ``pd.array(labels[code], dtype="string")`` without a Python string object per row.
    """
    if missing is not None:
        code = np.where(code == missing, len(labels), code)
    table = pa.array([*labels, None], type=pa.large_string())
    return pd.arrays.ArrowStringArray(table.take(pa.array(code)))


def _bucket_labels(
    column: NumericColumn, code: np.ndarray, *, single_value_numbers: bool
) -> pd.api.extensions.ExtensionArray:
    """The published label of each code's bucket; integers when every bucket holds one value; NA when missing."""
    buckets = len(column.edges) - 1
    values = column.single_values()
    if single_value_numbers and all(value is not None for value in values):
        missing = code >= buckets
        table = np.asarray([*values, 0], dtype=np.int64)
        return pd.arrays.IntegerArray(table[np.minimum(code, buckets)], missing)
    return _labels(column.published_labels(single_value_numbers=single_value_numbers), code, missing=buckets)


def _uniform(column: NumericColumn, code: np.ndarray, rng: np.random.Generator) -> pd.api.extensions.ExtensionArray:
    """A value drawn uniformly inside each code's bucket ``[lo, hi)`` (one draw per row); missing becomes NA."""
    buckets = len(column.edges) - 1
    edges = np.asarray(column.edges, dtype=float)
    missing = code >= buckets
    bucket = np.where(missing, 0, code)
    lo, hi = edges[bucket], edges[bucket + 1]
    if column.type == "integer":  # whole-number edges (the schema checks): integers lo .. hi - 1
        values = rng.integers(lo.astype(np.int64), hi.astype(np.int64))
        return pd.arrays.IntegerArray(values.astype(np.int64), missing)
    values = lo + (hi - lo) * rng.random(code.shape[0])
    values = np.minimum(values, np.nextafter(hi, -math.inf))  # rounding must never reach hi
    return pd.arrays.FloatingArray(values.astype(np.float64), missing)
