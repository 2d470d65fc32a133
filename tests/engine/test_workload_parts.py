"""Workloads made of several parts: sizes, merging of shared queries, answers, and the wide-schema sample rule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp

from dq_engine import Dataset, Domain, answer_workload, make_rng
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import (
    MAX_KWAY_MARGINALS,
    all_kway_marginals,
    concatenate_workloads,
    downward_closure_sets,
    kway_attribute_sets,
    kway_marginals,
    marginal_queries,
    random_marginals,
    random_queries,
)
from dq_engine.errors import WorkloadError


def _marginal_sets(workload) -> list[tuple[int, ...]]:
    return [tuple(int(a) for a in row if a >= 0) for row in workload.marginals]


def _query_keys(workload) -> set[tuple]:
    sets = _marginal_sets(workload)
    return {
        (sets[m], tuple(int(v) for v in values[: len(sets[m])]))
        for m, values in zip(workload.query_marginal, workload.query_values, strict=True)
    }


def test_disjoint_parts_keep_every_query_and_marginal_and_list_their_sizes(categorical_domain: Domain):
    one = all_kway_marginals(categorical_domain, 1)  # 3 + 3 + 4 + 4 = 14 queries
    two = all_kway_marginals(categorical_domain, 2)  # 9 + 12 + 12 + 12 + 12 + 16 = 73 queries
    three = random_marginals(categorical_domain, 3, 2, make_rng(5))

    combined = concatenate_workloads([one, two, three])

    assert len(combined) == 14 + 73 + len(three)
    assert combined.n_marginals == 4 + 6 + 2
    assert [p.n_queries for p in combined.parts] == [14, 73, len(three)]
    assert [p.n_marginals for p in combined.parts] == [4, 6, 2]
    assert "all 1-way marginals (4 marginals, 14 queries)" in combined.description
    assert "all 2-way marginals (6 marginals, 73 queries)" in combined.description
    # a 1-way marginal stays its own marginal beside the 2-way marginals that contain its column
    assert (0,) in _marginal_sets(combined) and (0, 1) in _marginal_sets(combined)


def test_shared_marginals_and_queries_are_merged_once(categorical_domain: Domain):
    everything = all_kway_marginals(categorical_domain, 2)
    some = random_marginals(categorical_domain, 2, 3, make_rng(1))  # 3 of the same 6 attribute sets
    single = random_queries(categorical_domain, 2, 10, make_rng(2))  # single cells of those marginals

    combined = concatenate_workloads([some, everything, single])

    assert len(combined) == len(everything)
    assert combined.n_marginals == everything.n_marginals
    assert _query_keys(combined) == _query_keys(everything)
    # each part's positions point at its own queries
    sets = _marginal_sets(combined)
    for part, workload in zip(combined.parts, [some, everything, single], strict=True):
        located = set()
        for i in part.positions:
            attributes = sets[combined.query_marginal[i]]
            located.add((attributes, tuple(int(v) for v in combined.query_values[i, : len(attributes)])))
        assert located == _query_keys(workload)
        assert len(set(part.positions.tolist())) == len(workload)


def test_a_repeated_part_adds_nothing(categorical_domain: Domain):
    two = all_kway_marginals(categorical_domain, 2)
    combined = concatenate_workloads([two, two])
    assert len(combined) == len(two)
    np.testing.assert_array_equal(combined.parts[0].positions, combined.parts[1].positions)


def test_order_is_by_way_then_attributes_then_cell_so_complete_marginals_stay_complete(categorical_domain: Domain):
    three = random_marginals(categorical_domain, 3, 2, make_rng(5))
    two, one = all_kway_marginals(categorical_domain, 2), all_kway_marginals(categorical_domain, 1)
    combined = concatenate_workloads([three, two, one])

    sets = _marginal_sets(combined)
    assert sets == sorted(sets, key=lambda s: (len(s), s))
    assert np.all(np.diff(combined.query_marginal) >= 0)
    assert MarginalIndex(combined).complete.all()  # every marginal of these parts has all its cells


@pytest.mark.parametrize("layout", ["codes", "sparse"])
def test_answers_of_the_concatenation_equal_each_parts_answers(
    categorical_domain: Domain, toy_data: Dataset, layout: str
):
    if layout == "codes":
        domain, data = categorical_domain, toy_data
    else:
        domain = Domain.binary(9)
        rng = make_rng(7)
        data = Dataset.from_sparse(domain, sp.csc_array(rng.random((300, 9)) < 0.3))
    parts = [
        all_kway_marginals(domain, 1),
        kway_marginals(domain, 2, rng=make_rng(0)),
        random_marginals(domain, 3, 3, make_rng(4)),
        random_queries(domain, 2, 5, make_rng(6)),
    ]
    combined = concatenate_workloads(parts)

    answers = answer_workload(data, combined)

    for part, workload in zip(combined.parts, parts, strict=True):
        np.testing.assert_array_equal(answers[part.positions], answer_workload(data, workload))
    if layout == "codes":
        np.testing.assert_allclose(MarginalIndex(combined).answers(data.to_codes()), answers, rtol=0, atol=1e-12)


def test_parts_over_different_domains_are_refused(categorical_domain: Domain):
    other = Domain.categorical({"x": 2, "y": 2})
    with pytest.raises(WorkloadError, match="same domain"):
        concatenate_workloads([all_kway_marginals(categorical_domain, 1), all_kway_marginals(other, 1)])
    with pytest.raises(WorkloadError, match="at least one"):
        concatenate_workloads([])


# ---------------------------------------------------------------------- wide schemas: the public sample rule
def test_all_kway_sets_are_enumerated_up_to_the_limit():
    sets, available = kway_attribute_sets(63, 2, rng=make_rng(0))  # C(63, 2) = 1,953 <= 2,000
    assert available == 1953
    assert sets == list(itertools.combinations(range(63), 2))


def test_above_the_limit_a_public_sample_of_distinct_sets_is_drawn_reproducibly():
    sets, available = kway_attribute_sets(300, 2, rng=make_rng(3))
    again, _ = kway_attribute_sets(300, 2, rng=make_rng(3))
    other, _ = kway_attribute_sets(300, 2, rng=make_rng(4))

    assert available == math.comb(300, 2)
    assert len(sets) == MAX_KWAY_MARGINALS == len(set(sets))
    assert all(0 <= a < b < 300 for a, b in sets)
    assert sets == again
    assert sets != other


def test_one_way_sets_are_never_sampled():
    sets, available = kway_attribute_sets(5000, 1, rng=make_rng(0), limit=10)
    assert len(sets) == available == 5000


def test_the_sample_covers_the_attributes_evenly():
    # 2,000 of the 19,900 pairs of 200 attributes: each attribute is in 20 sampled pairs on average; a uniform
    # draw keeps every attribute's count within 20 +- 20 (a biased rule, e.g. the first pairs only, does not)
    sets, _ = kway_attribute_sets(200, 2, rng=make_rng(9))
    counts = np.bincount(np.array(sets).ravel(), minlength=200)
    assert counts.min() >= 1 and counts.max() <= 40


def test_kway_marginals_describes_a_sampled_workload_and_builds_all_its_cells():
    domain = Domain.binary(100)  # 4,950 pairs
    workload = kway_marginals(domain, 2, rng=make_rng(1), max_marginals=50)
    assert workload.n_marginals == 50 and len(workload) == 50  # one query (both bits set) per binary pair
    assert workload.description == "50 of the 4,950 2-way marginals (public sample)"
    small = kway_marginals(Domain.categorical({"a": 2, "b": 3, "c": 2}), 2, rng=make_rng(1))
    assert small.description == "all 2-way marginals"
    assert len(small) == len(marginal_queries(small.domain, [(0, 1), (0, 2), (1, 2)]))


def test_the_downward_closure_holds_every_marginal_inside_a_workload_marginal_once():
    domain = Domain.categorical({"a": 2, "b": 3, "c": 2, "d": 4})
    workload = marginal_queries(domain, [("a", "b", "c"), ("b", "c", "d"), ("a",)])
    sets = downward_closure_sets(workload)
    triples = [(0, 1, 2), (1, 2, 3)]
    expected = {s for triple in triples for k in (1, 2, 3) for s in itertools.combinations(triple, k)}
    assert sets == sorted(expected, key=lambda s: (len(s), s))
    assert len(sets) == 4 + 5 + 2  # (b, c) is inside both triples and counted once
