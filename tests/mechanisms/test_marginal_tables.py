"""MarginalIndex answers workloads on weighted records exactly like the private-data path."""

from __future__ import annotations

import numpy as np

from dq_engine import Dataset, Domain, answer_workload, make_rng, random_marginals, random_queries
from dq_engine.data.marginal_tables import MarginalIndex


def _records(domain: Domain, count: int, seed: int) -> np.ndarray:
    rng = make_rng(seed)
    return np.stack([rng.integers(0, s, count) for s in domain.sizes], axis=1)


def test_answers_of_uniform_records_match_answer_workload():
    domain = Domain.categorical({"a": 3, "b": 5, "c": 2, "d": 4})
    records = _records(domain, 500, 1)
    for workload in (random_marginals(domain, 3, 3, make_rng(2)), random_queries(domain, 2, 20, make_rng(3))):
        expected = answer_workload(Dataset.from_codes(domain, records), workload)
        np.testing.assert_allclose(MarginalIndex(workload).answers(records), expected, atol=1e-12)


def test_weighted_answers_equal_answers_of_the_repeated_records():
    domain = Domain.categorical({"a": 3, "b": 5, "c": 2})
    records = _records(domain, 40, 4)
    repeats = make_rng(5).integers(1, 4, 40)
    workload = random_marginals(domain, 2, 2, make_rng(6))
    expected = answer_workload(Dataset.from_codes(domain, np.repeat(records, repeats, axis=0)), workload)
    np.testing.assert_allclose(MarginalIndex(workload).answers(records, repeats.astype(float)), expected, atol=1e-12)


def test_sparse_answers_equal_dense_answers_for_complete_and_partial_marginals():
    domain = Domain.categorical({"a": 3, "b": 5, "c": 2, "d": 4})
    records = _records(domain, 7, 7)
    for workload in (random_marginals(domain, 3, 4, make_rng(8)), random_queries(domain, 3, 30, make_rng(9))):
        index = MarginalIndex(workload)
        positions, values = index.sparse_answers(records)
        dense = np.zeros(len(workload))
        dense[positions] = values
        np.testing.assert_allclose(dense, index.answers(records), atol=1e-12)
        assert len(set(positions.tolist())) == len(positions)
