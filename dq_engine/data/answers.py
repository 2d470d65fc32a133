"""Exact answers of a workload: on private data (contingency tables), on synthetic records, and under uniform data.

``q(D)`` is the *fraction* of records satisfying ``q`` (normalised database, DualQuery paper §2). Under the
uniform distribution over the record universe it is ``Π_{a∈S} 1/|a|`` (:func:`uniform_answers`; ``1/2`` for a
binary attribute's bit): the reports' *uniform* baseline and randomized response's estimator use it.

* Categorical data (codes layout): one contingency table per marginal, built with a single weighted
  ``bincount`` over the distinct rows, then every query of the marginal is one table lookup. No loop runs
  over queries; the Python loop runs over marginals only.
* Binary data (sparse or packed layout): every column is bit-packed once (``n/8`` bytes; packed datasets
  already are) and a chunk of queries is answered by AND-ing the packed columns of its literals and counting
  bits (``numpy.bitwise_count``).
* Very sparse binary data (e.g. baskets of a few items): when it is cheaper, every ``k``-subset of every
  record's set bits is enumerated (``Σ_r C(|r|, k)`` keys, a few per record) and matched against the queries'
  sorted keys, so each query costs a lookup instead of ``k`` column ANDs of ``n/8`` bytes.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload

__all__ = ["answer_records", "answer_workload", "error_summary", "per_marginal_max_error", "uniform_answers"]

_CHUNK_BYTES = 256 * 1024 * 1024  # working memory for one chunk of packed-column AND operations
_SUBSET_CHUNK = 4_000_000  # subset keys enumerated at a time by the sparse subset path
_SUBSET_LIMIT = 300_000_000  # never enumerate more subsets than this in total
_SUBSET_COST = 400  # bytes of packed-AND work one enumerated subset costs as much as (BMS-WebView: 270-470)


def _marginal_strides(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """Row-major strides of each marginal's contingency table ``(M, kmax)`` (0 on padding) and its cell count."""
    present = workload.marginals >= 0
    sizes = np.where(present, workload.domain.sizes[np.maximum(workload.marginals, 0)], 1)
    strides = np.ones_like(sizes)
    for i in range(sizes.shape[1] - 2, -1, -1):
        strides[:, i] = strides[:, i + 1] * sizes[:, i + 1]
    return np.where(present, strides, 0), strides[:, 0] * sizes[:, 0]


def _answer_codes(data: Dataset, workload: Workload, marginal_ids: np.ndarray) -> np.ndarray:
    return _weighted_code_answers(data.codes, data.counts.astype(np.float64), workload, marginal_ids) / data.n


def _weighted_code_answers(
    codes: np.ndarray, counts: np.ndarray, workload: Workload, marginal_ids: np.ndarray
) -> np.ndarray:
    # columns of the rows as contiguous int64 (converted once, not once per marginal), and every
    # query's cell index computed in one vectorised pass; the loop over marginals only builds the tables.
    # Same bincount inputs in the same order as the per-marginal formulation, so the answers are identical.
    # Returns the weighted counts (not normalised).
    columns = np.ascontiguousarray(codes.T, dtype=np.int64)
    strides, cells = _marginal_strides(workload)
    starts = workload.marginal_starts
    out = np.empty(len(workload), dtype=np.float64)
    for m in marginal_ids:
        lo, hi = starts[m], starts[m + 1]
        if hi == lo:
            continue
        row, stride = workload.marginals[m], strides[m]
        flat = columns[row[0]] * stride[0]
        for i in range(1, int((row >= 0).sum())):
            flat += columns[row[i]] * stride[i]
        table = np.bincount(flat, weights=counts, minlength=int(cells[m]))
        query_flat = (workload.query_values[lo:hi] * stride).sum(axis=1)
        out[lo:hi] = table[query_flat]
    return out


def _bit_columns(data: Dataset) -> np.ndarray:
    """Bit-packed columns ``(d, ceil(n/8))`` (packed-bit datasets hold them already; sparse ones are packed)."""
    if data.packed is not None:
        return data.packed
    n, d = data.bits.shape
    width = (n + 7) // 8
    packed = np.zeros((d, width), dtype=np.uint8)
    indptr, indices = data.bits.indptr, data.bits.indices
    for j in range(d):
        rows = indices[indptr[j] : indptr[j + 1]]
        if len(rows):
            column = np.zeros(n, dtype=bool)
            column[rows] = True
            packed[j] = np.packbits(column)
    return packed


def _packed_columns(data: Dataset) -> np.ndarray:
    """Bit-packed columns ``(d + 1, ceil(n/8))``; the extra last column is all ones (the sentinel bit)."""
    columns = _bit_columns(data)
    sentinel = np.packbits(np.ones(data.n, dtype=bool))
    return np.vstack([columns, sentinel[None, :]])


def _answer_bits(data: Dataset, workload: Workload) -> np.ndarray:
    """AND the packed columns of each query's literals and count the bits, a chunk of queries at a time.

    A padding literal (the sentinel bit ``d`` of ``Workload.query_bits``) is an all-ones column; it never
    occurs first (every query has a literal at position 0), so AND-ing it is skipped instead of stored.
    """
    packed = _bit_columns(data)
    d = packed.shape[0]
    columns = workload.query_bits
    chunk = max(1, _CHUNK_BYTES // max(1, packed.shape[1] * 2))
    out = np.empty(len(workload), dtype=np.float64)
    for lo in range(0, len(workload), chunk):
        hi = min(len(workload), lo + chunk)
        acc = packed[columns[0][lo:hi]]
        for column in columns[1:]:
            bits = column[lo:hi]
            real = bits < d
            if real.all():
                acc &= packed[bits]
            elif real.any():
                acc[real] &= packed[bits[real]]
        out[lo:hi] = np.bitwise_count(acc).sum(axis=1, dtype=np.int64)
    return out / data.n


def _answer_by_subsets(data: Dataset, workload: Workload) -> np.ndarray | None:
    """Answers on sparse binary data by counting the ``k``-subsets of every record's set bits.

    Returns None when this would cost more than the packed-AND path (``_SUBSET_COST`` bytes of AND work per
    enumerated subset) or enumerate more than ``_SUBSET_LIMIT`` subsets, or when keys would not fit 62 bits.
    The counts are exact integers, so the answers equal the packed path's exactly.
    """
    d = data.domain.n_bits
    literals = np.sort(np.stack(workload.query_bits, axis=1).astype(np.int64), axis=1)  # sentinel d sorts last
    width = literals.shape[1]
    if (d + 1) ** width >= 2**62:
        return None
    lengths = (literals < d).sum(axis=1)
    rows = data.bits.tocsr()
    rows.sort_indices()
    row_lengths = np.diff(rows.indptr)
    sizes = np.unique(lengths)
    by_length = np.bincount(row_lengths)
    total = sum(math.comb(length, k) * int(count) for k in sizes for length, count in enumerate(by_length) if count)
    packed_cost = len(workload) * width * ((data.n + 7) // 8)
    if total > _SUBSET_LIMIT or total * _SUBSET_COST >= packed_cost:
        return None
    powers = (d + 1) ** np.arange(width - 1, -1, -1, dtype=np.int64)
    out = np.empty(len(workload), dtype=np.float64)
    for k in sizes:
        selected = np.flatnonzero(lengths == k)
        keys, inverse = np.unique(literals[selected, :k] @ powers[width - k :], return_inverse=True)
        counts = np.zeros(len(keys), dtype=np.int64)
        for length in np.flatnonzero(by_length[k:]) + k:
            combos = np.array(list(itertools.combinations(range(length), k)), dtype=np.int64)
            starts = rows.indptr[:-1][row_lengths == length]
            step = max(1, _SUBSET_CHUNK // len(combos))
            for lo in range(0, len(starts), step):
                items = rows.indices[starts[lo : lo + step, None, None] + combos[None]]  # ascending in each subset
                found = items.reshape(-1, k).astype(np.int64) @ powers[width - k :]
                where = np.minimum(np.searchsorted(keys, found), len(keys) - 1)
                hit = keys[where] == found
                counts += np.bincount(where[hit], minlength=len(keys))
        out[selected] = counts[inverse]
    return out / data.n


def answer_workload(data: Dataset, workload: Workload) -> np.ndarray:
    """Exact answer ``q(D)`` (a fraction in [0, 1]) of every positive query, shape ``(N,)``.

    The result is private: callers must not release it without a mechanism.
    """
    if data.domain != workload.domain:
        raise ValueError("the dataset and the workload are over different domains")
    if data.is_sparse:
        answers = _answer_by_subsets(data, workload)
        if answers is not None:
            return answers
    if data.is_sparse or data.is_packed:
        return _answer_bits(data, workload)
    return _answer_codes(data, workload, np.arange(workload.n_marginals))


def answer_records(workload: Workload, records: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Answers of the workload on a synthetic multiset of bit records ``(r, n_bits)``.

    Args:
        workload: The workload.
        records: Bool array of bit records (e.g. DualQuery's best responses).
        weights: Optional non-negative weight per record (default: uniform).
    """
    records = np.asarray(records, dtype=bool)
    if weights is None and records.shape[0] <= 64:
        total = np.zeros(len(workload), dtype=np.float64)
        for record in records:
            total += workload.evaluate_record(record)
        return total / records.shape[0]
    data = Dataset.from_records(workload.domain, records)
    if weights is None:
        return answer_workload(data, workload)
    weights = np.asarray(weights, dtype=np.float64)
    if not workload.domain.all_binary:
        # weighted contingency tables of the decoded records: one bincount per marginal, no loop over records
        codes = workload.domain.decode_records(records)
        marginal_ids = np.arange(workload.n_marginals)
        return _weighted_code_answers(codes, weights, workload, marginal_ids) / weights.sum()
    total = np.zeros(len(workload), dtype=np.float64)
    for record, weight in zip(records, weights, strict=True):
        if weight:
            total += weight * workload.evaluate_record(record)
    return total / weights.sum()


def error_summary(true_answers: np.ndarray, estimates: np.ndarray) -> dict[str, float]:
    """Max, mean and root-mean-square absolute error over the positive queries."""
    error = np.abs(np.asarray(estimates, dtype=float) - np.asarray(true_answers, dtype=float))
    return {
        "max_error": float(error.max()),
        "mean_error": float(error.mean()),
        "rmse": float(np.sqrt(np.mean(error**2))),
    }


def per_marginal_max_error(workload: Workload, true_answers: np.ndarray, estimates: np.ndarray) -> np.ndarray:
    """Largest absolute error within each marginal, shape ``(M,)``."""
    error = np.abs(np.asarray(estimates, dtype=float) - np.asarray(true_answers, dtype=float))
    return np.maximum.reduceat(error, workload.marginal_starts[:-1])


def uniform_answers(workload: Workload) -> np.ndarray:
    """Answers of the uniform distribution over the record universe."""
    domain = workload.domain
    sizes = np.where(domain.is_binary, 2, domain.sizes).astype(np.float64)
    attrs = workload.marginals[workload.query_marginal]
    per_attribute = np.where(attrs >= 0, 1.0 / sizes[np.maximum(attrs, 0)], 1.0)
    return per_attribute.prod(axis=1)
