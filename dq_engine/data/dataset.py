"""Private datasets in encoded form.

Two storage layouts, chosen by the domain:

* **codes** (any domain with at least one categorical attribute): an ``(u, m)`` array of value codes of
  the *distinct* rows and an ``(u,)`` array of their multiplicities. Deduplication is exact and makes
  contingency tables cheap (KDD Cup 99 has 494,021 rows but far fewer distinct discretized rows).
* **sparse bits** (every attribute natively binary, e.g. baskets of thousands of items): a
  :class:`scipy.sparse.csc_array` of shape ``(n, d)``; memory is proportional to the number of ones, so
  17,770 attributes x 500,000 rows fit comfortably.
* **packed bits** (every attribute natively binary and *dense*, e.g. the DualQuery paper's §6.3 synthetic
  data where bit ``i`` is 1 with a probability ``p_i ~ U[0, 1]``): one ``numpy.packbits`` row per attribute,
  ``(d, ceil(n/8))`` bytes. A CSC matrix stores 5 bytes per one, 20 times more at density 1/2 (100,000
  attributes x 50,000 rows: 12.5 GB as CSC, 625 MB packed). Built with :meth:`Dataset.from_packed_bits`.

The number of records ``n`` is part of the neighbouring relation: under ``replace-one`` (the default) ``n``
is public and every sensitivity in the engine is expressed in terms of it; under ``add-remove`` (a release
with a noisy count) ``n`` is private, :attr:`Dataset.neighbouring` says so, and the measurements that can use
the smaller add/remove sensitivities and a noisy total do (:mod:`dq_engine.oracle.free_attributes`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import scipy.sparse as sp

from dq_engine.data.domain import Domain
from dq_engine.data.rows import unique_rows
from dq_engine.errors import DomainError

__all__ = ["Dataset"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """An encoded private dataset.

    Attributes:
        domain: The public domain.
        n: Number of records (public under the replace-one neighbouring relation).
        codes: Distinct rows as value codes, shape ``(u, m)``, or None for sparse-bit storage.
        counts: Multiplicity of each distinct row, shape ``(u,)``, or None for sparse-bit storage.
        bits: Sparse 0/1 matrix ``(n, d)`` for all-binary domains, or None.
        packed: Bit-packed columns ``(d, ceil(n/8))`` ``uint8`` for dense all-binary data, or None.
        neighbouring: ``"replace-one"`` (``n`` public, the default) or ``"add-remove"`` (``n`` private).
    """

    domain: Domain
    n: int
    codes: np.ndarray | None = None
    counts: np.ndarray | None = None
    bits: sp.csc_array | None = None
    packed: np.ndarray | None = None
    neighbouring: Literal["replace-one", "add-remove"] = "replace-one"

    def __post_init__(self) -> None:
        if self.neighbouring not in ("replace-one", "add-remove"):
            raise DomainError(f"neighbouring ({self.neighbouring!r}) must be 'replace-one' or 'add-remove'")

    def with_neighbouring(self, neighbouring: Literal["replace-one", "add-remove"]) -> Dataset:
        """The same records under another neighbouring relation (no copy of the arrays)."""
        return replace(self, neighbouring=neighbouring)

    @classmethod
    def from_codes(cls, domain: Domain, codes: np.ndarray) -> Dataset:
        """Build a dataset from integer codes, one row per record.

        Args:
            domain: Public domain; ``codes[:, j]`` must lie in ``0 .. domain.sizes[j]-1``.
            codes: Array of shape ``(n, m)``.

        Raises:
            DomainError: If the shape is wrong or a code is out of range (the message gives the attribute
                name, never the offending value).
        """
        compact = _checked_codes(domain, codes)
        # same rows, order and counts as numpy.unique(compact, axis=0), through packed keys (dq_engine.data.rows)
        distinct, counts = unique_rows(compact, domain.sizes, return_counts=True)
        return cls(domain=domain, n=int(compact.shape[0]), codes=distinct, counts=counts.astype(np.int64))

    @classmethod
    def from_distinct(cls, domain: Domain, codes: np.ndarray, counts: np.ndarray) -> Dataset:
        """Build a dataset from distinct records and their numbers of rows (e.g. a SQL ``GROUP BY``).

        The result is :meth:`from_codes` of the rows these stand for (each record repeated ``counts`` times):
        the same records in the same canonical order with the same counts, whatever the order of ``codes``.

        Args:
            domain: Public domain; ``codes[:, j]`` must lie in ``0 .. domain.sizes[j]-1``.
            codes: Array of shape ``(u, m)``; a record given twice has its counts added.
            counts: Positive numbers of rows, shape ``(u,)``.

        Raises:
            DomainError: As :meth:`from_codes`, or if ``counts`` has the wrong shape or a count below 1.
        """
        compact = _checked_codes(domain, codes)
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (compact.shape[0],) or (counts.size and int(counts.min()) < 1):
            raise DomainError("counts must hold one positive number of rows per distinct record")
        distinct, inverse = unique_rows(compact, domain.sizes, return_inverse=True)
        merged = np.zeros(distinct.shape[0], dtype=np.int64)
        np.add.at(merged, inverse, counts)
        return cls(domain=domain, n=int(merged.sum()), codes=distinct, counts=merged)

    @classmethod
    def from_sparse(cls, domain: Domain, matrix: sp.sparray | sp.spmatrix | np.ndarray) -> Dataset:
        """Build a dataset of natively binary attributes from a 0/1 matrix ``(n, d)``.

        Raises:
            DomainError: If the domain has a categorical attribute or the width does not match.
        """
        if not domain.all_binary:
            raise DomainError("sparse-bit storage needs a domain whose attributes are all binary")
        matrix = sp.csc_array(matrix, dtype=np.bool_)
        if matrix.shape[1] != domain.n_bits:
            raise DomainError(f"matrix has {matrix.shape[1]} columns, the domain has {domain.n_bits} bits")
        if matrix.shape[0] == 0:
            raise DomainError("the dataset is empty; DualQuery needs n >= 1 records")
        matrix.eliminate_zeros()
        matrix.sort_indices()
        return cls(domain=domain, n=int(matrix.shape[0]), bits=matrix)

    @classmethod
    def from_packed_bits(cls, domain: Domain, packed: np.ndarray, n: int) -> Dataset:
        """Build a dataset of natively binary attributes from bit-packed columns.

        Args:
            domain: All-binary public domain with ``d`` attributes.
            packed: ``uint8`` array ``(d, ceil(n/8))``; row ``j`` is ``numpy.packbits`` of attribute ``j``'s
                column (record ``i`` is bit ``7 - i % 8`` of byte ``i // 8``); bits past ``n`` must be 0.
            n: Number of records.

        Raises:
            DomainError: If the domain has a categorical attribute, or the shape, dtype or padding is wrong.
        """
        if not domain.all_binary:
            raise DomainError("packed-bit storage needs a domain whose attributes are all binary")
        if n < 1:
            raise DomainError("the dataset is empty; DualQuery needs n >= 1 records")
        packed = np.asarray(packed)
        if packed.dtype != np.uint8 or packed.shape != (domain.n_bits, (n + 7) // 8):
            # no row or byte counts in the message: they reveal n, which can be private
            raise DomainError(
                f"packed columns must be uint8 with one row per bit ({domain.n_bits}) and ceil(n/8) bytes per row; "
                f"got {packed.dtype} with {packed.shape[0] if packed.ndim else 0} rows: pack each attribute's "
                "column with numpy.packbits"
            )
        if n % 8 and np.any(packed[:, -1] & np.uint8((1 << (8 - n % 8)) - 1)):
            raise DomainError("packed columns have bits set past record n; pad the last byte with zeros")
        return cls(domain=domain, n=int(n), packed=packed)

    @classmethod
    def from_records(cls, domain: Domain, records: np.ndarray) -> Dataset:
        """Build a dataset from bit records ``(r, n_bits)`` (e.g. a synthetic DualQuery output).

        All-binary domains keep the records as bits: packed columns when at least 1/32 of the bits are set
        (one bit per cell; 2,000 records of 50,000 half-set attributes are 12.5 MB packed, ~0.4 GB as sparse
        indices), sparse otherwise (basket data). Both give the same answers.
        """
        records = np.asarray(records, dtype=bool)
        if domain.all_binary:
            if records.ndim == 2 and records.shape[0] and np.count_nonzero(records) * 32 >= records.size:
                packed = np.packbits(records.T, axis=1)
                if records.shape[1] == domain.n_bits:
                    return cls.from_packed_bits(domain, packed, records.shape[0])
            return cls.from_sparse(domain, records)
        return cls.from_codes(domain, domain.decode_records(records))

    @property
    def is_sparse(self) -> bool:
        """True for sparse-bit storage."""
        return self.bits is not None

    @property
    def is_packed(self) -> bool:
        """True for packed-bit storage."""
        return self.packed is not None

    def to_codes(self) -> np.ndarray:
        """Expand to one row of codes per record, shape ``(n, m)`` (test and small-data helper)."""
        if self.codes is not None:
            return np.repeat(self.codes, self.counts, axis=0).astype(np.int64)
        if self.packed is not None:
            return np.unpackbits(self.packed, axis=1, count=self.n).T.astype(np.int64)
        return self.bits.toarray().astype(np.int64)

    def one_way_counts(self) -> list[np.ndarray]:
        """Exact per-attribute value counts (private; callers must add noise before release)."""
        if self.codes is not None:
            return [
                np.bincount(self.codes[:, j], weights=self.counts, minlength=a.size)
                for j, a in enumerate(self.domain.attributes)
            ]
        if self.packed is not None:
            ones = np.bitwise_count(self.packed).sum(axis=1, dtype=np.int64).astype(float)
        else:
            ones = np.asarray(self.bits.sum(axis=0)).ravel().astype(float)
        return [np.array([self.n - c, c]) for c in ones]


def _checked_codes(domain: Domain, codes: np.ndarray) -> np.ndarray:
    """``codes`` as a contiguous array of the domain's code width, after checking its shape and every code."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        # the number of rows can be private (add/remove neighbours): only the column count is named
        raise DomainError(
            f"codes must be a 2-d array with {len(domain)} columns (one per attribute), "
            f"got {codes.ndim} dimension(s) and {codes.shape[-1] if codes.ndim else 0} columns"
        )
    if codes.shape[0] == 0:
        raise DomainError("the dataset is empty; DualQuery needs n >= 1 records")
    for j, attribute in enumerate(domain.attributes):
        column = codes[:, j]
        if column.min() < 0 or column.max() >= attribute.size:
            raise DomainError(
                f"column {attribute.name!r} has a code outside 0..{attribute.size - 1}; "
                "fix the discretization or the schema's value set"
            )
    return np.ascontiguousarray(codes.astype(domain.code_dtype, copy=False))
