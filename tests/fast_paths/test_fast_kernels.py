"""The optimised MW and evaluation kernels give the same results as the straightforward formulas."""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import Domain, make_rng
from dq_engine.data.domain import Attribute
from dq_engine.data.workload import Workload, all_kway_marginals, marginal_queries, random_queries
from dq_engine.privacy.mw import QueryDistribution


def _direct_evaluate(workload: Workload, record_bits: np.ndarray) -> np.ndarray:
    extended = np.append(record_bits, True)
    result = extended[workload.query_bits[0]].copy()
    for column in workload.query_bits[1:]:
        result &= extended[column]
    return result


def _workloads() -> list[Workload]:
    rng = make_rng(1)
    categorical = Domain.categorical({"a": 5, "b": 7, "c": 3, "d": 9, "e": 4})
    mixed = Domain((Attribute(name="x", size=4), *[Attribute(name=f"f{i}", size=2, binary=True) for i in range(9)]))
    return [
        random_queries(categorical, 3, 300, rng),
        all_kway_marginals(categorical, 2),
        marginal_queries(mixed, [(0,), (1, 2), (0, 3, 4), (5, 6, 7)]),  # mixed k
        random_queries(Domain.binary(40), 3, 2_000, rng),
    ]


@pytest.mark.parametrize("workload", _workloads(), ids=["random3", "all2", "mixed_k", "binary"])
def test_evaluate_record_matches_direct_gathers_for_sparse_and_dense_records(workload):
    rng = make_rng(2)
    domain = workload.domain
    for density in (0.05, 0.5, 0.95):  # dense binary records take the direct path
        for _ in range(10):
            if domain.all_binary:
                codes = (rng.random((1, len(domain))) < density).astype(np.int64)
            else:
                codes = (rng.random((1, len(domain))) * domain.sizes).astype(np.int64)
            bits = domain.encode_records(codes)[0]
            np.testing.assert_array_equal(workload.evaluate_record(bits), _direct_evaluate(workload, bits))


def test_pair_weights_and_samples_equal_the_reference_formula_bit_for_bit():
    rng = make_rng(3)
    distribution = QueryDistribution(5_000, eta=0.7)
    distribution.update(rng.normal(0.0, 3.0, size=5_000))
    magnitude = np.abs(distribution.log_weight)
    reference = np.exp(magnitude - magnitude.max()) * (1.0 + np.exp(-2.0 * magnitude))
    np.testing.assert_array_equal(distribution.pair_weights(), reference)
    drawn = distribution.sample(500, make_rng(4))
    replay = make_rng(4)
    cumulative = np.cumsum(reference)
    index = np.minimum(np.searchsorted(cumulative, replay.random(500) * cumulative[-1], side="right"), 4_999)
    negated = replay.random(500) >= 0.5 * (1.0 + np.tanh(distribution.log_weight[index]))
    np.testing.assert_array_equal(drawn.index, index)
    np.testing.assert_array_equal(drawn.negated, negated)


def test_update_adds_eta_times_payoff_and_keeps_the_payoff_untouched():
    distribution = QueryDistribution(4, eta=0.5)
    payoff = np.array([1.0, -1.0, 0.25, 0.0])
    distribution.update(payoff)
    distribution.update(payoff)
    np.testing.assert_array_equal(distribution.log_weight, [1.0, -1.0, 0.25, 0.0])
    np.testing.assert_array_equal(payoff, [1.0, -1.0, 0.25, 0.0])
