"""The query player's exponential mechanism draws from exp(ε n e / 2) over the 2N signed queries."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dq_engine import make_rng
from dq_engine.errors import ConfigError
from dq_engine.privacy.exponential_mechanism import SparseSignedSelector, select_by_score, select_signed_query


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


def _active_truth(n_queries: int, active: int, seed: int) -> np.ndarray:
    rng = make_rng(seed)
    truth = np.zeros(n_queries)
    truth[rng.choice(n_queries, size=active, replace=False)] = rng.uniform(0.001, 0.01, size=active)
    return truth


def test_sparse_selection_with_a_public_bound_on_active_answers_matches_the_exponential_mechanism():
    rng = make_rng(4)
    selector = SparseSignedSelector(TRUTH, active_bound=5)
    positions = np.flatnonzero(ESTIMATE)
    draws = [selector.select(positions, ESTIMATE[positions], epsilon=0.5, n=40, rng=rng) for _ in range(20_000)]
    assert _chi_square_p(draws, _exact(TRUTH, ESTIMATE, 0.5, 40)) > 1e-3


def test_zero_block_member_is_uniform_and_never_an_active_or_estimated_query():
    # ε n tiny: every query has nearly the same weight, so most draws land in the zero-score block
    truth = _active_truth(300, 90, seed=5)
    positions = np.sort(make_rng(6).choice(300, size=40, replace=False))  # some of them active too
    values = np.full(40, 0.025)
    selector = SparseSignedSelector(truth)
    rng = make_rng(7)
    chosen = np.array([selector.select(positions, values, epsilon=1e-3, n=10, rng=rng)[0] for _ in range(30_000)])
    excluded = np.union1d(np.flatnonzero(truth), positions)
    zero_block = np.setdiff1d(np.arange(300), excluded)
    member = chosen[np.isin(chosen, zero_block)]
    assert len(member) > 0.5 * len(chosen)
    assert not np.isin(chosen[~np.isin(chosen, zero_block)], zero_block).any()
    # uniform over the zero block: seeded chi-square test, tolerance p > 10⁻³ (fails only on a real bias)
    observed = np.bincount(np.searchsorted(zero_block, member), minlength=len(zero_block))
    assert observed.sum() == len(member) and observed.min() > 0
    assert stats.chisquare(observed).pvalue > 1e-3


def test_a_draws_work_does_not_depend_on_how_many_answers_are_non_zero(monkeypatch):
    """Same rng calls (method and size) and the same array sizes for 1,000 and 3,900 active queries of 4,000."""
    import dq_engine.privacy.exponential_mechanism as module

    original = module.sample_signed_pairs

    def trace(active: int) -> list:
        calls = []

        def recorded(log_weight, count, rng, **kwargs):
            absent = kwargs.get("absent")
            calls.append(("sample", len(log_weight), None if absent is None else len(absent)))
            return original(log_weight, count, rng, **kwargs)

        class _CountingGenerator:
            def __init__(self, generator):
                self._generator = generator

            def __getattr__(self, name):
                method = getattr(self._generator, name)

                def call(*args, **kwargs):
                    result = method(*args, **kwargs)
                    calls.append((name, np.shape(result)))
                    return result

                return call

        monkeypatch.setattr(module, "sample_signed_pairs", recorded)
        selector = SparseSignedSelector(_active_truth(4_000, active, seed=8))
        rng = _CountingGenerator(make_rng(9))
        positions = np.sort(make_rng(10).choice(4_000, size=60, replace=False))
        for _ in range(200):
            selector.select(positions, np.full(60, 1 / 60), epsilon=0.5, n=1_000, rng=rng)
        return calls

    assert trace(1_000) == trace(3_900)


def test_selection_by_score_matches_the_exponential_mechanism():
    scores = np.array([0.0, 0.4, -1.0, 0.4, 2.5])
    rng = make_rng(11)
    draws = np.array([select_by_score(scores, epsilon=2.0, sensitivity=0.5, rng=rng) for _ in range(20_000)])
    weights = np.exp(2.0 * scores / (2 * 0.5))
    expected = weights / weights.sum() * len(draws)
    observed = np.bincount(draws, minlength=len(scores))
    assert float(stats.chisquare(observed, expected).pvalue) > 1e-3  # seeded; fails only on a real bias


def test_selection_by_score_handles_a_huge_score_range_and_refuses_bad_arguments():
    # a log-weight range of 10^6: the best candidate wins, no overflow
    assert select_by_score(np.array([0.0, 1e6, 3.0]), epsilon=1.0, sensitivity=0.5, rng=make_rng(4)) == 1
    with pytest.raises(ConfigError, match="sensitivity"):
        select_by_score(np.array([1.0]), epsilon=1.0, sensitivity=0.0, rng=make_rng(4))
    with pytest.raises(ConfigError, match="at least one candidate"):
        select_by_score(np.array([]), epsilon=1.0, sensitivity=1.0, rng=make_rng(4))
