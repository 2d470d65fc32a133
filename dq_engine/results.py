"""Results and per-round diagnostics of the synthesizers.

Diagnostics split into *public* fields (solver behaviour, counts of sampled queries, timings; safe for
logs and Prefect artifacts, since they are functions of already-private samples or of public settings)
and *internal* fields prefixed ``internal_`` (computed on the true data: error so far, weight entropy).
Internal fields may go only into the internal error report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dq_engine.data.domain import Domain
from dq_engine.privacy.accounting import ComposedCost, PrivacyEvent

__all__ = ["RoundDiagnostics", "SynthesisResult"]


@dataclass(frozen=True, kw_only=True)
class RoundDiagnostics:
    """What happened in one round.

    Attributes:
        round: 1-based round number.
        sampled: Number of sampled queries used by the oracle this round.
        distinct: Number of distinct sampled queries (clauses after merging duplicates).
        source: Which oracle produced the record (``local``, ``cpsat``, ``fallback``).
        status: CP-SAT status name (``NOT_RUN`` if CP-SAT was not called).
        objective: Objective of the chosen record (weighted satisfied sampled queries).
        bound: CP-SAT bound, if any.
        solver_seconds: CP-SAT wall time.
        local_seconds: Local-search wall time.
        round_seconds: Wall time of the whole round.
        free_attributes: Number of attributes filled by the free-attribute policy.
        sample_seconds: Wall time of drawing this round's samples from ``Q^t`` (0 when the caller did not
            time it, e.g. DQRS's carried samples).
        oracle_seconds: Wall time of the whole best-response call (local search, CP-SAT model build and
            solve, exact objective), 0 for mechanisms without an oracle call.
        update_seconds: Wall time of evaluating the record on every query and updating the MW weights.
        extra: Mechanism-specific public counters (e.g. DQRS accepted / fresh / top-up counts).
        internal_entropy: Entropy of the MW distribution (depends on true answers: internal).
        internal_max_error: Max error of the synthetic data so far on the workload (internal).
        internal_mean_error: Mean error so far (internal).
    """

    round: int
    sampled: int
    distinct: int
    source: str
    status: str
    objective: float
    bound: float | None
    solver_seconds: float
    local_seconds: float
    round_seconds: float
    free_attributes: int
    sample_seconds: float = 0.0
    oracle_seconds: float = 0.0
    update_seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    internal_entropy: float | None = None
    internal_max_error: float | None = None
    internal_mean_error: float | None = None

    def public(self) -> dict[str, Any]:
        """Fields safe to log or publish as progress (no internal_ fields)."""
        return {k: v for k, v in asdict(self).items() if not k.startswith("internal_")}


@dataclass(frozen=True, kw_only=True)
class SynthesisResult:
    """Output of a synthesizer.

    Attributes:
        mechanism: Mechanism name (``dualquery``, ``dqrs``, ...).
        domain: Public domain.
        records: Synthetic records as value codes, shape ``(r, m)``.
        weights: Weight of each record (None = uniform); the synthetic distribution.
        parameters: Public parameters actually used (η, s, T, ...).
        events: Privacy events of the run.
        costs: Composed cost per accounting mode (``"paper"`` and ``"tight"``).
        diagnostics: Per-round diagnostics (empty for one-shot mechanisms).
        neighbouring: The neighbouring relation the costs refer to.
        n: Number of private records (public under the neighbouring relation).
    """

    mechanism: str
    domain: Domain
    records: np.ndarray
    parameters: dict[str, Any]
    events: tuple[PrivacyEvent, ...]
    costs: dict[str, ComposedCost]
    n: int
    weights: np.ndarray | None = None
    diagnostics: tuple[RoundDiagnostics, ...] = ()
    neighbouring: str = "replace-one (n public)"

    def sample_rows(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Expand to ``count`` rows of codes: ``records[sample_index(count, rng)]``."""
        return self.records[self.sample_index(count, rng)]

    def sample_index(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Which record each of ``count`` expanded rows copies, in the rows' (shuffled) order.

        Whole copies of the records, the remainder drawn at random (without replacement, uniformly or by
        weight), so row frequencies match the synthetic distribution as closely as an integer count allows.

        The index is the compact form of :meth:`sample_rows` (the same draws, so the same rows): ``int32`` when
        there are fewer than 2^31 records, 4 bytes a row instead of 8 per row and column, so that a caller can
        expand and use the rows a chunk at a time (``records[index[start:stop]]``).
        """
        r = self.records.shape[0]
        dtype = np.int32 if r <= np.iinfo(np.int32).max else np.int64
        if self.weights is None:
            copies, remainder = divmod(count, r)
            index = np.empty(count, dtype=dtype)
            index[: copies * r].reshape(copies, r)[:] = np.arange(r, dtype=dtype)
            if remainder:
                index[copies * r :] = rng.choice(r, size=remainder, replace=False)
        else:
            p = self.weights / self.weights.sum()
            expected = p * count
            base = np.floor(expected).astype(np.int64)
            remainder = count - int(base.sum())
            if remainder:
                extra = rng.choice(r, size=remainder, replace=False, p=(expected - base) / (expected - base).sum())
                base[extra] += 1
            index = np.repeat(np.arange(r, dtype=dtype), base)
        rng.shuffle(index)
        return index
