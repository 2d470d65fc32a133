r"""The data player's best-response problem.

Gaboardi, Arias, Hsu, Roth & Wu 2014, "Dual Query: Practical Private Query Release for High Dimensional Data" §5;
Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release" §6.

Given sampled queries ``q̂_1..q̂_s`` (conjunctions and negated conjunctions), the best response is
``argmax_x Σ_i q̂_i(x)`` over valid records ``x`` (one bit per one-hot block): a weighted MAX-CSP.
Duplicate samples are merged into integer weights. An optional linear term ``Σ_j c_j x_j`` carries FEM's
perturbation ``-<x, σ>`` (Vietri et al. 2020, Algorithm 2) or sepFEM's separator weights.

Only the *touched* attributes (those with a bit in some clause or a non-zero linear coefficient) are
decision variables; the others are *free* (paper §6.4) and are set by a :mod:`free-attribute policy
<dq_engine.oracle.free_attributes>`.

With public :class:`~dq_engine.data.constraints.Constraints` the maximum is taken over the *feasible* records only:
the attributes linked to the touched ones through rules (:attr:`BestResponseProblem.variable_attributes`)
become decision variables too, and every record the oracles return breaks no rule. The constraints must carry a
witness (a feasible record, :func:`dq_engine.oracle.feasible.with_witness`): it is the start and fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.domain import Domain
from dq_engine.data.workload import Workload
from dq_engine.errors import ConfigError
from dq_engine.privacy.mw import SampledQueries

__all__ = ["BestResponseProblem", "problem_from_samples"]


@dataclass(frozen=True, eq=False)
class BestResponseProblem:
    """A weighted MAX-CSP over a domain's bit encoding.

    Attributes:
        domain: Public domain (one-hot blocks are exactly-one constraints).
        clause_bits: Bits of each clause, shape ``(C, kmax)``, padded with -1.
        clause_negated: True for a negated conjunction (satisfied unless all its bits are 1).
        clause_weight: Non-negative weight of each clause (integer counts for DualQuery).
        linear: Optional coefficient per bit, shape ``(n_bits,)``; adds ``Σ_j linear_j x_j``.
        constraints: Optional public rules (with a witness); the best response is taken over feasible records.
    """

    domain: Domain
    clause_bits: np.ndarray
    clause_negated: np.ndarray
    clause_weight: np.ndarray
    linear: np.ndarray | None = None
    constraints: Constraints | None = None

    def __post_init__(self) -> None:
        if self.constraints is not None:
            if self.constraints.domain != self.domain:
                raise ConfigError("the constraints and the best-response problem are over different domains")
            if self.constraints.witness is None:
                raise ConfigError(
                    "constraints passed to the oracle need a witness: call dq_engine.oracle.feasible.with_witness"
                )

    @property
    def n_clauses(self) -> int:
        """Number of distinct clauses."""
        return int(self.clause_bits.shape[0])

    @cached_property
    def clause_size(self) -> np.ndarray:
        """Number of literals of each clause."""
        return (self.clause_bits >= 0).sum(axis=1)

    @cached_property
    def incidence(self) -> tuple[np.ndarray, np.ndarray]:
        """Flattened (clause, bit) pairs of every literal."""
        rows, cols = np.nonzero(self.clause_bits >= 0)
        return rows.astype(np.int64), self.clause_bits[rows, cols].astype(np.int64)

    @cached_property
    def touched_attributes(self) -> np.ndarray:
        """Sorted indices of attributes that appear in a clause or in the linear term."""
        touched = np.zeros(len(self.domain), dtype=bool)
        _, bits = self.incidence
        touched[self.domain.bit_attribute[bits]] = True
        if self.linear is not None:
            touched[self.domain.bit_attribute[np.nonzero(self.linear)[0]]] = True
        return np.nonzero(touched)[0]

    @cached_property
    def variable_attributes(self) -> np.ndarray:
        """The touched attributes plus those linked to them through rules (:meth:`Constraints.closure`).

        These are CP-SAT's decision variables: every rule either lies inside them (a model constraint) or
        involves only attributes held at a feasible record's values.
        """
        if self.constraints is None or len(self.constraints) == 0:
            return self.touched_attributes
        return self.constraints.closure(self.touched_attributes)

    @property
    def clauses_per_touched_bit(self) -> float:
        """Distinct clauses per bit of a touched attribute: the density that decides how hard CP-SAT finds it."""
        touched_bits = int(sum(self.domain.attributes[a].n_bits for a in self.touched_attributes))
        return self.n_clauses / max(1, touched_bits)

    def needed_attributes(self, record_bits: np.ndarray) -> np.ndarray:
        """Sorted attributes whose values ``record_bits`` must keep for every clause it satisfies to stay satisfied.

        A satisfied conjunction needs all its attributes; a satisfied negated conjunction needs only one
        *witness*, an attribute whose literal is off (kept at its value, the literal stays off). Witnesses are
        chosen greedily, as in set cover: an off literal of an attribute a satisfied conjunction already needs
        first, then the off literal shared by the most satisfied negated clauses, ties by bit index. Changing
        any other attribute cannot unsatisfy a satisfied clause, so every record that agrees with
        ``record_bits`` on the returned attributes has at least its objective (the linear term's attributes
        are always needed).

        Args:
            record_bits: One bit record, shape ``(n_bits,)``.
        """
        record_bits = np.asarray(record_bits, dtype=bool)
        rows, bits = self.incidence
        full = self._all_on(record_bits[None, :])[0]
        attribute = self.domain.bit_attribute
        needed = np.zeros(len(self.domain), dtype=bool)
        positive = ~self.clause_negated[rows] & full[rows]
        needed[attribute[bits[positive]]] = True
        if self.linear is not None:
            needed[attribute[np.nonzero(self.linear)[0]]] = True
        # off literals of satisfied negated conjunctions, one witness per clause
        candidate = self.clause_negated[rows] & ~full[rows] & ~record_bits[bits]
        clause, bit = rows[candidate], bits[candidate]
        if len(clause):
            score = np.bincount(bit, minlength=self.domain.n_bits)[bit] + needed[attribute[bit]] * (len(clause) + 1)
            order = np.lexsort((bit, -score, clause))  # per clause: best score first, ties by bit index
            first = np.ones(len(order), dtype=bool)
            first[1:] = clause[order][1:] != clause[order][:-1]
            needed[attribute[bit[order][first]]] = True
        return np.nonzero(needed)[0]

    def _all_on(self, records: np.ndarray) -> np.ndarray:
        """Whether every literal of each clause is on, per record: shape ``(r, C)`` for bool records ``(r, n_bits)``."""
        rows, bits = self.incidence
        on = np.stack([np.bincount(rows, weights=record[bits], minlength=self.n_clauses) for record in records])
        return on.astype(np.int64) == self.clause_size

    def objective(self, records: np.ndarray) -> np.ndarray:
        """Objective of each bit record, shape ``(r,)`` for records ``(r, n_bits)`` (or scalar for one)."""
        records = np.asarray(records, dtype=bool)
        single = records.ndim == 1
        records = np.atleast_2d(records)
        full = self._all_on(records)
        satisfied = np.where(self.clause_negated, ~full, full)
        value = satisfied.astype(float) @ self.clause_weight.astype(float)
        if self.linear is not None:
            value = value + records.astype(float) @ self.linear
        return value[0] if single else value


def problem_from_samples(
    workload: Workload,
    samples: SampledQueries,
    *,
    linear: np.ndarray | None = None,
    constraints: Constraints | None = None,
) -> BestResponseProblem:
    """Merge sampled queries into a weighted clause set (duplicates become integer weights).

    ``constraints`` (with a witness) restricts the best response to feasible records.
    """
    index, negated, count = samples.distinct()
    columns = workload.query_bits
    sentinel = workload.domain.n_bits
    bits = np.stack([c[index] for c in columns], axis=1).astype(np.int64)
    bits[bits == sentinel] = -1
    return BestResponseProblem(
        domain=workload.domain,
        clause_bits=bits,
        clause_negated=negated,
        clause_weight=count,
        linear=linear,
        constraints=constraints,
    )
