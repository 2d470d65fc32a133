"""Calibration of the number of rounds never exceeds the target budget and is as large as allowed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dq_engine.errors import AccountingError
from dq_engine.privacy.calibration import MAX_ROUNDS, calibrate_rounds, largest_admissible, mechanism_cost


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    epsilon=st.floats(min_value=0.05, max_value=5.0),
    delta=st.sampled_from([1e-9, 1e-6, 1e-3, 0.05]),
    eta=st.floats(min_value=0.2, max_value=2.0),
    samples=st.integers(min_value=5, max_value=2000),
    n=st.integers(min_value=200, max_value=20_000),
    mode=st.sampled_from(["paper", "tight"]),
    mechanism=st.sampled_from(["dualquery", "dqrs"]),
    topup_fraction=st.sampled_from([0.0, 0.25, 1.0]),
)
def test_calibrated_rounds_fit_the_target_and_one_more_round_does_not(
    epsilon, delta, eta, samples, n, mode, mechanism, topup_fraction
):
    parameters = {"eta": eta, "samples": samples, "n": n, "topup_fraction": topup_fraction}

    def cost(rounds: int) -> float:
        return mechanism_cost(mechanism, mode=mode, delta=delta, rounds=rounds, **parameters)

    try:
        rounds = calibrate_rounds(mechanism, epsilon=epsilon, delta=delta, mode=mode, **parameters)
    except AccountingError:
        event("refused: even 2 rounds exceed the target")
        assert cost(2) > epsilon  # refused only when even the smallest run is over budget
        return
    event("calibrated")
    assert rounds >= 2
    assert cost(rounds) <= epsilon
    assert cost(rounds + 1) > epsilon


def test_calibration_includes_the_free_attribute_budget():
    common = {"epsilon": 1.0, "delta": 1e-6, "eta": 0.5, "samples": 200, "n": 10_000, "mode": "tight"}
    without = calibrate_rounds("dualquery", **common)
    with_free = calibrate_rounds("dualquery", free_epsilon=0.05, **common)
    assert with_free < without
    spent = mechanism_cost(
        "dualquery", mode="tight", delta=1e-6, eta=0.5, samples=200, n=10_000, rounds=with_free, free_epsilon=0.05
    )
    assert spent <= 1.0


def test_paper_mode_calibration_recovers_kdd99_rounds_from_theorem_4_3_epsilon():
    # Theorem 4.3 at (eta, s, T, n, delta) = (1.2, 1750, 170, 494021, 1e-3) is 1.85902
    kdd = {"delta": 1e-3, "eta": 1.2, "samples": 1750, "n": 494_021, "mode": "paper"}
    assert calibrate_rounds("dualquery", epsilon=1.8591, **kdd) == 170
    assert calibrate_rounds("dualquery", epsilon=1.8590, **kdd) == 169


@pytest.mark.parametrize("target", [2, 3, 17, 1000, 524_288, 524_289, 700_000, MAX_ROUNDS - 1, MAX_ROUNDS])
def test_largest_admissible_finds_the_exact_threshold_of_a_linear_cost(target):
    # cost(T) = T: the ledger charges a float cost rounded up one step, so cost == target no longer fits
    assert largest_admissible(float, target + 0.5) == target
    if target > 2:
        assert largest_admissible(float, float(target)) == target - 1


def test_largest_admissible_stops_at_the_round_cap():
    assert largest_admissible(lambda rounds: 0.0, 1.0) == MAX_ROUNDS


def test_largest_admissible_refuses_a_target_below_the_minimum_cost():
    with pytest.raises(AccountingError, match="too small for even 2 rounds"):
        largest_admissible(float, 1.5)


def test_calibrate_rounds_rejects_non_positive_epsilon():
    with pytest.raises(AccountingError, match=r"target epsilon \(0\.0\) must be > 0"):
        calibrate_rounds("dualquery", epsilon=0.0, delta=1e-6, eta=0.5, samples=10, n=100)


def test_calibrate_rounds_rejects_unknown_mechanism():
    with pytest.raises(AccountingError, match="has no round-based calibration"):
        calibrate_rounds("mwem", epsilon=1.0, delta=1e-6, eta=0.5, samples=10, n=100)


@pytest.mark.parametrize("target", [5, 299, 300, 301, 5_000])
def test_largest_admissible_with_most_is_the_threshold_capped_at_most(target):
    # cost(T) = T against target + 0.5: the uncapped answer is the target; with most = 300, min(target, 300)
    evaluated = []

    def cost(rounds: int) -> float:
        evaluated.append(rounds)
        return float(rounds)

    assert largest_admissible(cost, target + 0.5, most=300) == min(target, 300)
    if target >= 300:
        assert evaluated == [2, 300]  # the cap fits: the minimum and the cap, nothing else


def test_largest_admissible_refuses_a_cap_below_the_minimum():
    with pytest.raises(AccountingError, match="at most 1 rounds"):
        largest_admissible(float, 10.0, most=1)
