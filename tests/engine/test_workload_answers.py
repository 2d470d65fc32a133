"""Workload builders, exact answers (vs naive loops), domain encoding and dataset validation."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from dq_engine import Dataset, Domain, make_rng
from dq_engine.data.answers import answer_records, answer_workload, error_summary, per_marginal_max_error
from dq_engine.data.workload import Workload, all_kway_marginals, marginal_queries, random_marginals, random_queries
from dq_engine.errors import DomainError, WorkloadError


# ---------------------------------------------------------------------- naive references
def _query_attributes(workload: Workload, i: int) -> tuple[np.ndarray, np.ndarray]:
    row = workload.marginals[workload.query_marginal[i]]
    k = int((row >= 0).sum())
    return row[:k], workload.query_values[i, :k]


def _naive_answers(frame: pd.DataFrame, workload: Workload) -> np.ndarray:
    """Per-query loop with pandas: fraction of rows with every fixed attribute at its value."""
    answers = np.empty(len(workload))
    for i in range(len(workload)):
        attributes, values = _query_attributes(workload, i)
        mask = np.ones(len(frame), dtype=bool)
        for a, v in zip(attributes, values, strict=True):
            mask &= (frame.iloc[:, a] == v).to_numpy()
        answers[i] = mask.mean()
    return answers


def _mixed_workload(domain: Domain) -> Workload:
    """Every 1-, 2- and 3-way marginal (mixed k in one workload)."""
    sets = [s for k in (1, 2, 3) for s in itertools.combinations(range(len(domain)), k)]
    return marginal_queries(domain, sets)


# ---------------------------------------------------------------------- answers
def test_answer_workload_equals_naive_loop_on_categorical_data(mixed_domain):
    rng = make_rng(1)
    codes = np.stack([rng.integers(0, size, size=257) for size in mixed_domain.sizes], axis=1)
    data = Dataset.from_codes(mixed_domain, codes)
    workload = _mixed_workload(mixed_domain)
    expected = _naive_answers(pd.DataFrame(codes), workload)
    np.testing.assert_allclose(answer_workload(data, workload), expected, rtol=0, atol=1e-12)
    assert data.n == 257 and len(data.codes) < 257  # rows were deduplicated with multiplicities


def test_answer_workload_equals_naive_loop_on_random_queries(categorical_domain, toy_data):
    workload = random_queries(categorical_domain, 3, 60, make_rng(2))
    expected = _naive_answers(pd.DataFrame(toy_data.to_codes()), workload)
    np.testing.assert_allclose(answer_workload(toy_data, workload), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1, 8, 203])  # 203: not a multiple of 8, so packed columns carry padding
def test_answer_workload_equals_naive_loop_on_sparse_binary_data(n):
    domain = Domain.binary(10)
    matrix = sp.random_array((n, 10), density=0.35, rng=make_rng(3), format="csr")
    dense = (matrix.toarray() > 0).astype(np.int64)
    data = Dataset.from_sparse(domain, dense)
    assert data.is_sparse and data.n == n
    workload = _mixed_workload(domain)
    expected = _naive_answers(pd.DataFrame(dense), workload)
    np.testing.assert_allclose(answer_workload(data, workload), expected, rtol=0, atol=1e-12)


def test_answer_records_equals_naive_loop_small_large_and_weighted(mixed_domain):
    rng = make_rng(5)
    workload = _mixed_workload(mixed_domain)
    for count in (7, 150):  # <= 64 records take the per-record path, more go through a Dataset
        codes = np.stack([rng.integers(0, size, size=count) for size in mixed_domain.sizes], axis=1)
        bits = mixed_domain.encode_records(codes)
        expected = _naive_answers(pd.DataFrame(codes), workload)
        np.testing.assert_allclose(answer_records(workload, bits), expected, atol=1e-12)
    weights = rng.random(count)
    rows = [workload.evaluate_record(b).astype(float) for b in bits]
    weighted = np.average(np.stack(rows), axis=0, weights=weights)
    np.testing.assert_allclose(answer_records(workload, bits, weights), weighted, atol=1e-12)


def test_error_summary_and_per_marginal_max_error(categorical_domain):
    workload = all_kway_marginals(categorical_domain, 1)  # marginals of sizes 3, 3, 4, 4
    truth = np.zeros(len(workload))
    estimate = np.zeros(len(workload))
    estimate[[1, 5, 13]] = [0.2, -0.5, 0.1]
    summary = error_summary(truth, estimate)
    assert summary["max_error"] == 0.5
    assert summary["mean_error"] == pytest.approx(0.8 / 14)
    assert summary["rmse"] == pytest.approx(math.sqrt(0.30 / 14))
    assert per_marginal_max_error(workload, truth, estimate).tolist() == [0.2, 0.5, 0.0, 0.1]


def test_answer_workload_refuses_mismatched_domains(toy_data, binary_domain):
    with pytest.raises(ValueError, match="different domains"):
        answer_workload(toy_data, all_kway_marginals(binary_domain, 1))


# ---------------------------------------------------------------------- builders
def test_random_queries_are_distinct_sensible_and_grouped(mixed_domain):
    workload = random_queries(mixed_domain, 3, 120, make_rng(6))  # of 140 sensible ones
    assert len(workload) == 120
    keys = set()
    for i in range(len(workload)):
        attributes, values = _query_attributes(workload, i)
        assert len(attributes) == 3 and len(set(attributes.tolist())) == 3  # no attribute twice
        assert np.all(np.diff(attributes) > 0)
        assert np.all((values >= 0) & (values < mixed_domain.sizes[attributes]))
        assert np.all(values[mixed_domain.is_binary[attributes]] == 1)  # a binary attribute is queried at 1
        keys.add((tuple(attributes.tolist()), tuple(values.tolist())))
    assert len(keys) == 120  # distinct
    assert np.all(np.diff(workload.query_marginal) >= 0)
    assert len(np.unique(workload.marginals, axis=0)) == workload.n_marginals


def test_random_queries_are_reproducible_for_a_seed_and_differ_across_seeds(categorical_domain):
    first = random_queries(categorical_domain, 2, 40, make_rng(9))
    again = random_queries(categorical_domain, 2, 40, make_rng(9))
    other = random_queries(categorical_domain, 2, 40, make_rng(10))
    for name in ("marginals", "query_marginal", "query_values"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert not (
        np.array_equal(first.marginals, other.marginals) and np.array_equal(first.query_values, other.query_values)
    )


def test_random_queries_can_exhaust_the_sensible_queries_and_refuse_more(categorical_domain):
    total = 3 * 3 + 3 * 4 * 2 + 3 * 4 * 2 + 4 * 4  # e_2(3, 3, 4, 4) = 9 + 12 + 12 + 12 + 12 + 16 = 73
    assert total == 73
    workload = random_queries(categorical_domain, 2, 73, make_rng(11))
    assert len(workload) == 73 and workload.n_marginals == 6
    with pytest.raises(WorkloadError, match=re.escape("count (74) must be in 1..73 (sensible 2-way queries)")):
        random_queries(categorical_domain, 2, 74, make_rng(11))


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_all_kway_marginal_counts_match_combinatorics(mixed_domain, k):
    workload = all_kway_marginals(mixed_domain, k)
    per_attribute = np.where(mixed_domain.is_binary, 1, mixed_domain.sizes).tolist()  # a binary bit: one query
    subsets = list(itertools.combinations(range(len(mixed_domain)), k))
    assert workload.n_marginals == math.comb(len(mixed_domain), k) == len(subsets)
    assert len(workload) == sum(math.prod(per_attribute[a] for a in s) for s in subsets)
    assert np.all(workload.ways == k)
    assert np.all(np.diff(workload.marginal_starts) == [math.prod(per_attribute[a] for a in s) for s in
                                                       sorted(subsets, key=lambda s: (len(s), s))])


def test_random_marginals_draw_distinct_attribute_sets_reproducibly(categorical_domain):
    workload = random_marginals(categorical_domain, 2, 4, make_rng(12))
    assert workload.n_marginals == 4 and len({tuple(r) for r in workload.marginals.tolist()}) == 4
    again = random_marginals(categorical_domain, 2, 4, make_rng(12))
    np.testing.assert_array_equal(workload.marginals, again.marginals)


@pytest.mark.parametrize(
    ("marginals", "message"),
    [
        ([(0, 0)], "marginal (0, 0) repeats an attribute; a query fixes each attribute once"),
        ([("a", "c", "a")], "marginal ('a', 'c', 'a') repeats an attribute; a query fixes each attribute once"),
        ([(0, 1), (1, 0)], "a marginal appears twice in the list; give each attribute set once"),
        ([], "give at least one marginal"),
        ([(0, 7)], "marginal (0, 7) refers to an attribute outside the domain"),
    ],
)
def test_marginal_queries_rejects_bad_attribute_sets_with_precise_messages(categorical_domain, marginals, message):
    with pytest.raises(WorkloadError, match=re.escape(message)):
        marginal_queries(categorical_domain, marginals)


def test_marginal_queries_guards_memory():
    domain = Domain.categorical({"x": 100, "y": 100})
    message = "these marginals have 10,000 queries, more than max_queries=999"
    with pytest.raises(WorkloadError, match=re.escape(message)):
        marginal_queries(domain, [("x", "y")], max_queries=999)


def test_evaluate_record_agrees_with_query_definition(mixed_domain):
    workload = _mixed_workload(mixed_domain)
    codes = np.array([2, 1, 1, 0, 1, 1, 0])
    bits = mixed_domain.encode_records(codes[None, :])[0]
    satisfied = workload.evaluate_record(bits)
    for i in range(len(workload)):
        attributes, values = _query_attributes(workload, i)
        assert satisfied[i] == bool(np.all(codes[attributes] == values))


# ---------------------------------------------------------------------- domain and dataset
def test_domain_encode_decode_round_trip(mixed_domain):
    rng = make_rng(14)
    codes = np.stack([rng.integers(0, size, size=50) for size in mixed_domain.sizes], axis=1)
    bits = mixed_domain.encode_records(codes)
    assert bits.shape == (50, 3 + 4 + 5) == (50, mixed_domain.n_bits)
    assert np.all(bits[:, :3].sum(axis=1) == 1) and np.all(bits[:, 3:7].sum(axis=1) == 1)
    np.testing.assert_array_equal(bits[:, 7:], codes[:, 2:] == 1)  # a binary attribute's bit is its value
    np.testing.assert_array_equal(mixed_domain.decode_records(bits), codes)


def test_domain_layout_of_one_hot_blocks(mixed_domain):
    assert mixed_domain.offsets.tolist() == [0, 3, 7, 8, 9, 10, 11]
    assert mixed_domain.bit_attribute.tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 3, 4, 5, 6]
    assert mixed_domain.bit_value.tolist() == [0, 1, 2, 0, 1, 2, 3, 1, 1, 1, 1, 1]


def test_decode_rejects_a_block_without_exactly_one_bit(categorical_domain):
    bits = categorical_domain.encode_records(np.zeros((1, 4), dtype=int))
    bits[0, 1] = True  # attribute 'a' now has two values
    message = "one-hot block of attribute 'a' does not have exactly one bit set"
    with pytest.raises(DomainError, match=re.escape(message)):
        categorical_domain.decode_records(bits)


@pytest.mark.parametrize("bad", [17, -3])
def test_from_codes_rejects_out_of_range_code_naming_the_column_not_the_value(categorical_domain, bad):
    codes = np.zeros((5, 4), dtype=np.int64)
    codes[3, 2] = bad
    with pytest.raises(DomainError, match=re.escape("column 'c' has a code outside 0..3")) as caught:
        Dataset.from_codes(categorical_domain, codes)
    assert str(bad) not in str(caught.value)


def test_from_codes_rejects_wrong_shape_and_empty_data(categorical_domain):
    expected = "with 4 columns (one per attribute), got 2 dimension(s) and 3"
    with pytest.raises(DomainError, match=re.escape(expected)) as c:
        Dataset.from_codes(categorical_domain, np.zeros((5, 3), dtype=int))
    assert "5" not in str(c.value)  # the number of records is not echoed (it can be private)
    with pytest.raises(DomainError, match="the dataset is empty"):
        Dataset.from_codes(categorical_domain, np.zeros((0, 4), dtype=int))


def test_dataset_to_codes_restores_the_multiset(toy_data):
    codes = toy_data.to_codes()
    assert codes.shape == (400, 4)
    again = Dataset.from_codes(toy_data.domain, codes)
    np.testing.assert_array_equal(again.codes, toy_data.codes)
    np.testing.assert_array_equal(again.counts, toy_data.counts)
    assert [c.sum() for c in toy_data.one_way_counts()] == [400] * 4


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Domain.categorical({"x": 2, "y": 0}), "attribute 'y' size (0) must be >= 1"),
        (lambda: Domain.categorical({}), "a domain needs at least one attribute"),
        (lambda: Domain.binary(["x", "x"]), "attribute name 'x' appears twice; names must be unique"),
    ],
)
def test_domain_rejects_invalid_descriptions(build, message):
    with pytest.raises(DomainError, match=re.escape(message)):
        build()


# ---------------------------------------------------------------------- datasets from distinct records
def test_from_distinct_is_from_codes_of_the_rows_the_records_stand_for():
    domain = Domain.categorical({"a": 3, "b": 2, "c": 4})
    rng = make_rng(11)
    rows = np.column_stack([rng.integers(0, s, 2_000) for s in (3, 2, 4)])
    reference = Dataset.from_codes(domain, rows)
    shuffled = rng.permutation(reference.codes.shape[0])
    # the records in another order, one of them split in two entries (a GROUP BY could give both)
    codes = np.concatenate([reference.codes[shuffled], reference.codes[shuffled[:1]]]).astype(np.int64)
    counts = np.concatenate([reference.counts[shuffled], [0]]).astype(np.int64)
    counts[0] -= 1
    counts[-1] = 1
    built = Dataset.from_distinct(domain, codes, counts)
    assert built.n == reference.n == 2_000
    np.testing.assert_array_equal(built.codes, reference.codes)
    assert built.codes.dtype == reference.codes.dtype
    np.testing.assert_array_equal(built.counts, reference.counts)


@pytest.mark.parametrize("counts", [np.array([1, 0]), np.array([1]), np.array([3, -1])])
def test_from_distinct_refuses_counts_that_are_not_one_positive_number_per_record(counts):
    domain = Domain.categorical({"a": 2, "b": 2})
    with pytest.raises(DomainError, match="one positive number of rows per distinct record"):
        Dataset.from_distinct(domain, np.array([[0, 1], [1, 1]]), counts)


def test_from_distinct_refuses_an_empty_table_and_out_of_range_codes_like_from_codes():
    domain = Domain.categorical({"a": 2, "b": 2})
    with pytest.raises(DomainError, match="empty"):
        Dataset.from_distinct(domain, np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64))
    with pytest.raises(DomainError, match=r"column 'b' has a code outside 0\.\.1"):
        Dataset.from_distinct(domain, np.array([[0, 2]]), np.array([5]))
