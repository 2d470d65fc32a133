"""Independent columns keep the public rules without moving the one-way marginals (rule components are raked)."""

from __future__ import annotations

import numpy as np

from dq_engine import IndependentConfig, independent_columns, make_rng
from dq_engine.fit.prior import feasible_particles, projected_one_way_marginals
from tests.budgets import grant_for_tests


def test_every_row_keeps_the_rules_and_the_marginals_stay_the_measured_ones(census_data, census_rules):
    rules = census_rules.with_witness(census_data.codes[0])
    rows = 6_000
    result = independent_columns(census_data, IndependentConfig(rho=50.0, rows=rows), grant=grant_for_tests(),
                                 rng=make_rng(3), constraints=rules)
    assert rules.feasible(result.records).all()
    truth = [c / c.sum() for c in census_data.one_way_counts()]
    for a, target in enumerate(truth):
        share = np.bincount(result.records[:, a], minlength=len(target)) / rows
        # rho = 50: sd sqrt(5 / 50) = 0.3 counts of 600; the raking meets the marginals the rules allow, and the
        # exact counts add at most 1 / 6,000 per value: 0.01 is far above both
        np.testing.assert_allclose(share, target, atol=0.01)


def test_conditioning_the_product_instead_would_move_the_marginals(census_data, census_rules):
    """Why the raking: the product conditioned on the rules loses most of the married children's mass elsewhere."""
    rules = census_rules.with_witness(census_data.codes[0])
    estimates = projected_one_way_marginals(census_data, list(range(5)), kind="gaussian", budget=50.0, rng=make_rng(3))
    priors = [estimates[a] for a in range(5)]
    rng = make_rng(4)
    product = np.stack([rng.choice(len(p), 6_000, p=p) for p in priors], axis=1)
    conditioned = feasible_particles(product, priors, rules, rng)
    child_share = (conditioned[:, 0] == 0).mean()
    ages = census_data.one_way_counts()[0]
    truth = ages[0] / ages.sum()
    assert truth - child_share > 0.05  # children lose mass: conditioning does not keep the marginal (raking does)
