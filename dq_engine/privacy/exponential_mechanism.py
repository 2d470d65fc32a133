r"""The query player's exponential mechanism over a negation-closed query class (FEM, sepFEM, MWEM).

Score of a positive query ``q_i`` against a synthetic distribution ``D̂``: the signed error
``e_i = q_i(D) - q_i(D̂)``; its negation ``q̄_i`` scores ``-e_i`` (Vietri, Tian, Bun, Steinke & Wu 2020, "New
Oracle-Efficient Algorithms for Private Synthetic Data Release", eq. (1) and Algorithm 1:
``S_t(D, q) = q(D) - q(D̂^t)``). Under replace-one neighbours (``n`` public) every score moves by at most
``Δ = 1/n``, so drawing from ``P[q] ∝ exp(ε · S(q) / (2Δ)) = exp(ε n S(q) / 2)`` over the ``2N`` queries is
ε-DP (McSherry & Talwar 2007) and ε²/8-zCDP (bounded range, Cesar & Rogers 2021); Vietri et al. 2020 charges it
ε²/2 (its Lemma 4). The privacy events are :class:`~dq_engine.privacy.accounting.ExponentialMechanismEvent`.

MWEM (Hardt, Ligett & McSherry 2012) scores ``|q(D) - q(D̂)|`` over the positive queries; drawing from the
negation-closed class and forgetting the sign is the same mechanism up to a factor in ``[1, 2]`` in each
pair's weight and has the same sensitivity, so one sampler serves both.

Sampling is exact, as in :mod:`dq_engine.privacy.mw`: :func:`dq_engine.privacy.exact_sampling.sample_signed_pairs` draws
``q_i`` with weight ``exp(c e_i)`` and ``q̄_i`` with weight ``exp(-c e_i)`` (``c = ε n / 2``) from int64
fixed-point proposal weights and an exact acceptance step, i.e. from exactly the exponential mechanism's
distribution for the float64 log-weights ``c e_i``.
:class:`SparseSignedSelector` does the same without a dense score vector when the synthetic answers are sparse
(FEM's ``s`` records touch at most ``s`` cells per marginal): every query with ``q(D) = 0`` and
``q(D̂) = 0`` has score 0 and the same weight, so that block is one entry of the proposal and its member is
then drawn uniformly. Its work per draw does not depend on the data: the non-zero true answers are padded to a
public bound, and the zero block's member is found by one uniform integer and a search, never by rejection
(``docs/engine.md``, "What timing reveals").
"""

from __future__ import annotations

import numpy as np

from dq_engine.errors import ConfigError
from dq_engine.privacy.exact_sampling import sample_signed_pairs

__all__ = ["SparseSignedSelector", "select_by_score", "select_signed_query"]

_NEGATION_MARGIN = 10.0
"""Added to every log-weight of :func:`select_by_score`: a draw lands on a (rejected) negation with probability at
most ``e^-20``."""


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
    index, negated = sample_signed_pairs(log_weight, 1, rng)
    return int(index[0]), bool(negated[0])


def select_by_score(
    scores: np.ndarray, *, epsilon: float, sensitivity: float, rng: np.random.Generator
) -> int:
    """One ε-DP exponential-mechanism draw over candidates with real scores (McSherry & Talwar 2007).

    Candidate ``i`` is drawn with probability proportional to ``exp(ε · scores[i] / (2 · sensitivity))``, exactly:
    the log-weights, shifted to be at least :data:`_NEGATION_MARGIN` (the distribution does not change), go to
    :func:`dq_engine.privacy.exact_sampling.sample_signed_pairs` as the queries of a negation-closed class, and a
    draw that lands on a negation (weight ``e^{-L}`` against ``e^{L}``, ``L >= 10``) is rejected and drawn again,
    which leaves exactly the positive half's distribution. Charged as an
    :class:`~dq_engine.privacy.accounting.ExponentialMechanismEvent` of ``epsilon`` (ε²/8-zCDP, bounded range).

    Args:
        scores: One score per candidate, shape ``(K,)``, finite (private).
        epsilon: Pure ε of the draw (> 0).
        sensitivity: Largest change of any score between neighbouring datasets (> 0, public).
        rng: Generator.

    Returns:
        The index of the drawn candidate.

    Raises:
        ConfigError: If ``epsilon`` or ``sensitivity`` is not positive and finite, or there is no candidate.
    """
    if not (epsilon > 0 and np.isfinite(epsilon)) or not (sensitivity > 0 and np.isfinite(sensitivity)):
        raise ConfigError(f"epsilon ({epsilon}) and sensitivity ({sensitivity}) must be finite and > 0")
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or not len(scores):
        raise ConfigError("the exponential mechanism needs at least one candidate score")
    log_weight = (scores - scores.min()) * (0.5 * epsilon / sensitivity) + _NEGATION_MARGIN
    while True:
        index, negated = sample_signed_pairs(log_weight, 1, rng)
        if not negated[0]:
            return int(index[0])


class SparseSignedSelector:
    """Exact exponential-mechanism draws when both ``q(D)`` and ``q(D̂)`` are mostly zero, in data-independent time.

    The queries with ``q(D) != 0`` (the *active* ones: a private set) are kept in an array padded to
    ``active_bound`` entries, a public bound, so that the work of every :meth:`select` depends only on
    ``active_bound``, the number of estimated positions and ``N``, never on how many answers are non-zero or which.

    Args:
        true_answers: ``q_i(D)`` for every positive query, shape ``(N,)`` (private, kept inside).
        active_bound: Public upper bound on the number of non-zero ``q_i(D)`` (e.g. ``Σ min(cells, n)`` over the
            workload's marginals); ``N`` when None. Arrays of this size are processed in every draw.

    Raises:
        ConfigError: If ``active_bound`` is negative or below the number of non-zero answers (a wrong bound; the
            message does not say by how much).
    """

    def __init__(self, true_answers: np.ndarray, *, active_bound: int | None = None) -> None:
        true_answers = np.asarray(true_answers, dtype=np.float64)
        self.n_queries = int(true_answers.shape[0])
        bound = self.n_queries if active_bound is None else min(int(active_bound), self.n_queries)
        if bound < 0:
            raise ConfigError(f"active_bound ({active_bound}) must be >= 0")
        active = np.flatnonzero(true_answers != 0)
        if len(active) > bound:
            raise ConfigError(f"active_bound ({active_bound}) is below the number of non-zero answers: it is no bound")
        self._bound = bound
        self._active_count = len(active)  # only ever used in arithmetic, never as an array size
        # active positions, then distinct sentinels >= N (sorted, never equal to a query)
        self._active = self.n_queries + np.arange(bound, dtype=np.int64)
        self._active[: len(active)] = active
        self._truth = np.zeros(bound, dtype=np.float64)
        self._truth[: len(active)] = true_answers[active]
        self._padding = np.ones(bound, dtype=bool)
        self._padding[: len(active)] = False

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

        The proposal has ``active_bound + len(positions)`` entries: the padded active queries (score
        ``q(D) − q(D̂)``), then one per estimated position (score ``−q(D̂)``, or absent when the position is active
        and already counted); padding is absent (never drawn). The ``Z`` queries outside both score 0 and form the
        zero block. Its member is computed in every draw, whether or not the block is drawn (that it was would
        tell whether the chosen query's true answer is 0): the ``u``-th integer (``u`` uniform in ``[0, Z)``)
        outside the active and estimated positions, found by a fixed-length bisection (exact and uniform; see
        :meth:`_zero_block_member`).

        Args:
            positions: Distinct query indices where ``q(D̂) != 0``.
            values: ``q(D̂)`` at those positions.
            epsilon: Pure ε of the draw (> 0).
            n: Number of private records.
            rng: Generator.
        """
        positions = np.asarray(positions, dtype=np.int64)
        bound, size = self._bound, len(positions)
        order = np.arange(size, dtype=np.int64)
        slot = np.searchsorted(self._active, positions)
        inside = self._active[np.minimum(slot, max(bound - 1, 0))] == positions if bound else np.zeros(size, bool)
        # every position's estimate goes to its active entry, or to its own entry after the active ones
        log_weight = np.zeros(bound + size, dtype=np.float64)
        log_weight[:bound] = self._truth
        log_weight[np.where(inside, slot, bound + order)] -= values
        log_weight *= 0.5 * epsilon * n
        absent = np.concatenate([self._padding, inside])
        zero_count = self.n_queries - self._active_count - size + int(np.count_nonzero(inside))
        index, negated = sample_signed_pairs(log_weight, 1, rng, zero_pairs=zero_count, absent=absent)
        member = self._zero_block_member(positions, inside, zero_count, rng)
        k, sign = int(index[0]), bool(negated[0])
        if k < bound:
            return int(self._active[k]), sign
        if k < bound + size:
            return int(positions[k - bound]), sign
        return member, sign

    def _zero_block_member(
        self, positions: np.ndarray, inside: np.ndarray, zero_count: int, rng: np.random.Generator
    ) -> int:
        """A uniform query outside the active and estimated positions (-1 when there is none).

        With ``u`` uniform in ``[0, Z)``, the member is the ``u``-th free integer: the smallest ``x`` with
        ``F(x) > u``, where ``F(x)`` counts the free integers in ``[0, x]``: ``x + 1`` minus the active positions
        up to ``x`` minus the estimated ones that are not active. ``F`` needs three ``searchsorted`` on sorted
        arrays of public size (the padded active positions, the estimated positions, their running count of
        active ones), and the bisection always takes ``bit_length(N)`` steps, so the work does not depend on which
        or how many queries are active. No sort of anything private, no rejection.
        """
        u = int(rng.integers(0, max(zero_count, 1)))  # drawn even when Z = 0 (then unused): same draws always
        order = np.argsort(positions, kind="stable")  # the positions are public (the synthetic records')
        sorted_positions = positions[order]
        shared = np.concatenate([[0], np.cumsum(inside[order], dtype=np.int64)])  # active among the first k

        def free_through(x: int) -> int:
            k = int(np.searchsorted(sorted_positions, x, side="right"))
            return x + 1 - int(np.searchsorted(self._active, x, side="right")) - (k - int(shared[k]))

        low, high = 0, max(self.n_queries - 1, 0)
        for _ in range(max(self.n_queries.bit_length(), 1)):  # a fixed number of steps (low == high at the end)
            middle = (low + high) // 2
            if free_through(middle) > u:
                high = middle
            else:
                low = min(middle + 1, high)
        return low if zero_count > 0 else -1
