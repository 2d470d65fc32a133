"""bench/independence_gap.py's exact product: every workload answer of the product of the one-way marginals."""

from __future__ import annotations

import numpy as np
import pytest

from bench.independence_gap import product_answers
from dq_engine import Dataset, Domain
from dq_engine.data.workload import all_kway_marginals, concatenate_workloads
from dq_engine.evaluation.fidelity import fidelity_reference


def test_the_product_of_a_dependent_table_is_off_by_its_dependence():
    # columns a (2 values) and b (3 values); a = 1 forces b = 2: P(a=1) = 0.4, P(b=2) = 0.5
    codes = np.array([[0, 0]] * 3 + [[0, 1]] * 2 + [[0, 2]] * 1 + [[1, 2]] * 4)
    domain = Domain.categorical({"a": 2, "b": 3})
    data = Dataset.from_codes(domain, codes)
    workload = concatenate_workloads([all_kway_marginals(domain, 1), all_kway_marginals(domain, 2)])
    reference = fidelity_reference(data, workload=workload)
    answers = product_answers(workload, [np.asarray(t, dtype=np.float64) for t in reference.tables[:2]])
    one_way = answers[workload.ways[workload.query_marginal] == 1]
    assert one_way == pytest.approx(reference.answers[workload.ways[workload.query_marginal] == 1])
    pair = workload.ways[workload.query_marginal] == 2
    values = workload.query_values[pair]
    expected = {(0, 0): 0.6 * 0.3, (0, 1): 0.6 * 0.2, (0, 2): 0.6 * 0.5, (1, 0): 0.4 * 0.3, (1, 1): 0.4 * 0.2,
                (1, 2): 0.4 * 0.5}
    assert answers[pair] == pytest.approx([expected[(int(a), int(b))] for a, b in values])
    # the largest gap: P(a=1, b=2) = 0.4 against 0.4 * 0.5 = 0.2
    assert np.abs(reference.answers - answers).max() == pytest.approx(0.2)


def test_the_product_of_an_independent_table_is_exact():
    codes = np.array([[a, b, c] for a in range(2) for b in range(3) for c in range(2)] * 3)
    domain = Domain.categorical({"a": 2, "b": 3, "c": 2})
    data = Dataset.from_codes(domain, codes)
    workload = all_kway_marginals(domain, 3)
    reference = fidelity_reference(data, workload=workload)
    answers = product_answers(workload, [np.asarray(t, dtype=np.float64) for t in reference.tables[:3]])
    assert np.abs(reference.answers - answers).max() < 1e-12
