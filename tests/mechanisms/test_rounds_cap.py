"""DualQuery's and DQRS's T is capped (``ROUNDS_CAP``); at the cap the table fit takes what they cannot use."""

from __future__ import annotations

import pytest

from dq_engine import Domain, all_kway_marginals
from dq_engine.privacy.accounting import within_target
from dq_engine.privacy.public import PublicQuantities
from dqrelease.mechanisms import MECHANISMS, PlanInputs, plan_mechanism
from dqrelease.mechanisms.dualquery import ROUNDS_CAP
from dqrelease.mechanisms.fit import FIT_SHARE

DOMAIN = Domain.categorical({f"c{i}": 3 for i in range(6)})
WORKLOAD = all_kway_marginals(DOMAIN, 2)


def _plan(name: str, n: int, **keys):
    public = PublicQuantities(n=n, epsilon=1.0, delta=1e-9, domain=DOMAIN, n_queries=len(WORKLOAD),
                              n_marginals=WORKLOAD.n_marginals)
    inputs = PlanInputs(public=public, mode="tight", deterministic=True)
    return plan_mechanism(MECHANISMS[name].keys(**keys), inputs)


@pytest.mark.parametrize("name", ["dualquery", "dqrs"])
def test_a_large_table_gets_the_cap_and_the_fit_takes_the_rest_of_the_target(name):
    plan = _plan(name, 5_000_000)
    assert plan.parameters["rounds"] == ROUNDS_CAP
    assert plan.parameters["fit"]["share"] > FIT_SHARE
    # the whole target is used (within the share's bisection) and never exceeded
    assert within_target(plan.charged.epsilon, 1.0) and plan.charged.epsilon > 0.999
    assert any("cap" in note and "share grew" in note for note in plan.notes), plan.notes


def test_a_table_below_the_cap_is_planned_as_before():
    plan = _plan("dualquery", 48_842)
    assert plan.parameters["rounds"] < ROUNDS_CAP
    assert plan.parameters["fit"]["share"] == FIT_SHARE
    assert not any("share grew" in note for note in plan.notes)


def test_given_rounds_above_the_cap_are_kept():
    plan = _plan("dualquery", 5_000_000, rounds=400, fit={"enabled": False})
    assert plan.parameters["rounds"] == 400


def test_without_the_fit_the_capped_mechanism_charges_only_what_it_uses():
    plan = _plan("dualquery", 5_000_000, fit={"enabled": False})
    assert plan.parameters["rounds"] == ROUNDS_CAP
    assert plan.charged.epsilon < 1.0
