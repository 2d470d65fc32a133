"""Privacy accounting reproduces the papers' numbers (DualQuery Theorems 4.2/4.3, Vietri et al. 2020's zCDP analysis).

Tolerances match the digits the papers (and the brief) print: 1.0035 -> 5e-5, 2.006 -> 5e-4, etc.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dq_engine.errors import AccountingError
from dq_engine.privacy.accounting import (
    ExponentialMechanismEvent,
    PureDpEvent,
    ZCDPEvent,
    advanced_composition_epsilon,
    approx_dp_from_zcdp,
    basic_composition_epsilon,
    compose,
    em_rho_bounded_range,
    zcdp_rho,
    zcdp_to_approx_dp_simple,
)
from dq_engine.privacy.theorems import (
    dualquery_advanced_epsilon,
    dualquery_events,
    dualquery_pure_epsilon,
    dualquery_round_epsilon,
)

ADULT_N = 30_162
ADULT_ETA = 0.4
# (s, T, epsilon as printed) -- DualQuery paper §6 (MWEM comparison on Adult): epsilon = 1, 2, 3, 4, 5
ADULT_SETTINGS = [
    (35, 47, 1.0035, 5e-5),
    (40, 62, 2.006, 5e-4),
    (45, 71, 2.966, 5e-4),
    (50, 78, 3.982, 5e-4),
    (55, 83, 4.964, 5e-4),
]

KDD_N, KDD_ETA, KDD_T, KDD_S, KDD_DELTA = 494_021, 1.2, 170, 1750, 1e-3


# ---------------------------------------------------------------------- independent Canonne-Kamath-Steinke
def _cks_log_delta(rho: float, epsilon: float, alpha: float) -> float:
    """log of exp((a-1)(a rho - eps)) / (a-1) * (1 - 1/a)^a, for one alpha.

    Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", Corollary 13.
    """
    return (alpha - 1) * (alpha * rho - epsilon) - math.log(alpha - 1) + alpha * math.log1p(-1 / alpha)


def _cks_min_log_delta(rho: float, epsilon: float) -> float:
    """Golden-section minimum over alpha > 1 (parametrised by u = log(alpha - 1); the function is unimodal)."""
    ratio = (math.sqrt(5) - 1) / 2
    low, high = math.log(1e-6), math.log(1e7)
    c, d = high - ratio * (high - low), low + ratio * (high - low)
    fc, fd = (_cks_log_delta(rho, epsilon, 1 + math.exp(u)) for u in (c, d))
    for _ in range(200):
        if fc < fd:
            high, d, fd = d, c, fc
            c = high - ratio * (high - low)
            fc = _cks_log_delta(rho, epsilon, 1 + math.exp(c))
        else:
            low, c, fc = c, d, fd
            d = low + ratio * (high - low)
            fd = _cks_log_delta(rho, epsilon, 1 + math.exp(d))
    return min(fc, fd)


def _cks_epsilon_by_bisection(rho: float, delta: float) -> float:
    """Smallest epsilon with delta(epsilon) <= delta, by bisection below the simple bound rho + 2 sqrt(rho ln 1/d)."""
    low, high = 0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta))
    for _ in range(100):
        middle = (low + high) / 2
        if _cks_min_log_delta(rho, middle) <= math.log(delta):
            high = middle
        else:
            low = middle
    return high


# ---------------------------------------------------------------------- Theorem 4.2 (Adult, eta = 0.4)
@pytest.mark.parametrize(("samples", "rounds", "printed", "tolerance"), ADULT_SETTINGS)
def test_theorem_4_2_closed_form_reproduces_adult_epsilons(samples, rounds, printed, tolerance):
    assert dualquery_pure_epsilon(ADULT_ETA, samples, rounds, ADULT_N) == pytest.approx(printed, abs=tolerance)


@pytest.mark.parametrize(("samples", "rounds", "printed", "tolerance"), ADULT_SETTINGS)
def test_basic_composition_of_dualquery_events_reproduces_adult_epsilons(samples, rounds, printed, tolerance):
    events = dualquery_events(ADULT_ETA, samples, rounds, ADULT_N)
    assert basic_composition_epsilon(events) == pytest.approx(printed, abs=tolerance)
    assert basic_composition_epsilon(events) == pytest.approx(
        dualquery_pure_epsilon(ADULT_ETA, samples, rounds, ADULT_N), rel=1e-12
    )


@pytest.mark.parametrize(("samples", "rounds", "printed", "tolerance"), ADULT_SETTINGS)
def test_paper_mode_compose_reports_theorem_4_2_and_picks_the_smaller_bound(samples, rounds, printed, tolerance):
    events = dualquery_events(ADULT_ETA, samples, rounds, ADULT_N)
    cost = compose(events, mode="paper", delta=1e-3, paper_analysis="advanced_composition")
    theorem_4_3 = dualquery_advanced_epsilon(ADULT_ETA, samples, rounds, ADULT_N, 1e-3)
    assert cost.details["theorem_4_2_epsilon"] == pytest.approx(printed, abs=tolerance)
    assert cost.details["theorem_4_3_epsilon"] == pytest.approx(theorem_4_3, rel=1e-12)
    assert cost.pure_epsilon == pytest.approx(printed, abs=tolerance)
    assert cost.epsilon == pytest.approx(min(cost.details.values()), rel=1e-12)
    # at these settings advanced composition is the smaller one, so the guarantee carries delta
    assert cost.epsilon < printed
    assert cost.delta == 1e-3


def test_paper_mode_returns_pure_guarantee_when_basic_composition_is_smaller():
    events = dualquery_events(0.4, 5, 3, 30_162)  # tiny: pure eps 4e-4 beats sqrt(2k ln 1/delta) eps'
    cost = compose(events, mode="paper", delta=1e-6, paper_analysis="advanced_composition")
    assert cost.delta == 0.0
    assert cost.epsilon == pytest.approx(0.4 * 3 * 2 * 5 / 30_162, rel=1e-12)
    assert cost.method.startswith("basic composition")


def test_round_epsilon_is_two_eta_times_sensitivity_and_round_one_is_free():
    assert dualquery_round_epsilon(1.2, 1, 100) == 0.0
    assert dualquery_round_epsilon(1.2, 7, 100) == pytest.approx(2 * 1.2 * 6 / 100, rel=1e-15)
    events = dualquery_events(1.2, 3, 4, 100)
    assert [e.epsilon for e in events] == pytest.approx([0.0, 0.024, 0.048, 0.072], rel=1e-12)
    assert [e.count for e in events] == [3, 3, 3, 3]


# ---------------------------------------------------------------------- Theorem 4.3 (KDD99)
def test_theorem_4_3_gives_1_859_for_kdd99_settings():
    # the paper's text claims (1, 0.001)-DP; evaluating the theorem gives 1.859 (see papers/README.md)
    closed = dualquery_advanced_epsilon(KDD_ETA, KDD_S, KDD_T, KDD_N, KDD_DELTA)
    assert closed == pytest.approx(1.859, abs=5e-4)


def test_generic_advanced_composition_agrees_with_theorem_4_3_closed_form():
    events = dualquery_events(KDD_ETA, KDD_S, KDD_T, KDD_N)
    closed = dualquery_advanced_epsilon(KDD_ETA, KDD_S, KDD_T, KDD_N, KDD_DELTA)
    assert advanced_composition_epsilon(events, KDD_DELTA) == pytest.approx(closed, rel=1e-12)
    cost = compose(events, mode="paper", delta=KDD_DELTA, paper_analysis="advanced_composition")
    assert cost.epsilon == pytest.approx(closed, rel=1e-12)
    assert cost.delta == KDD_DELTA
    assert cost.method.startswith("advanced composition")


def test_theorem_4_3_by_hand_for_kdd99():
    worst = 2 * 1.2 * 169 / 494_021  # eps' = 2 eta (T-1) / n
    k = 1750 * 169  # s (T-1): round 1 is free
    by_hand = worst * math.sqrt(2 * k * math.log(1000)) + k * worst * (math.exp(worst) - 1)
    assert worst == pytest.approx(8.2102e-4, abs=5e-9)
    assert dualquery_advanced_epsilon(KDD_ETA, KDD_S, KDD_T, KDD_N, KDD_DELTA) == pytest.approx(by_hand, rel=1e-12)


def test_tight_mode_for_kdd99_gives_rho_0_00838_and_epsilon_0_32():
    events = dualquery_events(KDD_ETA, KDD_S, KDD_T, KDD_N)
    cost = compose(events, mode="tight", delta=KDD_DELTA)
    # rho = sum_t s (2 eta (t-1) / n)^2 / 8 = s/8 (2 eta / n)^2 sum_{j<T} j^2
    by_hand = KDD_S / 8 * (2 * KDD_ETA / KDD_N) ** 2 * sum(j * j for j in range(KDD_T))
    assert cost.rho == pytest.approx(by_hand, rel=1e-9)
    assert cost.rho == pytest.approx(0.00838, abs=5e-6)
    assert cost.epsilon == pytest.approx(0.32, abs=5e-3)
    assert cost.epsilon == pytest.approx(approx_dp_from_zcdp(cost.rho, KDD_DELTA), rel=1e-12)
    assert cost.delta == KDD_DELTA


def test_optimal_conversion_of_297500_draws_at_kdd_worst_epsilon_is_0_6052():
    worst = 2 * KDD_ETA * (KDD_T - 1) / KDD_N
    events = [ExponentialMechanismEvent(epsilon=worst, count=KDD_T * KDD_S)]
    cost = compose(events, mode="tight", delta=KDD_DELTA)
    assert cost.epsilon == pytest.approx(0.6052, abs=5e-5)


# ---------------------------------------------------------------------- OpenDP pieces vs hand-written formulas
@pytest.mark.parametrize("epsilon", [1e-6, 8.2102e-4, 0.01, 0.3, 1.0, 4.0])
def test_em_rho_bounded_range_is_epsilon_squared_over_8(epsilon):
    rho = em_rho_bounded_range(epsilon)
    assert rho == pytest.approx(epsilon**2 / 8, rel=1e-9)
    assert rho >= epsilon**2 / 8 * (1 - 1e-12)  # never optimistic


def test_em_rho_of_a_free_draw_is_zero():
    assert em_rho_bounded_range(0.0) == 0.0


@pytest.mark.parametrize(
    ("rho", "delta"),
    [(0.025067, 1e-3), (0.0083804, 1e-3), (1e-4, 1e-9), (0.5, 1e-6), (2.0, 1e-5)],
)
def test_approx_dp_from_zcdp_matches_hand_written_cks_bisection(rho, delta):
    assert approx_dp_from_zcdp(rho, delta) == pytest.approx(_cks_epsilon_by_bisection(rho, delta), abs=1e-6)


def test_hand_written_cks_reproduces_printed_0_6052():
    rho = KDD_T * KDD_S * (2 * KDD_ETA * (KDD_T - 1) / KDD_N) ** 2 / 8
    assert _cks_epsilon_by_bisection(rho, KDD_DELTA) == pytest.approx(0.6052, abs=5e-5)


@pytest.mark.parametrize(("rho", "delta"), [(0.01, 1e-3), (0.5, 1e-6), (3.0, 1e-9)])
def test_optimal_conversion_never_exceeds_simple_conversion(rho, delta):
    simple = zcdp_to_approx_dp_simple(rho, delta)
    assert simple >= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # raised by the outward margin (2^-40)
    assert simple == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)), rel=2e-12)
    assert approx_dp_from_zcdp(rho, delta) < simple


def test_zcdp_rho_charges_em_draws_eighth_or_half_by_analysis():
    events = [
        ExponentialMechanismEvent(epsilon=0.2, count=3),
        PureDpEvent(epsilon=0.1, count=2),
        ZCDPEvent(rho=0.05, count=4),
    ]
    assert zcdp_rho(events, em_bound="bounded_range") == pytest.approx(3 * 0.04 / 8 + 2 * 0.01 / 2 + 0.2, rel=1e-9)
    assert zcdp_rho(events, em_bound="pure") == pytest.approx(3 * 0.04 / 2 + 2 * 0.01 / 2 + 0.2, rel=1e-12)


def test_pure_and_advanced_composition_refuse_zcdp_only_events():
    events = [PureDpEvent(epsilon=0.1), ZCDPEvent(rho=0.01, label="gaussian")]
    with pytest.raises(AccountingError, match="zCDP-only"):
        basic_composition_epsilon(events)
    with pytest.raises(AccountingError, match="zCDP event"):
        advanced_composition_epsilon(events, 1e-6)
    assert compose(events, mode="tight", delta=1e-6).pure_epsilon is None


def test_basic_composition_sums_exactly():
    # 10 x 0.1 in floats is 0.9999999999999999; as exact binary fractions it is 1.0000000000000000555, so the
    # smallest float not below it is the one after 1.0
    events = [PureDpEvent(epsilon=0.1) for _ in range(10)]
    assert basic_composition_epsilon(events) == math.nextafter(1.0, 2.0)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-3])
def test_conversions_reject_delta_outside_open_unit_interval(delta):
    with pytest.raises(AccountingError, match=r"must be in \(0, 1\)"):
        approx_dp_from_zcdp(0.1, delta)
    with pytest.raises(AccountingError, match=r"must be in \(0, 1\)"):
        zcdp_to_approx_dp_simple(0.1, delta)


def test_compose_rejects_unknown_mode():
    with pytest.raises(AccountingError, match="must be 'paper' or 'tight'"):
        compose([PureDpEvent(epsilon=0.1)], mode="loose", delta=1e-6)


def test_basic_composition_is_the_exact_sum_rounded_once():
    """The power-of-two integer sum is the Fraction sum rounded once, up (and naive float sums differ)."""
    rng = np.random.default_rng(11)
    differs = 0
    for _ in range(500):
        events = [
            PureDpEvent(label="e", epsilon=float(rng.random() * 10.0 ** rng.integers(-12, 3)), count=int(c))
            for c in rng.integers(0, 60, size=rng.integers(1, 40))
        ]
        total = sum((Fraction(e.epsilon) * e.count for e in events), Fraction(0))
        exact = float(total) if Fraction(float(total)) >= total else math.nextafter(float(total), math.inf)
        assert basic_composition_epsilon(events) == exact
        differs += sum(e.epsilon * e.count for e in events) != exact
    assert differs > 0  # the check can tell an exact sum from a float one


def _plain_largest_rho(epsilon: float, delta: float) -> float:
    """The 80-step bisection :func:`dq_engine.privacy.public.largest_rho` must reproduce bit for bit."""
    low, high = 0.0, float(epsilon)
    for _ in range(80):
        middle = 0.5 * (low + high)
        if approx_dp_from_zcdp(middle, delta) <= epsilon:
            low = middle
        else:
            high = middle
    return low


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [(1.0, 1e-9), (0.1, 1e-9), (0.7, 1e-9), (10.0, 1e-6), (0.01, 1e-5), (0.003, 1e-12), (20.0, 1e-3), (2.5, 1e-7)],
)
def test_largest_rho_is_the_plain_bisection_bit_for_bit_with_fewer_conversions(epsilon, delta, monkeypatch):
    import dq_engine.privacy.public as public

    expected = _plain_largest_rho(epsilon, delta)
    approx_dp_from_zcdp.cache_clear()  # count the conversions of this call only
    calls = []

    def counted(rho: float, delta_: float) -> float:
        calls.append(rho)
        return approx_dp_from_zcdp(rho, delta_)

    monkeypatch.setattr(public, "approx_dp_from_zcdp", counted)
    found = public.largest_rho(epsilon, delta)
    assert found == expected  # not just close: the release's noise scales follow from these bits
    assert approx_dp_from_zcdp(found, delta) <= epsilon
    assert len(set(calls)) <= 25  # the plain bisection needs about 55


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-9), (0.1, 1e-6), (5.0, 1e-3)])
def test_simple_conversion_inverse_gives_back_epsilon(epsilon, delta):
    from dq_engine.privacy.accounting import zcdp_from_approx_dp_simple, zcdp_to_approx_dp_simple

    rho = zcdp_from_approx_dp_simple(epsilon, delta)
    assert zcdp_to_approx_dp_simple(rho, delta) == pytest.approx(epsilon, rel=1e-12)
    assert approx_dp_from_zcdp(rho, delta) <= epsilon  # the optimal conversion is below the simple one
