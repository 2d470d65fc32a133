"""The fidelity evaluation against numbers computed by hand on a tiny table.

True table (columns a: 3 values, b: 2 values), four rows: (0,0) (0,1) (1,0) (2,1)
    a: 0.5 0.25 0.25        b: 0.5 0.5
    joint (a,b): (0,0) .25, (0,1) .25, (1,0) .25, (1,1) 0, (2,0) 0, (2,1) .25
Published rows: (0,0) (0,0) (1,1) (1,1)
    a: 0.5 0.5 0            b: 0.5 0.5
    joint: (0,0) .5, (1,1) .5
By hand:
    a: |0| + |.25| + |.25| -> TVD 0.25, worst cell 0.25 at value 1 (the first of the two largest)
    b: TVD 0, worst cell 0
    pair: |.25| + |.25| + |.25| + |.5| + 0 + |.25| = 1.5 -> TVD 0.75
    workload = all 1-way queries (a=0, a=1, a=2, b=0, b=1): errors 0 .25 .25 0 0
        -> max 0.25, mean 0.1, RMSE sqrt(2 * .0625 / 5) = 0.158114
    rows 4, distinct 2, largest multiplicity 2, largest share 0.5
    headline = max(0.25, 0.25, 0.75, 0.25) = 0.75 (the two-way TVD)
Uniform: a 1/3 each -> TVD .5 (1/6 + 1/12 + 1/12) = 1/6; pair 1/6 each -> TVD .5 (4/12 + 2/6) = 1/3.
Zeros: every TVD 0.5 (half the L1 error of a table of zeros); worst a-cell 0.5.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from dq_engine import Dataset, Domain, answer_workload, make_rng
from dq_engine.data.domain import Attribute
from dq_engine.data.workload import all_kway_marginals
from dq_engine.evaluation.fidelity import (
    HEADLINE_FIGURES,
    MAX_PAIRS,
    evaluate_answers,
    evaluate_baselines,
    evaluate_release,
    evaluate_rows,
    fidelity_marginals,
    fidelity_reference,
)

TRUE_ROWS = np.array([[0, 0], [0, 1], [1, 0], [2, 1]])
PUBLISHED = np.array([[0, 0], [0, 0], [1, 1], [1, 1]])


@pytest.fixture
def tiny() -> tuple[Domain, Dataset]:
    domain = Domain((Attribute(name="a", size=3, labels=("x", "y", "z")), Attribute(name="b", size=2)))
    return domain, Dataset.from_codes(domain, TRUE_ROWS)


class NotValueOneOfA:
    """A declared constraint: a != 1."""

    def feasible(self, codes: np.ndarray) -> np.ndarray:
        return codes[:, 0] != 1


def test_published_rows_figures_match_the_hand_computed_ones(tiny):
    domain, data = tiny
    workload = all_kway_marginals(domain, 1)

    evaluation = evaluate_release(data, codes=PUBLISHED, workload=workload, constraints=NotValueOneOfA())
    release = evaluation.results["published rows"]

    np.testing.assert_allclose(release.one_way_tvd, [0.25, 0.0])
    np.testing.assert_allclose(release.one_way_worst_cell, [0.25, 0.0])
    np.testing.assert_array_equal(release.one_way_worst_value, [1, 0])
    np.testing.assert_allclose(release.two_way_tvd, [0.75])
    assert release.workload == pytest.approx({"max_error": 0.25, "mean_error": 0.1, "rmse": math.sqrt(0.025)})
    assert (release.rows, release.distinct_rows, release.max_multiplicity) == (4, 2, 2)
    assert release.largest_row_share == 0.5
    assert (release.constraint_violations, release.constraint_violation_share) == (2, 0.5)
    assert release.headline == pytest.approx(0.75)
    assert release.headline_figure == "max_two_way_tvd"
    summary = release.as_dict(evaluation.reference.marginals)
    assert summary["worst_one_way_cell_at"] == {"column": "a", "value": 1, "value_label": "y"}
    assert summary["max_two_way_tvd_at"] == ["a", "b"]
    assert summary["mean_one_way_tvd"] == pytest.approx(0.125)


def test_baselines_get_the_figures_that_apply(tiny):
    domain, data = tiny
    workload = all_kway_marginals(domain, 1)
    noisy = np.array([0.5, 0.2, 0.3, 0.6, 0.4])  # errors 0 .05 .05 .1 .1

    evaluation = evaluate_release(data, codes=PUBLISHED, workload=workload, noisy_answers={"noisy marginals": noisy})
    results = evaluation.results

    assert list(results) == ["published rows", "zeros", "uniform", "noisy marginals"]
    uniform = results["uniform"]
    np.testing.assert_allclose(uniform.one_way_tvd, [1 / 6, 0.0])
    np.testing.assert_allclose(uniform.two_way_tvd, [1 / 3])
    assert uniform.workload["max_error"] == pytest.approx(1 / 6)
    zeros = results["zeros"]
    np.testing.assert_allclose(zeros.one_way_tvd, [0.5, 0.5])
    np.testing.assert_allclose(zeros.one_way_worst_cell, [0.5, 0.5])
    assert zeros.workload["max_error"] == 0.5
    answers_only = results["noisy marginals"]
    assert answers_only.one_way_tvd is None and answers_only.two_way_tvd is None and answers_only.rows is None
    assert answers_only.workload["max_error"] == pytest.approx(0.1)
    assert answers_only.headline == pytest.approx(0.1)
    assert answers_only.headline_figure == "workload_max_error"
    for baseline in (zeros, uniform, answers_only):
        assert baseline.distinct_rows is None and baseline.constraint_violations is None


def test_no_constraints_and_no_workload_report_none(tiny):
    _domain, data = tiny
    release = evaluate_release(data, codes=PUBLISHED).results["published rows"]
    assert release.constraint_violations is None and release.constraint_violation_share is None
    assert release.workload is None
    assert release.figures()["workload_max_error"] is None
    assert release.headline == pytest.approx(0.75)


def test_a_weighted_distribution_counts_records_with_positive_weight(tiny):
    _domain, data = tiny
    reference = fidelity_reference(data)
    records = np.array([[0, 0], [2, 1], [1, 1]])
    weights = np.array([3.0, 1.0, 0.0])  # a: .75 0 .25 -> TVD .5 (.25 + .25), worst .25 at value 0

    result = evaluate_rows(reference, records, weights, label="synthetic", constraints=NotValueOneOfA())

    np.testing.assert_allclose(result.one_way_tvd, [0.25, 0.25])  # b: .75 .25 against .5 .5
    assert result.one_way_worst_value[0] == 0
    assert (result.rows, result.max_multiplicity) == (None, None)
    assert result.distinct_rows == 2
    assert result.largest_row_share == 0.75
    assert result.constraint_violations == 0  # the only a = 1 record has weight 0


def test_the_workload_figures_use_given_answers_when_the_release_answers_with_an_estimator(tiny):
    domain, data = tiny
    workload = all_kway_marginals(domain, 1)
    reference = fidelity_reference(data, workload=workload)
    exact = answer_workload(data, workload)

    result = evaluate_rows(reference, PUBLISHED, label="published rows", workload_answers=exact)

    assert result.workload["max_error"] == 0.0
    assert result.one_way_tvd[0] == pytest.approx(0.25)  # the rows themselves are still scored
    assert evaluate_answers(reference, exact, label="exact").headline == 0.0


def test_the_release_equal_to_the_truth_scores_zero_everywhere(tiny):
    domain, data = tiny
    evaluation = evaluate_release(data, codes=TRUE_ROWS[::-1], workload=all_kway_marginals(domain, 2))
    release = evaluation.results["published rows"]
    assert release.headline == 0.0
    assert all(value == 0.0 for name, value in release.figures().items() if name in HEADLINE_FIGURES)


def test_sparse_binary_truth_gives_the_same_tables_as_its_codes():
    domain = Domain.binary(6)
    rng = make_rng(3)
    bits = rng.random((200, 6)) < 0.4
    codes = bits.astype(np.int64)
    published = (rng.random((50, 6)) < 0.5).astype(np.int64)

    from_codes = evaluate_rows(fidelity_reference(Dataset.from_codes(domain, codes)), published, label="r")
    from_bits = evaluate_rows(fidelity_reference(Dataset.from_sparse(domain, sp.csc_array(bits))), published, label="r")

    np.testing.assert_allclose(from_bits.one_way_tvd, from_codes.one_way_tvd, atol=1e-12)
    np.testing.assert_allclose(from_bits.two_way_tvd, from_codes.two_way_tvd, atol=1e-12)
    assert len(from_codes.two_way_tvd) == 15


def test_wide_schemas_evaluate_a_public_sample_of_pairs():
    domain = Domain.binary(70)  # 2,415 pairs > 2,000
    marginals = fidelity_marginals(domain)
    again = fidelity_marginals(domain)

    assert marginals.n_pairs_total == 2415 and len(marginals.pairs) == MAX_PAIRS
    assert marginals.sampled
    np.testing.assert_array_equal(marginals.pairs, again.pairs)  # a fixed public seed: same pairs every time
    assert "public sample of 2,000 of the 2,415 pairs" in marginals.rule
    narrow = fidelity_marginals(Domain.binary(63))  # 1,953 pairs: all of them
    assert not narrow.sampled and narrow.rule == "all 1,953 pairs of columns"


def test_baselines_without_a_workload_have_no_workload_figures(tiny):
    _domain, data = tiny
    zeros, uniform = evaluate_baselines(fidelity_reference(data))
    assert zeros.workload is None and uniform.workload is None
    assert uniform.headline == pytest.approx(1 / 3)


def test_rows_given_as_records_and_counts_score_exactly_as_the_rows_themselves(tiny):
    domain, data = tiny
    reference = fidelity_reference(data, workload=all_kway_marginals(domain, 2))
    records = np.array([[0, 0], [1, 1], [0, 0], [2, 0]])  # a record twice, one never published
    counts = np.array([1, 2, 1, 0])
    rows = np.repeat(records, counts, axis=0)

    compact = evaluate_rows(reference, records, counts=counts, label="r", constraints=NotValueOneOfA())
    expanded = evaluate_rows(reference, rows, label="r", constraints=NotValueOneOfA())

    assert compact.figures() == expanded.figures()
    assert (compact.rows, compact.distinct_rows, compact.max_multiplicity) == (4, 2, 2)
    assert compact.constraint_violations == expanded.constraint_violations == 2
    for mine, theirs in zip(compact.tables, expanded.tables, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    with pytest.raises(ValueError, match="not both"):
        evaluate_rows(reference, records, np.ones(4), counts=counts, label="r")
