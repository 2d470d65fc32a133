"""Parity queries (DualQuery paper, Appendix A): answers, Theorem A.2, best response, DualQuery."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dq_engine import Dataset, Domain, OracleConfig, answer_workload, make_rng, marginal_queries
from dq_engine.errors import WorkloadError
from dq_engine.mechanisms.parity import (
    ParityConfig,
    ParityWorkload,
    all_parities,
    answer_parities,
    dualquery_parity,
    parity_best_response,
    random_parities,
)
from dq_engine.privacy.mw import SampledQueries
from tests.budgets import grant_for_tests


def _biased_bits(n: int, d: int, seed: int) -> np.ndarray:
    rng = make_rng(seed)
    return rng.random((n, d)) < rng.random(d)


def _naive_even_fraction(bits: np.ndarray, row: np.ndarray) -> float:
    members = row[row >= 0]
    return float((bits[:, members].sum(axis=1) % 2 == 0).mean())


@pytest.mark.parametrize("n", [1, 9, 257])
def test_answer_parities_matches_a_naive_count(n: int):
    bits = _biased_bits(n, 7, seed=n)
    domain = Domain.binary(7)
    workload = all_parities(domain, 3, up_to=True)
    sparse = answer_parities(Dataset.from_sparse(domain, bits), workload)
    naive = np.array([_naive_even_fraction(bits, row) for row in workload.sets])
    np.testing.assert_allclose(sparse, naive, atol=1e-12)


def test_theorem_a2_recovers_every_3_way_conjunction_from_parities():
    bits = _biased_bits(500, 6, seed=1)
    domain = Domain.binary(6)
    data = Dataset.from_sparse(domain, bits)
    parities = all_parities(domain, 3, up_to=True)
    answers = answer_parities(data, parities)
    p = {tuple(int(a) for a in row if a >= 0): 2 * e - 1 for row, e in zip(parities.sets, answers, strict=True)}
    p[()] = 1.0
    triples = list(itertools.combinations(range(6), 3))
    conjunctions = answer_workload(data, marginal_queries(domain, triples))
    for triple, truth in zip(triples, conjunctions, strict=True):
        subsets = [s for size in range(4) for s in itertools.combinations(triple, size)]
        reconstructed = sum((-1) ** len(s) * p[s] for s in subsets) / 8
        assert reconstructed == pytest.approx(truth, abs=1e-12)


def _brute_force(workload: ParityWorkload, samples: SampledQueries) -> float:
    d = len(workload.domain)
    best = -1.0
    for assignment in itertools.product([False, True], repeat=d):
        values = workload.evaluate_record(np.array(assignment))
        satisfied = np.where(samples.negated, ~values[samples.index], values[samples.index])
        best = max(best, float(satisfied.sum()))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_parity_best_response_reaches_the_brute_force_optimum(seed: int):
    rng = make_rng(seed)
    domain = Domain.binary(10)
    workload = all_parities(domain, 3, up_to=True)
    index = rng.integers(0, len(workload), size=60)
    samples = SampledQueries(np.concatenate([index, index[:10]]), rng.random(70) < 0.5)
    response = parity_best_response(workload, samples, OracleConfig(kind="cpsat", num_workers=1), hint=None, seed=1)
    assert response.status == "OPTIMAL"
    assert response.objective == _brute_force(workload, samples)


def test_odd_target_on_three_ones_is_feasible():
    # the printed IP (d in {0, 1}) cannot express |x_S| = 3 with c = 0; ours must find it
    domain = Domain.binary(3)
    workload = ParityWorkload(domain, np.array([[0, 1, 2], [0, -1, -1], [1, -1, -1], [2, -1, -1]]))
    samples = SampledQueries(np.array([0, 1, 2, 3]), np.array([True, True, True, True]))
    response = parity_best_response(workload, samples, OracleConfig(kind="cpsat", num_workers=1), hint=None, seed=0)
    assert response.objective == 4.0
    assert response.bits.tolist() == [True, True, True]


def test_dualquery_over_parities_converges_without_privacy_pressure():
    bits = _biased_bits(2000, 8, seed=3)
    domain = Domain.binary(8)
    data = Dataset.from_sparse(domain, bits)
    workload = random_parities(domain, 2, 20, make_rng(4))
    truth = answer_parities(data, workload)
    config = ParityConfig(eta=0.5, samples=4000, rounds=40, oracle=OracleConfig(kind="cpsat", num_workers=2))
    result = dualquery_parity(data, workload, config, grant=grant_for_tests(), rng=make_rng(5))
    synthetic = np.mean([workload.evaluate_record(r.astype(bool)) for r in result.records], axis=0)
    first_ten = np.mean([workload.evaluate_record(r.astype(bool)) for r in result.records[:10]], axis=0)
    assert np.abs(synthetic - truth).max() < 0.1
    assert np.abs(synthetic - truth).max() < np.abs(first_ten - truth).max()
    assert result.costs["tight"].epsilon > 0


def test_parities_need_binary_attributes():
    with pytest.raises(WorkloadError, match="all binary"):
        all_parities(Domain.categorical({"a": 3, "b": 2}), 2)
