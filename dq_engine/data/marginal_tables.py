"""Cell layout of a workload's marginals, for answering it on weighted record sets.

Every marginal with attributes ``a_1 < ... < a_k`` is a contingency table whose cells are numbered in
C order (``cell = Σ_j code_{a_j} · stride_j``, the last attribute varying fastest). A workload query of the
marginal is one cell; :class:`MarginalIndex` stores the cell of every query so that the answers of any
weighted multiset of records are one weighted ``bincount`` per marginal plus one gather, never a loop over
queries. This is the layout :mod:`dq_engine.data.answers` uses for private data; here it serves the synthetic
side (FEM's per-round samples, MWEM's weighted support, randomized-response output).

Invariants: ``query_cells[m]`` lists the cells of marginal ``m``'s queries in workload order; weights are
normalised inside :meth:`MarginalIndex.answers` (answers are fractions, like ``q(D)``).
"""

from __future__ import annotations

import numpy as np

from dq_engine.data.workload import Workload

__all__ = ["MarginalIndex", "record_cells"]


class MarginalIndex:
    """Strides, cell counts and query cells of every marginal of a workload.

    Args:
        workload: The workload (any mix of 1..5-way marginals, all or some cells of each).
    """

    def __init__(self, workload: Workload) -> None:
        domain = workload.domain
        sizes = domain.sizes
        starts = workload.marginal_starts
        self.workload = workload
        self.attributes: list[np.ndarray] = []
        self.strides: list[np.ndarray] = []
        self.n_cells = np.empty(workload.n_marginals, dtype=np.int64)
        self.query_cells: list[np.ndarray] = []
        self.complete = np.empty(workload.n_marginals, dtype=bool)
        for m in range(workload.n_marginals):
            row = workload.marginals[m]
            attrs = row[row >= 0].astype(np.int64)
            strides = np.ones(len(attrs), dtype=np.int64)
            for i in range(len(attrs) - 2, -1, -1):
                strides[i] = strides[i + 1] * sizes[attrs[i + 1]]
            self.attributes.append(attrs)
            self.strides.append(strides)
            self.n_cells[m] = int(strides[0] * sizes[attrs[0]])
            cells = workload.query_values[starts[m] : starts[m + 1], : len(attrs)] @ strides
            self.query_cells.append(cells.astype(np.int64))
            self.complete[m] = len(cells) == self.n_cells[m] and bool(np.all(cells == np.arange(len(cells))))
        self._cell_to_query: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def n_marginals(self) -> int:
        """Number of marginals ``M``."""
        return len(self.attributes)

    def cells(self, m: int, codes: np.ndarray) -> np.ndarray:
        """Cell of marginal ``m`` that each record (value codes ``(r, m_attrs)``) falls in, shape ``(r,)``."""
        return record_cells(codes, self.attributes[m], self.strides[m])

    def table(self, m: int, cells: np.ndarray, probabilities: np.ndarray | None) -> np.ndarray:
        """Contingency table of marginal ``m`` (fractions) from per-record cells and probabilities.

        Args:
            m: Marginal index.
            cells: Output of :meth:`cells` for the records.
            probabilities: Weight of each record, summing to 1, or None for uniform weights.
        """
        if probabilities is None:
            return np.bincount(cells, minlength=int(self.n_cells[m])) / max(1, len(cells))
        return np.bincount(cells, weights=probabilities, minlength=int(self.n_cells[m]))

    def answers(self, codes: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Answer of every workload query on the weighted records, shape ``(N,)``.

        Args:
            codes: Records as value codes ``(r, m_attrs)``.
            weights: Non-negative weight per record (normalised here), or None for uniform.
        """
        probabilities = None if weights is None else np.asarray(weights, dtype=np.float64) / np.sum(weights)
        out = np.empty(len(self.workload), dtype=np.float64)
        starts = self.workload.marginal_starts
        for m in range(self.n_marginals):
            table = self.table(m, self.cells(m, codes), probabilities)
            out[starts[m] : starts[m + 1]] = table[self.query_cells[m]]
        return out

    def sparse_answers(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Non-zero answers of a small uniform multiset of records: ``(query positions, values)``.

        Costs ``O(r · M)`` instead of ``O(N)``: only the cells the records fall in are looked up.
        """
        r = codes.shape[0]
        positions: list[np.ndarray] = []
        values: list[np.ndarray] = []
        starts = self.workload.marginal_starts
        for m in range(self.n_marginals):
            cells, counts = np.unique(self.cells(m, codes), return_counts=True)
            if self.complete[m]:
                index, found = cells, np.ones(len(cells), dtype=bool)
            else:
                sorted_cells, order = self._lookup(m)
                slot = np.minimum(np.searchsorted(sorted_cells, cells), len(sorted_cells) - 1)
                found = sorted_cells[slot] == cells
                index = order[slot]
            positions.append(starts[m] + index[found])
            values.append(counts[found] / r)
        return np.concatenate(positions), np.concatenate(values)

    def _lookup(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        if m not in self._cell_to_query:
            order = np.argsort(self.query_cells[m], kind="stable")
            self._cell_to_query[m] = (self.query_cells[m][order], order)
        return self._cell_to_query[m]


def record_cells(codes: np.ndarray, attributes: np.ndarray, strides: np.ndarray) -> np.ndarray:
    """Cell of the marginal over ``attributes`` (C-order ``strides``) that each record ``(r, m)`` falls in."""
    flat = codes[:, attributes[0]] * strides[0]  # int64 result (strides are int64) for any code dtype
    for attribute, stride in zip(attributes[1:], strides[1:], strict=True):
        flat += codes[:, attribute] * stride
    return flat
