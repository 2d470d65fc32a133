"""The query player's exponential mechanism draws from exp(ε n e / 2) over the 2N signed queries."""

from __future__ import annotations

import numpy as np
from scipy import stats

from dq_engine import make_rng
from dq_engine.privacy.exponential_mechanism import SparseSignedSelector, select_signed_query


def _exact(truth: np.ndarray, estimate: np.ndarray, epsilon: float, n: int) -> np.ndarray:
    error = truth - estimate
    weights = np.exp(0.5 * epsilon * n * np.concatenate([error, -error]))
    return weights / weights.sum()


def _chi_square_p(draws: list[tuple[int, bool]], expected: np.ndarray) -> float:
    n_queries = len(expected) // 2
    keys = np.array([i + n_queries * negated for i, negated in draws])
    observed = np.bincount(keys, minlength=len(expected))
    keep = expected * len(draws) >= 5
    observed = np.append(observed[keep], observed[~keep].sum())
    wanted = np.append(expected[keep], expected[~keep].sum()) * len(draws)
    if wanted[-1] == 0:
        observed, wanted = observed[:-1], wanted[:-1]
    return float(stats.chisquare(observed, wanted).pvalue)


TRUTH = np.array([0.0, 0.0, 0.3, 0.1, 0.0, 0.05, 0.0, 0.0])
ESTIMATE = np.array([0.0, 0.25, 0.1, 0.1, 0.0, 0.0, 0.0, 0.02])


def test_dense_selection_matches_the_exponential_mechanism():
    rng = make_rng(1)
    draws = [select_signed_query(TRUTH, ESTIMATE, epsilon=0.5, n=40, rng=rng) for _ in range(20_000)]
    assert _chi_square_p(draws, _exact(TRUTH, ESTIMATE, 0.5, 40)) > 1e-3  # seeded; fails only on a real bias


def test_sparse_selection_matches_the_exponential_mechanism():
    rng = make_rng(2)
    selector = SparseSignedSelector(TRUTH)
    positions = np.flatnonzero(ESTIMATE)
    draws = [
        selector.select(positions, ESTIMATE[positions], epsilon=0.5, n=40, rng=rng) for _ in range(20_000)
    ]
    assert _chi_square_p(draws, _exact(TRUTH, ESTIMATE, 0.5, 40)) > 1e-3


def test_sparse_selection_handles_a_huge_score_scale():
    selector = SparseSignedSelector(np.array([0.0, 0.9, 0.0]))
    index, negated = selector.select(np.array([0]), np.array([1.0]), epsilon=5.0, n=100_000, rng=make_rng(3))
    # score 0.9 for q_1 and 1.0 for the negation of q_0: the negation of q_0 wins with probability ~1
    assert (index, negated) == (0, True)
