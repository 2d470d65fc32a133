"""Private datasets in encoded form.

Two storage layouts, chosen by the domain:

* **codes** (any domain with at least one categorical attribute): an ``(u, m)`` array of value codes of
  the *distinct* rows and an ``(u,)`` array of their multiplicities. Deduplication is exact and makes
  contingency tables cheap (KDD Cup 99 has 494,021 rows but far fewer distinct discretized rows).
* **sparse bits** (every attribute natively binary, e.g. baskets of thousands of items): a
  :class:`scipy.sparse.csc_array` of shape ``(n, d)``; memory is proportional to the number of ones, so
  17,770 attributes x 500,000 rows fit comfortably.

The number of records ``n`` is part of the neighbouring relation (replace-one, ``n`` public): every
sensitivity in the engine is expressed in terms of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dq_engine.domain import Domain
from dq_engine.errors import DomainError
from dq_engine.rows import unique_rows

__all__ = ["Dataset"]


def _code_dtype(domain: Domain) -> np.dtype:
    largest = int(domain.sizes.max())
    return np.dtype(np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else np.uint32)


@dataclass(frozen=True, eq=False)
class Dataset:
    """An encoded private dataset.

    Attributes:
        domain: The public domain.
        n: Number of records (public under the replace-one neighbouring relation).
        codes: Distinct rows as value codes, shape ``(u, m)``, or None for sparse-bit storage.
        counts: Multiplicity of each distinct row, shape ``(u,)``, or None for sparse-bit storage.
        bits: Sparse 0/1 matrix ``(n, d)`` for all-binary domains, or None.
    """

    domain: Domain
    n: int
    codes: np.ndarray | None = None
    counts: np.ndarray | None = None
    bits: sp.csc_array | None = None

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
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != len(domain):
            raise DomainError(f"codes must have shape (n, {len(domain)}), got {codes.shape}")
        if codes.shape[0] == 0:
            raise DomainError("the dataset is empty; DualQuery needs n >= 1 records")
        for j, attribute in enumerate(domain.attributes):
            column = codes[:, j]
            if column.min() < 0 or column.max() >= attribute.size:
                raise DomainError(
                    f"column {attribute.name!r} has a code outside 0..{attribute.size - 1}; "
                    "fix the discretization or the schema's value set"
                )
        compact = np.ascontiguousarray(codes.astype(_code_dtype(domain)))
        # same rows, order and counts as numpy.unique(compact, axis=0), through packed keys (dq_engine.rows)
        distinct, counts = unique_rows(compact, domain.sizes, return_counts=True)
        return cls(domain=domain, n=int(codes.shape[0]), codes=distinct, counts=counts.astype(np.int64))

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
    def from_records(cls, domain: Domain, records: np.ndarray) -> Dataset:
        """Build a dataset from bit records ``(r, n_bits)`` (e.g. a synthetic DualQuery output)."""
        records = np.asarray(records, dtype=bool)
        if domain.all_binary:
            return cls.from_sparse(domain, records)
        return cls.from_codes(domain, domain.decode_records(records))

    @property
    def is_sparse(self) -> bool:
        """True for sparse-bit storage."""
        return self.bits is not None

    def to_codes(self) -> np.ndarray:
        """Expand to one row of codes per record, shape ``(n, m)`` (test and small-data helper)."""
        if self.codes is not None:
            return np.repeat(self.codes, self.counts, axis=0).astype(np.int64)
        return self.bits.toarray().astype(np.int64)

    def one_way_counts(self) -> list[np.ndarray]:
        """Exact per-attribute value counts (private; callers must add noise before release)."""
        if self.codes is not None:
            return [
                np.bincount(self.codes[:, j], weights=self.counts, minlength=a.size)
                for j, a in enumerate(self.domain.attributes)
            ]
        ones = np.asarray(self.bits.sum(axis=0)).ravel().astype(float)
        return [np.array([self.n - c, c]) for c in ones]
