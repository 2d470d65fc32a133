"""Float costs reach the exact ledger rounded up; the noisy record count uses exact discrete Laplace noise."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dq_engine import Dataset, Domain, ExponentialMechanismEvent, PureDpEvent, ZCDPEvent, make_rng
from dq_engine.privacy.accounting import mwem_costs, rounded_up
from dqrelease.mechanisms import ReleasePlan
from dqrelease.tasks.privacy import ledger_amounts


def _plan(events: list, mode: str = "tight", delta: float = 1e-6) -> ReleasePlan:
    costs = mwem_costs(events, delta)  # paper: basic composition when every step is pure; tight: zCDP
    return ReleasePlan(mechanism="test", n=100, engine_config=None, parameters={}, events=tuple(events), costs=costs,
                       mode=mode)


def test_rounded_up_is_the_next_float_above():
    assert rounded_up(None) is None
    assert rounded_up(0.0) == 0
    assert rounded_up(1.0) == Fraction(math.nextafter(1.0, math.inf)) > 1
    assert rounded_up(0.1) > Fraction(0.1)


def test_a_computed_zcdp_cost_is_charged_above_its_float_and_delta_exactly():
    plan = _plan([ExponentialMechanismEvent(epsilon=0.1, count=30), ZCDPEvent(rho=0.01, count=1)])
    epsilon, delta, rho = ledger_amounts(plan)
    assert epsilon > Fraction(plan.charged.epsilon) and float(epsilon) == math.nextafter(plan.charged.epsilon, 2.0)
    assert rho > Fraction(plan.charged.rho)
    assert delta == Fraction(1e-6)


def test_a_pure_basic_composition_is_charged_as_its_exact_sum():
    events = [PureDpEvent(epsilon=0.1, count=3), PureDpEvent(epsilon=0.7, count=1)]
    plan = _plan(events, mode="paper")  # paper mode, all pure: basic composition
    epsilon, delta, rho = ledger_amounts(plan)
    assert epsilon == 3 * Fraction(0.1) + Fraction(0.7)  # exact, not the float sum rounded either way
    assert delta == 0 and rho is None
    single = _plan([PureDpEvent(epsilon=1.0, count=1)], mode="paper")
    assert ledger_amounts(single)[0] == 1  # a pure ε equal to a cap of 1 still fits it


def test_noisy_record_count_draws_discrete_laplace_noise(monkeypatch):
    from dqrelease.tasks import privacy

    class _Privacy:
        n_epsilon = 0.5
        delta = 1e-6

    class _Config:
        privacy = _Privacy()

    monkeypatch.setattr(privacy, "planning_n", lambda config, noisy: noisy)  # observe the noisy count itself
    data = Dataset.from_codes(Domain.binary(1), np.zeros((1000, 1), dtype=int))
    rng = make_rng(3)
    draws = [privacy._noisy_planning_n(_Config(), data, rng) for _ in range(3000)]
    assert all(isinstance(v, int) for v in draws)
    q = math.exp(-0.5)  # discrete Laplace of scale 2: variance 2q/(1-q)^2
    assert abs(np.mean(draws) - 1000) < 5 * math.sqrt(2 * q / (1 - q) ** 2 / 3000)
    assert abs(np.var(draws) / (2 * q / (1 - q) ** 2) - 1) < 0.15
