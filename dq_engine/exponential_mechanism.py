r"""The query player's exponential mechanism over a negation-closed query class (FEM, sepFEM, MWEM).

Score of a positive query ``q_i`` against a synthetic distribution ``D̂``: the signed error
``e_i = q_i(D) - q_i(D̂)``; its negation ``q̄_i`` scores ``-e_i`` (seed 004, eq. (1) and Algorithm 1:
``S_t(D, q) = q(D) - q(D̂^t)``). Under replace-one neighbours (``n`` public) every score moves by at most
``Δ = 1/n``, so drawing from ``P[q] ∝ exp(ε · S(q) / (2Δ)) = exp(ε n S(q) / 2)`` over the ``2N`` queries is
ε-DP (McSherry & Talwar 2007) and ε²/8-zCDP (bounded range, Cesar & Rogers 2021); seed 004 charges it
ε²/2 (its Lemma 4). The privacy events are :class:`~dq_engine.accounting.ExponentialMechanismEvent`.

MWEM (Hardt, Ligett & McSherry 2012) scores ``|q(D) - q(D̂)|`` over the positive queries; drawing from the
negation-closed class and forgetting the sign is the same mechanism up to a factor in ``[1, 2]`` in each
pair's weight and has the same sensitivity, so one sampler serves both.

Sampling is exact and two-stage, as in :mod:`dq_engine.mw`: a pair ``{q_i, q̄_i}`` with probability
``∝ cosh(c e_i)`` (``c = ε n / 2``), then the sign with probability ``sigmoid(2 c e_i)``.
:class:`SparseSignedSelector` does the same in ``O(nnz)`` per draw when the synthetic answers are sparse
(FEM's ``s`` records touch at most ``s`` cells per marginal): every query with ``q(D) = 0`` and
``q(D̂) = 0`` has score 0 and the same weight, so that block is sampled uniformly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SparseSignedSelector", "select_signed_query"]


def _pair_weights(log_weight: np.ndarray, shift: float) -> np.ndarray:
    """``exp(|L| - shift) · (1 + exp(-2|L|))`` (∝ cosh L), in place on two buffers."""
    magnitude = np.abs(log_weight)
    correction = np.multiply(magnitude, -2.0)
    np.exp(correction, out=correction)
    correction += 1.0
    magnitude -= shift
    np.exp(magnitude, out=magnitude)
    magnitude *= correction
    return magnitude


def _draw_sign(log_weight: float, rng: np.random.Generator) -> bool:
    """True (negated) with probability ``1 - sigmoid(2L)``."""
    return bool(rng.random() >= 0.5 * (1.0 + np.tanh(log_weight)))


def select_signed_query(
    true_answers: np.ndarray, estimates: np.ndarray, *, epsilon: float, n: int, rng: np.random.Generator
) -> tuple[int, bool]:
    """One ε-DP exponential-mechanism draw from the ``2N`` signed queries (dense scores).

    Args:
        true_answers: ``q_i(D)`` for every positive query, shape ``(N,)`` (private).
        estimates: ``q_i(D̂)``, shape ``(N,)``.
        epsilon: Pure ε of the draw (> 0).
        n: Number of private records (sensitivity ``1/n``).
        rng: Generator.

    Returns:
        ``(index, negated)`` of the selected query.
    """
    log_weight = np.subtract(true_answers, estimates, dtype=np.float64)
    log_weight *= 0.5 * epsilon * n
    shift = max(float(log_weight.max()), -float(log_weight.min()))
    cumulative = np.cumsum(_pair_weights(log_weight, shift))
    index = int(min(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"), len(cumulative) - 1))
    return index, _draw_sign(float(log_weight[index]), rng)


class SparseSignedSelector:
    """Exact exponential-mechanism draws when both ``q(D)`` and ``q(D̂)`` are mostly zero.

    Args:
        true_answers: ``q_i(D)`` for every positive query, shape ``(N,)`` (private, kept inside).
    """

    def __init__(self, true_answers: np.ndarray) -> None:
        true_answers = np.asarray(true_answers, dtype=np.float64)
        self.n_queries = int(true_answers.shape[0])
        self.active = np.flatnonzero(true_answers != 0)
        self.active_truth = true_answers[self.active]
        self._is_active = np.zeros(self.n_queries, dtype=bool)
        self._is_active[self.active] = True

    def select(
        self,
        positions: np.ndarray,
        values: np.ndarray,
        *,
        epsilon: float,
        n: int,
        rng: np.random.Generator,
    ) -> tuple[int, bool]:
        """One draw given sparse estimates ``q(D̂)`` (non-zero only at ``positions``).

        Args:
            positions: Distinct query indices where ``q(D̂) != 0``.
            values: ``q(D̂)`` at those positions.
            epsilon: Pure ε of the draw (> 0).
            n: Number of private records.
            rng: Generator.
        """
        scale = 0.5 * epsilon * n
        error_active = self.active_truth.copy()
        slot = np.searchsorted(self.active, positions)
        inside = (slot < len(self.active)) & (self.active[np.minimum(slot, len(self.active) - 1)] == positions)
        error_active[slot[inside]] -= values[inside]
        extra = positions[~inside]
        error_extra = -values[~inside]
        log_active, log_extra = scale * error_active, scale * error_extra
        shift = max(float(np.abs(log_active).max(initial=0.0)), float(np.abs(log_extra).max(initial=0.0)))
        weights_active = _pair_weights(log_active, shift)
        weights_extra = _pair_weights(log_extra, shift)
        zero_count = self.n_queries - len(self.active) - len(extra)
        zero_total = zero_count * 2.0 * np.exp(-shift)
        cumulative = np.cumsum(np.concatenate([weights_active, weights_extra]))
        total = (cumulative[-1] if len(cumulative) else 0.0) + zero_total
        target = rng.random() * total
        if len(cumulative) and target < cumulative[-1]:
            k = int(min(np.searchsorted(cumulative, target, side="right"), len(cumulative) - 1))
            if k < len(self.active):
                return int(self.active[k]), _draw_sign(float(log_active[k]), rng)
            k -= len(self.active)
            return int(extra[k]), _draw_sign(float(log_extra[k]), rng)
        # the zero-score block: uniform over queries with q(D) = q(D̂) = 0, sign by a fair coin
        taken = set(extra.tolist())
        while True:
            candidate = int(rng.integers(0, self.n_queries))
            if not self._is_active[candidate] and candidate not in taken:
                return candidate, bool(rng.random() < 0.5)
