"""Charges are never below the exact cost of the analysis they name (dq_engine.privacy.accounting, ledger_amounts).

Exact references are independent of the code under test: sums (basic composition, zCDP ρ) are composed with
:class:`fractions.Fraction`; a conversion that needs a transcendental function is evaluated in 60-digit decimal
arithmetic (correctly rounded ``ln``, ``exp``, ``sqrt``: relative error below 10⁻⁵⁵), and the charge must exceed
it by a relative 10⁻⁴⁰, which covers that error. The accounting itself raises such results by a relative 2⁻⁴⁰
(``CONVERSION_MARGIN``), so the charge clears the reference by far more than the reference's error.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from dq_engine import Domain, ExponentialMechanismEvent, PureDpEvent, ZCDPEvent, make_rng, random_marginals
from dq_engine.errors import BudgetExceededError, DQEngineError
from dq_engine.privacy.accounting import (
    CONVERSION_MARGIN,
    advanced_composition_epsilon,
    approx_dp_from_zcdp,
    basic_composition_epsilon,
    zcdp_rho,
    zcdp_to_approx_dp_simple,
)
from dq_engine.privacy.grant import PrivacyGrant
from dq_engine.privacy.public import PublicQuantities
from dqrelease.mechanisms import MECHANISMS, PlanInputs, plan_mechanism
from dqrelease.plan import ledger_amounts

_CONTEXT = Context(prec=60)
_REFERENCE_ERROR = Fraction(1, 10**40)
"""Relative margin above a decimal reference that a charge must clear (the reference is good to 10⁻⁵⁵)."""

_MECHANISMS = ("dualquery", "dqrs", "fem", "sepfem", "mwem", "mwem-particles", "randomized_response")
_FITTED = (("dqrs", "tight"), ("dqrs", "paper"), ("dualquery", "paper"))
"""Plans with the table fit (its events composed with the mechanism's); a few, as each plan bisects the split."""


# ---------------------------------------------------------------------- exact references
def _exact_pure(events) -> Fraction:
    return sum((e.count * Fraction(e.epsilon) for e in events if not isinstance(e, ZCDPEvent)), Fraction(0))


def _exact_rho(events, mode: str) -> Fraction:
    """Σ ρ exactly: ε²/8 per EM draw in tight mode (bounded range), ε²/2 per pure step, ρ of a zCDP event."""
    total = Fraction(0)
    for event in events:
        if isinstance(event, ZCDPEvent):
            total += event.count * Fraction(event.rho)
        elif isinstance(event, ExponentialMechanismEvent) and mode == "tight":
            total += event.count * Fraction(event.epsilon) ** 2 / 8
        else:
            total += event.count * Fraction(event.epsilon) ** 2 / 2
    return total


def _decimal(value: Fraction) -> Decimal:
    return _CONTEXT.divide(Decimal(value.numerator), Decimal(value.denominator))


def _log_inverse(delta: float) -> Decimal:
    return _CONTEXT.minus(_CONTEXT.ln(Decimal(delta)))


def _simple_reference(rho: Fraction, delta: float) -> Decimal:
    """ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    r = _decimal(rho)
    return _CONTEXT.add(r, _CONTEXT.multiply(2, _CONTEXT.sqrt(_CONTEXT.multiply(r, _log_inverse(delta)))))


@cache
def _cks_reference(rho: Fraction, delta: float) -> Decimal:
    """The optimal conversion (Canonne, Kamath & Steinke 2020, Prop. 12): min over α > 1 of
    ``αρ + (ln(1/δ) + (α−1) ln(1−1/α) − ln α)/(α−1)``; every α gives a valid ε, so the value at the α found is
    itself a valid bound that is at least the minimum."""
    r, log_inverse = _decimal(rho), _log_inverse(delta)

    def epsilon_at(t: Decimal) -> Decimal:  # α = 1 + e^t
        step = _CONTEXT.exp(t)
        alpha = _CONTEXT.add(1, step)
        inner = _CONTEXT.ln(_CONTEXT.subtract(1, _CONTEXT.divide(1, alpha)))
        numerator = _CONTEXT.subtract(_CONTEXT.add(log_inverse, _CONTEXT.multiply(step, inner)), _CONTEXT.ln(alpha))
        return _CONTEXT.add(_CONTEXT.multiply(alpha, r), _CONTEXT.divide(numerator, step))

    low, high = Decimal(-40), Decimal(60)  # golden section on t = ln(α − 1): ε(α) is unimodal in α
    ratio = _CONTEXT.divide(_CONTEXT.subtract(_CONTEXT.sqrt(Decimal(5)), 1), 2)
    a = _CONTEXT.subtract(high, _CONTEXT.multiply(ratio, high - low))
    b = _CONTEXT.add(low, _CONTEXT.multiply(ratio, high - low))
    fa, fb = epsilon_at(a), epsilon_at(b)
    for _ in range(220):
        if fa <= fb:
            high, b, fb = b, a, fa
            a = _CONTEXT.subtract(high, _CONTEXT.multiply(ratio, high - low))
            fa = epsilon_at(a)
        else:
            low, a, fa = a, b, fb
            b = _CONTEXT.add(low, _CONTEXT.multiply(ratio, high - low))
            fb = epsilon_at(b)
    return min(fa, fb)


def _advanced_reference(events, delta: float) -> Decimal:
    """Advanced composition as DualQuery's Theorem 4.3 uses it (worst per-draw ε over k draws), plus pure steps."""
    draws = [e for e in events if isinstance(e, ExponentialMechanismEvent) and e.count > 0 and e.epsilon > 0]
    total = _decimal(_exact_pure([e for e in events if isinstance(e, PureDpEvent)]))
    if draws:
        k = sum(e.count for e in draws)
        worst = _decimal(Fraction(max(e.epsilon for e in draws)))
        root = _CONTEXT.sqrt(_CONTEXT.multiply(2 * k, _log_inverse(delta)))
        growth = _CONTEXT.subtract(_CONTEXT.exp(worst), 1)
        total = _CONTEXT.add(total, _CONTEXT.multiply(root, worst))
        total = _CONTEXT.add(total, _CONTEXT.multiply(_CONTEXT.multiply(k, worst), growth))
    return total


def _clears(charged: Fraction, reference: Decimal) -> bool:
    return charged >= Fraction(reference) * (1 + _REFERENCE_ERROR)


def _epsilon_reference(plan) -> Fraction | Decimal:
    cost, events = plan.charged, list(plan.events)
    if cost.delta == 0:
        return _exact_pure(events)
    if "optimal conversion" in cost.method:
        return _cks_reference(_exact_rho(events, "tight"), cost.delta)
    if "Vietri, Tian, Bun, Steinke, Wu 2020" in cost.method:
        return _simple_reference(_exact_rho(events, "paper"), cost.delta)
    if "Theorem 4.3" in cost.method:
        return _advanced_reference(events, cost.delta)
    raise AssertionError(f"no reference for the analysis {cost.method!r}")


# ---------------------------------------------------------------------- plans over a grid
def _keys(name: str, *, fit: bool):
    mechanism = MECHANISMS[name]
    if "fit" not in mechanism.keys.model_fields:
        return mechanism.keys()
    return mechanism.keys() if fit else mechanism.keys(fit={"enabled": False})


def _grid_plans():
    """Every registry mechanism's plan over ε, n, workload sizes and both modes (seeded ε and δ draws).

    ``auto`` is left out: its plan is one of these mechanisms' plans.
    """
    rng = np.random.default_rng(27)
    domain = Domain.categorical({"a": 4, "b": 6, "c": 3, "d": 5, "e": 2, "f": 8})
    workloads = {size: random_marginals(domain, 2, size, make_rng(size)) for size in (3, 12)}
    cells = [
        (name, size, n, mode, False)
        for name in _MECHANISMS for size in workloads for n in (2_000, 30_162, 494_021) for mode in ("tight", "paper")
        for _ in range(3)
    ]
    cells += [(name, 12, 30_162, mode, True) for name, mode in _FITTED]
    plans = []
    for name, size, n, mode, fit in cells:
        workload = workloads[size]
        low, high = (2.0, 12.0) if name == "randomized_response" else (0.2, 4.0)  # RR needs a large ε to be useful
        epsilon = float(np.exp(rng.uniform(np.log(low), np.log(high))))
        delta = float(10.0 ** rng.uniform(-10, -5))
        public = PublicQuantities(n=n, epsilon=epsilon, delta=delta, domain=domain, n_queries=len(workload),
                                  n_marginals=workload.n_marginals)
        inputs = PlanInputs(public=public, mode=mode, deterministic=True, workload=workload)
        try:
            plans.append(plan_mechanism(_keys(name, fit=fit), inputs))
        except DQEngineError:  # the rule refuses this budget (too small for the mechanism)
            continue
    return plans


@pytest.fixture(scope="module")
def grid_plans():
    return _grid_plans()


@pytest.mark.slow
def test_every_registry_plan_is_charged_at_least_its_exact_cost(grid_plans):
    assert len(grid_plans) >= 200 and {plan.mechanism for plan in grid_plans} == set(_MECHANISMS)
    assert sum(plan.fit is not None for plan in grid_plans) == len(_FITTED)
    below = []
    for plan in grid_plans:
        epsilon, delta, rho = ledger_amounts(plan)
        reference = _epsilon_reference(plan)
        fits = epsilon >= reference if isinstance(reference, Fraction) else _clears(epsilon, reference)
        if not fits:
            below.append((plan.mechanism, plan.mode, "epsilon", plan.charged.method))
        if plan.charged.rho is not None and not rho >= _exact_rho(list(plan.events), plan.mode):
            below.append((plan.mechanism, plan.mode, "rho", plan.charged.method))
        assert delta == Fraction(plan.charged.delta)
    assert below == []


# ---------------------------------------------------------------------- the formulas themselves
def _dualquery_like_events(seed: int) -> list:
    """A DualQuery-shaped event list: one EM event per round with ε'_t = 2η(t−1)/n, and a pure step."""
    rng = np.random.default_rng(seed)
    eta, n, samples = rng.uniform(0.2, 2.0), int(rng.integers(1_000, 500_000)), int(rng.integers(10, 2_000))
    rounds = int(rng.integers(5, 200))
    events = [ExponentialMechanismEvent(epsilon=2 * eta * (t - 1) / n, count=samples) for t in range(2, rounds + 1)]
    return [*events, PureDpEvent(epsilon=float(rng.uniform(0.001, 0.1)), count=1)]


def test_sums_are_rounded_up_never_to_nearest():
    for seed in range(200):
        events = _dualquery_like_events(seed)
        pure = basic_composition_epsilon(events)
        assert Fraction(pure) >= _exact_pure(events)
        assert Fraction(math.nextafter(pure, 0.0)) < _exact_pure(events)  # the smallest float above, not more
        rho = zcdp_rho(events, em_bound="pure")
        assert Fraction(rho) >= _exact_rho(events, "paper")
        assert Fraction(math.nextafter(rho, 0.0)) < _exact_rho(events, "paper")
        # tight: each draw the larger of ε²/8 and OpenDP's value, which may be an ulp above it
        rho = zcdp_rho(events, em_bound="bounded_range")
        assert _exact_rho(events, "tight") <= Fraction(rho) <= _exact_rho(events, "tight") * (1 + Fraction(1, 2**50))


def test_conversions_are_raised_past_their_exact_value_by_the_stated_margin():
    rng = np.random.default_rng(5)
    for _ in range(60):
        rho = float(10.0 ** rng.uniform(-7, 0.5))
        delta = float(10.0 ** rng.uniform(-12, -2))
        simple = Fraction(zcdp_to_approx_dp_simple(rho, delta))
        assert _clears(simple, _simple_reference(Fraction(rho), delta))
        assert simple <= Fraction(_simple_reference(Fraction(rho), delta)) * (1 + 2 * Fraction(CONVERSION_MARGIN))
        assert _clears(Fraction(approx_dp_from_zcdp(rho, delta)), _cks_reference(Fraction(rho), delta))
        events = _dualquery_like_events(int(rng.integers(0, 10**6)))
        assert _clears(Fraction(advanced_composition_epsilon(events, delta)), _advanced_reference(events, delta))


def test_a_grant_composes_as_the_ledger_does_and_refuses_a_budget_a_few_ulps_short():
    # 0.1 ten times sums to 0.9999999999999999 in float64, below the exact 10 · 0.1 (> 1)
    events = [PureDpEvent(epsilon=0.1, count=1) for _ in range(10)]
    exact = _exact_pure(events)
    assert exact > 1 and sum(event.epsilon for event in events) < 1
    grant = PrivacyGrant(epsilon=1.0, delta=0.0, mode="paper", purpose="test: a budget just below the exact cost")
    with pytest.raises(BudgetExceededError):
        grant.spend(events, mechanism="test")
    enough = PrivacyGrant(epsilon=float(Fraction(basic_composition_epsilon(events))), delta=0.0, mode="paper",
                          purpose="test: the exact cost rounded up")
    enough.spend(events, mechanism="test")
    assert Fraction(enough.cost(events)[0]) >= exact
