"""The scale fixes (packed-key dedupe, vectorised encoding, entropy, round timings, packed-bit datasets) are exact.

Each optimised path is compared with the straightforward code it replaced (kept here as the reference):
``numpy.unique(axis=0)`` for row dedupe, the per-attribute loop for one-hot encoding, the explicit
``-Σ p log p`` for the entropy, and the previous ``random_queries`` body for the workload builder.
"""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import Dataset, Domain, DualQueryConfig, OracleConfig, answer_workload, dualquery, make_rng
from dq_engine.data.domain import Attribute
from dq_engine.data.rows import pack_rows, unique_rows
from dq_engine.data.workload import marginal_queries, random_queries
from dq_engine.errors import DomainError
from dq_engine.privacy.mw import QueryDistribution
from tests.budgets import grant_for_tests


def _reference_draws(m: int, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``_distinct_attribute_draws`` as it was (``np.sort`` of the rows)."""
    picks = np.empty((size, k), dtype=np.int64)
    for j in range(k):
        draw = rng.integers(0, m - j, size=size)
        previous = np.sort(picks[:, :j], axis=1)
        for column in range(j):
            draw += draw >= previous[:, column]
        picks[:, j] = draw
    return np.sort(picks, axis=1)


def _reference_random_queries(domain: Domain, k: int, count: int, rng: np.random.Generator):
    """``random_queries`` as it was before packed keys (numpy.unique with axis=0)."""
    m = len(domain)
    collected = np.empty((0, 2 * k), dtype=np.int64)
    while collected.shape[0] < count:
        batch = max(1024, int(1.2 * (count - collected.shape[0])))
        attrs = _reference_draws(m, k, batch, rng)
        upper = np.where(domain.is_binary[attrs], 1, domain.sizes[attrs])
        values = (rng.random(attrs.shape) * upper).astype(np.int64)
        values = np.where(domain.is_binary[attrs], 1, values)
        collected = np.unique(np.concatenate([collected, np.hstack([attrs, values])]), axis=0)
    if collected.shape[0] > count:
        keep = np.sort(rng.choice(collected.shape[0], size=count, replace=False))
        collected = collected[keep]
    attrs, values = collected[:, :k], collected[:, k:]
    marginal_rows, query_marginal = np.unique(attrs, axis=0, return_inverse=True)
    order = np.argsort(query_marginal, kind="stable")
    return marginal_rows, query_marginal.ravel()[order], values[order]


@pytest.mark.parametrize(
    ("radices", "dtype"),
    [
        ([5, 7, 3], np.int64),  # one word
        ([256] * 9, np.uint8),  # 72 bits: two words
        ([66, 3, 11, 23, 10, 6, 2] * 6, np.uint8),  # KDD99-like widths: three words
        ([2**40, 2**40, 9], np.int64),  # one column per word
    ],
)
def test_unique_rows_equals_numpy_unique_axis0_with_counts_and_inverse(radices, dtype):
    rng = make_rng(5)
    radices = np.asarray(radices, dtype=np.int64)
    # few distinct values per column so that duplicates are frequent
    rows = (rng.integers(0, 3, size=(4_000, len(radices))) * (radices - 1) // 2).astype(dtype)
    expected, inverse, counts = np.unique(rows, axis=0, return_counts=True, return_inverse=True)
    got, got_inverse, got_counts = unique_rows(rows, radices, return_counts=True, return_inverse=True)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_counts, counts)
    np.testing.assert_array_equal(got_inverse, inverse.ravel())
    np.testing.assert_array_equal(unique_rows(rows, radices), expected)


def test_packed_words_order_rows_lexicographically():
    rng = make_rng(6)
    radices = np.array([3, 1000, 2, 70, 5])
    rows = (rng.random((500, 5)) * radices).astype(np.int64)
    words = pack_rows(rows, radices)
    by_words = np.lexsort(words.T[::-1])
    by_rows = np.lexsort(rows.T[::-1])
    np.testing.assert_array_equal(rows[by_words], rows[by_rows])


@pytest.mark.parametrize(
    ("domain", "k", "count"),
    [
        (Domain.categorical({"a": 5, "b": 7, "c": 3, "d": 9, "e": 4, "f": 66}), 3, 3_000),
        (Domain.binary(60), 3, 20_000),  # many duplicate draws: several rounds of drawing
        (Domain((Attribute(name="x", size=4), *[Attribute(name=f"f{i}", size=2, binary=True) for i in range(9)])),
         2, 40),
        (Domain.categorical({f"a{i}": 3 + i % 4 for i in range(12)}), 5, 5_000),
        (Domain.categorical({"a": 2, "b": 3}), 1, 4),
    ],
    ids=["categorical", "binary", "mixed", "five-way", "one-way"],
)
def test_random_queries_is_identical_to_the_numpy_unique_version(domain, k, count):
    workload = random_queries(domain, k, count, make_rng(7))
    marginals, query_marginal, values = _reference_random_queries(domain, k, count, make_rng(7))
    np.testing.assert_array_equal(workload.marginals, marginals)
    np.testing.assert_array_equal(workload.query_marginal, query_marginal)
    np.testing.assert_array_equal(workload.query_values, values)


def test_from_codes_keeps_numpy_unique_rows_and_counts():
    domain = Domain.categorical({"a": 3, "b": 300, "c": 2, "d": 70})
    rng = make_rng(8)
    codes = (rng.random((20_000, 4)) ** 3 * domain.sizes).astype(np.int64)
    data = Dataset.from_codes(domain, codes)
    distinct, counts = np.unique(codes.astype(np.uint16), axis=0, return_counts=True)
    assert data.codes.dtype == np.uint16
    np.testing.assert_array_equal(data.codes, distinct)
    np.testing.assert_array_equal(data.counts, counts)


def test_encode_records_matches_the_per_attribute_loop():
    domain = Domain((Attribute(name="x", size=4), *[Attribute(name=f"f{i}", size=2, binary=True) for i in range(5)],
                     Attribute(name="y", size=3)))
    rng = make_rng(9)
    codes = (rng.random((50, len(domain))) * domain.sizes).astype(np.int64)
    expected = np.zeros((50, domain.n_bits), dtype=bool)
    for j, attribute in enumerate(domain.attributes):
        if attribute.binary:
            expected[:, domain.offsets[j]] = codes[:, j] == 1
        else:
            expected[np.arange(50), domain.offsets[j] + codes[:, j]] = True
    np.testing.assert_array_equal(domain.encode_records(codes), expected)


def test_entropy_equals_the_direct_sum_over_both_signs():
    rng = make_rng(10)
    distribution = QueryDistribution(3_000, eta=1.3)
    distribution.update(rng.normal(0.0, 40.0, size=3_000))  # some probabilities underflow to 0
    positive, negative = distribution.probabilities()
    p = np.concatenate([positive, negative])
    p = p[p > 0]
    assert distribution.entropy() == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-10, abs=1e-12)


def test_dualquery_rounds_record_sample_oracle_and_update_times():
    domain = Domain.categorical({"a": 3, "b": 4, "c": 5})
    rng = make_rng(12)
    data = Dataset.from_codes(domain, (rng.random((300, 3)) * domain.sizes).astype(np.int64))
    workload = random_queries(domain, 2, 30, rng)
    config = DualQueryConfig(eta=0.5, samples=20, rounds=3, oracle=OracleConfig(kind="local", local_restarts=2,
                                                                               deterministic=True))
    result = dualquery(data, workload, config, grant=grant_for_tests(), rng=make_rng(13))
    for diagnostics in result.diagnostics:
        assert diagnostics.sample_seconds > 0
        assert diagnostics.oracle_seconds > 0
        assert diagnostics.update_seconds > 0
        assert diagnostics.oracle_seconds + diagnostics.update_seconds <= diagnostics.round_seconds


def _packed(codes: np.ndarray) -> np.ndarray:
    return np.packbits(codes.T.astype(bool), axis=1)


@pytest.mark.parametrize("n", [1, 8, 203])
def test_packed_bit_dataset_answers_like_sparse_storage_and_direct_counts(n):
    rng = make_rng(14)
    domain = Domain.binary(30)
    codes = (rng.random((n, 30)) < rng.random(30)).astype(np.int64)
    packed = Dataset.from_packed_bits(domain, _packed(codes), n)
    sparse = Dataset.from_sparse(domain, codes)
    workloads = [random_queries(domain, 3, 400, rng),
                 marginal_queries(domain, [(0,), (1, 2), (3, 4, 5), (6, 7, 8, 9)])]  # mixed k: padding literals
    for workload in workloads:
        direct = np.array([
            np.all(codes[:, workload.marginals[m][workload.marginals[m] >= 0]] == 1, axis=1).mean()
            for m in workload.query_marginal
        ])
        np.testing.assert_array_equal(answer_workload(packed, workload), answer_workload(sparse, workload))
        np.testing.assert_array_equal(answer_workload(packed, workload), direct)
    np.testing.assert_array_equal(packed.to_codes(), codes)
    for got, expected in zip(packed.one_way_counts(), sparse.one_way_counts(), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_packed_bit_dataset_refuses_wrong_shape_padding_and_categorical_domains():
    domain = Domain.binary(3)
    good = np.zeros((3, 2), dtype=np.uint8)
    assert Dataset.from_packed_bits(domain, good, 10).n == 10
    with pytest.raises(DomainError, match=r"ceil\(n/8\) bytes per row"):
        Dataset.from_packed_bits(domain, np.zeros((3, 1), dtype=np.uint8), 10)
    bad_padding = good.copy()
    bad_padding[1, 1] = 0b0000_0001  # record 15 of a 10-record dataset
    with pytest.raises(DomainError, match="past record n"):
        Dataset.from_packed_bits(domain, bad_padding, 10)
    with pytest.raises(DomainError, match="all binary"):
        Dataset.from_packed_bits(Domain.categorical({"a": 2, "b": 2, "c": 2}), good, 10)


def test_sparse_subset_counting_answers_exactly_like_packed_columns(monkeypatch):
    from dq_engine.data import answers

    rng = make_rng(21)
    domain = Domain.binary(40)
    n = 301
    lengths = rng.integers(0, 9, size=n)  # baskets of 0-8 items, one of them long enough for k = 4 subsets
    codes = np.zeros((n, 40), dtype=np.int64)
    for row, length in enumerate(lengths):
        codes[row, rng.choice(40, size=length, replace=False)] = 1
    sparse = Dataset.from_sparse(domain, codes)
    workloads = [random_queries(domain, 3, 2_000, rng),
                 marginal_queries(domain, [(0,), (1, 2), (3, 4, 5), (6, 7, 8, 9), (5, 3, 1)])]
    expected = [answers._answer_bits(sparse, workload) for workload in workloads]
    monkeypatch.setattr(answers, "_SUBSET_COST", 0)  # always take the subset path...
    monkeypatch.setattr(answers, "_answer_bits", lambda *_: pytest.fail("packed path used"))  # ...and only it
    for workload, reference in zip(workloads, expected, strict=True):
        direct = np.array([
            np.all(codes[:, workload.marginals[m][workload.marginals[m] >= 0]] == 1, axis=1).mean()
            for m in workload.query_marginal
        ])
        np.testing.assert_array_equal(answer_workload(sparse, workload), reference)
        np.testing.assert_array_equal(answer_workload(sparse, workload), direct)


def test_subset_counting_declines_dense_records():
    from dq_engine.data import answers

    rng = make_rng(22)
    domain = Domain.binary(60)
    codes = (rng.random((500, 60)) < 0.5).astype(np.int64)  # ~30 set bits per record: C(30, 3) = 4060 each
    sparse = Dataset.from_sparse(domain, codes)
    assert answers._answer_by_subsets(sparse, random_queries(domain, 3, 200, rng)) is None
