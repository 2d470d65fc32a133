"""Exact deduplication of bounded non-negative integer rows through packed, order-preserving keys.

``numpy.unique(rows, axis=0)`` views each row as a structured scalar and sorts those with a generic
field-by-field comparison: on KDD Cup 99 (494,021 rows x 42 codes) that took 5.6 s, and on 2.4 M drawn
3-way queries (6 columns) about 15 s per call. When every column ``j`` is known to lie in
``0 .. radices[j] - 1``, each row packs into a few ``uint64`` words (column ``j`` gets
``bit_length(radices[j] - 1)`` bits, earlier columns in more significant positions, a new word when one is
full). Comparing the word tuples as unsigned integers is then exactly the lexicographic comparison of the
rows, so sorting the words (one ``argsort`` for one word, ``lexsort`` for several) gives the same distinct
rows, in the same order, with the same counts and inverse as ``numpy.unique(rows, axis=0)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pack_rows", "unique_rows"]

_WORD_BITS = 64


def _field_bits(radices: np.ndarray) -> list[int]:
    return [max(1, int(r) - 1).bit_length() for r in radices]


def pack_rows(rows: np.ndarray, radices: np.ndarray) -> np.ndarray:
    """Pack rows ``(n, c)`` with ``0 <= rows[:, j] < radices[j]`` into order-preserving words ``(n, w)``.

    Args:
        rows: Non-negative integer array of shape ``(n, c)``.
        radices: Exclusive upper bound of each column, shape ``(c,)``, each ``>= 1`` and ``<= 2**64``.

    Returns:
        ``uint64`` array of shape ``(n, w)``; row ``a`` precedes row ``b`` lexicographically exactly when
        its word tuple precedes ``b``'s.
    """
    rows = np.asarray(rows)
    radices = np.asarray(radices)
    if rows.ndim != 2 or radices.shape != (rows.shape[1],):
        raise ValueError(f"rows must be (n, c) with one radix per column; got {rows.shape} and {radices.shape}")
    widths = _field_bits(radices)
    if max(widths, default=1) > _WORD_BITS:
        raise ValueError("a radix exceeds 2**64; such columns cannot be packed")
    words: list[np.ndarray] = []
    current: np.ndarray | None = None
    used = 0
    for j, width in enumerate(widths):
        if current is None or used + width > _WORD_BITS:
            if current is not None:
                words.append(current)
            current, used = rows[:, j].astype(np.uint64), width
            continue
        np.left_shift(current, np.uint64(width), out=current)
        # cast column by column inside the ufunc (no full-size temporary per column)
        np.bitwise_or(current, rows[:, j], out=current, dtype=np.uint64, casting="unsafe")
        used += width
    if current is not None:
        words.append(current)
    if not words:
        return np.zeros((rows.shape[0], 0), dtype=np.uint64)
    return np.stack(words, axis=1)


def unique_rows(
    rows: np.ndarray, radices: np.ndarray, *, return_counts: bool = False, return_inverse: bool = False
) -> np.ndarray | tuple[np.ndarray, ...]:
    """``numpy.unique(rows, axis=0, ...)`` for rows with known column bounds, through packed keys.

    Args:
        rows: Non-negative integer array ``(n, c)``, ``n >= 1``, with ``rows[:, j] < radices[j]`` (not
            checked: callers guarantee it; values outside the bounds would collide).
        radices: Exclusive upper bound of each column.
        return_counts: Also return the multiplicity of each distinct row.
        return_inverse: Also return, for every input row, the index of its distinct row (shape ``(n,)``).

    Returns:
        The distinct rows in lexicographic order (same dtype as ``rows``), then the inverse and / or the
        counts when asked for, in that order (as ``numpy.unique``).
    """
    rows = np.asarray(rows)
    n = rows.shape[0]
    words = pack_rows(rows, radices)
    if words.shape[1] == 1:
        # one word: a plain sort of the keys (numpy's SIMD sort) and unpacking the distinct keys back into
        # rows is an order of magnitude faster than an argsort
        keys = words[:, 0]
        ordered = np.sort(keys)
        boundary = np.empty(n, dtype=bool)
        boundary[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=boundary[1:])
        distinct_keys = ordered[boundary]
        result: list[np.ndarray] = [_unpack(distinct_keys, radices, rows.dtype)]
        if return_inverse:
            result.append(np.searchsorted(distinct_keys, keys).astype(np.int64))
        if return_counts:
            result.append(np.diff(np.append(np.flatnonzero(boundary), n)).astype(np.int64))
        return result[0] if len(result) == 1 else tuple(result)
    order = np.lexsort(words.T[::-1])
    ordered = words[order]
    boundary = np.empty(n, dtype=bool)
    boundary[:1] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=boundary[1:])
    starts = np.flatnonzero(boundary)
    result = [rows[order[starts]]]
    if return_inverse:
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.cumsum(boundary) - 1
        result.append(inverse)
    if return_counts:
        result.append(np.diff(np.append(starts, n)).astype(np.int64))
    return result[0] if len(result) == 1 else tuple(result)


def _unpack(keys: np.ndarray, radices: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Inverse of :func:`pack_rows` for rows that fit one word."""
    widths = _field_bits(radices)
    out = np.empty((keys.shape[0], len(widths)), dtype=dtype)
    scratch = np.empty_like(keys)
    shift = 0
    for j in range(len(widths) - 1, -1, -1):
        np.right_shift(keys, np.uint64(shift), out=scratch)
        np.bitwise_and(scratch, np.uint64((1 << widths[j]) - 1), out=scratch)
        out[:, j] = scratch
        shift += widths[j]
    return out
