r"""The query player's multiplicative-weights distribution over a negation-closed query class.

Sign convention (used everywhere in dqrelease; it is the one of the DualQuery paper, Gaboardi, Arias, Hsu, Roth & Wu
2014, "Dual Query: Practical Private Query Release for High Dimensional Data", Algorithm 2, and of Vietri, Tian, Bun,
Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release", Algorithm 4):

* payoff ``A(x, q) = q(D) - q(x)`` (paper eq. (1)); the query player maximises it, the data player
  minimises it, i.e. the best response **maximises** the weighted number of satisfied sampled queries;
* update ``Q^{t+1}_q ∝ exp(-η <q, x^t - D>) Q^t_q = exp(η A(x^t, q)) Q^t_q``.

Because ``q̄(x) = 1 - q(x)``, the payoff of a negation is minus the payoff of its query, and starting
from the uniform distribution the log-weight of ``q̄`` is always minus the log-weight of ``q``. We store
one cumulative log-weight ``L_i = η Σ_t (q_i(D) - q_i(x^t))`` per positive query; the class of ``2N``
queries has weights ``exp(L_i)`` (query ``i``) and ``exp(-L_i)`` (its negation).

Sampling is exact and never loops over queries in Python: :func:`dq_engine.privacy.exact_sampling.sample_signed_pairs`
proposes pairs from int64 fixed-point weights ``≥ 2^K cosh(L_i - max|L|)`` (one integer cumulative sum per
round, exact uniform integers and ``searchsorted`` for all ``s`` draws), then picks the sign and accepts or
rejects by comparing a uniform with ``e^{L_i}`` and ``e^{-L_i}`` (float64 only where it cannot decide wrongly,
correctly rounded decimal arithmetic otherwise). The result is drawn from exactly ``Q^t`` as defined by the
float64 log-weights ``L``. Never ``Generator.choice(p=...)`` over millions of entries.
"""

from __future__ import annotations

import numpy as np

from dq_engine.privacy.exact_sampling import pair_weights_into, sample_signed_pairs

__all__ = ["QueryDistribution", "SampledQueries"]


class SampledQueries:
    r"""A multiset of sampled queries: positive query indices and a negation flag per draw.

    Attributes:
        index: Query index of each draw, shape ``(s,)``.
        negated: True where the draw is the negation ``q̄``, shape ``(s,)``.
    """

    __slots__ = ("index", "negated")

    def __init__(self, index: np.ndarray, negated: np.ndarray) -> None:
        self.index = np.asarray(index, dtype=np.int64)
        self.negated = np.asarray(negated, dtype=bool)

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def signed_keys(self) -> np.ndarray:
        """One integer per draw: ``2 i`` for ``q_i`` and ``2 i + 1`` for its negation."""
        return 2 * self.index + self.negated

    def distinct(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct sampled queries with multiplicities: ``(index, negated, count)``."""
        keys, counts = np.unique(self.signed_keys(), return_counts=True)
        return keys // 2, (keys % 2).astype(bool), counts.astype(np.int64)

    def concat(self, other: SampledQueries) -> SampledQueries:
        """Multiset union."""
        return SampledQueries(
            np.concatenate([self.index, other.index]), np.concatenate([self.negated, other.negated])
        )

    def take(self, positions: np.ndarray) -> SampledQueries:
        """Sub-multiset at the given positions."""
        return SampledQueries(self.index[positions], self.negated[positions])


class QueryDistribution:
    """MW distribution ``Q^t`` over ``N`` queries and their negations.

    Args:
        n_queries: Number of positive queries ``N``.
        eta: Learning rate η > 0.
    """

    def __init__(self, n_queries: int, *, eta: float) -> None:
        if n_queries < 1:
            raise ValueError(f"n_queries ({n_queries}) must be >= 1")
        if not eta > 0:
            raise ValueError(f"eta ({eta}) must be > 0")
        self.eta = float(eta)
        self.log_weight = np.zeros(n_queries, dtype=np.float64)
        # two reusable (N,) scratch buffers: a fresh 16 MB array per pass costs more in page faults than
        # the arithmetic itself at N = 2,000,000 (see bench/engine.py)
        self._scratch = (np.empty(n_queries, dtype=np.float64), np.empty(n_queries, dtype=np.float64))
        self._weights = self._scratch[1].view(np.int64)  # the sampler's int64 fixed-point weights

    def update(self, payoff: np.ndarray) -> None:
        """Apply ``L += η · A(x^t, q)`` where ``payoff = q(D) - q(x^t)`` for every positive query."""
        step = np.multiply(payoff, self.eta, out=self._scratch[0])
        self.log_weight += step

    def _pair_weights_into(self, out: np.ndarray, scratch: np.ndarray) -> np.ndarray:
        """Write :meth:`pair_weights` into ``out`` using ``scratch`` (bit-identical, no allocation)."""
        return pair_weights_into(self.log_weight, out, scratch)

    def pair_weights(self) -> np.ndarray:
        r"""Unnormalised weight of each pair ``{q_i, q̄_i}``, ∝ ``cosh(L_i)``, scaled for stability.

        Computed as ``exp(|L| - max|L|) · (1 + exp(-2|L|))``.
        """
        return self._pair_weights_into(np.empty_like(self.log_weight), np.empty_like(self.log_weight))

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Exact probabilities ``(P[q_i], P[q̄_i])`` (for tests and diagnostics; O(N) memory)."""
        shift = np.abs(self.log_weight).max()
        positive = np.exp(self.log_weight - shift)
        negative = np.exp(-self.log_weight - shift)
        total = positive.sum() + negative.sum()
        return positive / total, negative / total

    def entropy(self) -> float:
        r"""Shannon entropy (nats) of the distribution over the ``2N`` queries.

        With ``p_i^± = e^{±L_i - c} / Z`` (``c = max|L|``), ``log p_i^± = ±L_i - c - log Z``, so
        ``H = c + log Z - Σ_i L_i (p_i^+ - p_i^-)``: two exponentials over ``N`` in the scratch buffers, no
        ``2N`` concatenation and no logarithm per query (at N = 2,000,000: 99 ms before, see
        docs/benchmarks.md "Profiles"). Underflowed probabilities contribute 0, as in the direct sum.
        """
        shift = float(np.abs(self.log_weight).max())
        positive, negative = self._scratch
        np.subtract(self.log_weight, shift, out=positive)
        np.exp(positive, out=positive)
        np.negative(self.log_weight, out=negative)
        negative -= shift
        np.exp(negative, out=negative)
        total = float(positive.sum()) + float(negative.sum())
        positive -= negative
        return shift + float(np.log(total)) - float(np.dot(self.log_weight, positive)) / total

    def sample(self, count: int, rng: np.random.Generator) -> SampledQueries:
        """Draw ``count`` independent queries from ``Q^t`` exactly (each draw is one exponential-mechanism draw)."""
        if count < 0:
            raise ValueError(f"count ({count}) must be >= 0")
        index, negated = sample_signed_pairs(self.log_weight, count, rng, buffers=(self._weights, self._scratch[0]))
        return SampledQueries(index, negated)
