"""The papers' privacy theorems, written out, and the event lists they correspond to.

The papers: DualQuery, Gaboardi, Arias, Hsu, Roth & Wu 2014, "Dual Query: Practical Private Query Release for High
Dimensional Data"; DQRS, Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private
Synthetic Data Release".

Each closed form here is cross-checked in the tests against the generic accountant composing the events
(:mod:`dq_engine.privacy.accounting`), and against the numbers printed in the papers.

Neighbouring relation: *replace one record*, ``n`` public. Changing one record moves every ``q(D)`` by at
most ``1/n``.
"""

from __future__ import annotations

import math

from dq_engine.errors import ConfigError
from dq_engine.privacy.accounting import ExponentialMechanismEvent, PrivacyEvent, PureDpEvent

__all__ = [
    "dqrs_events",
    "dqrs_fresh_samples",
    "dqrs_gamma",
    "dqrs_topup_reserve",
    "dualquery_advanced_epsilon",
    "dualquery_events",
    "dualquery_pure_epsilon",
    "dualquery_round_epsilon",
]


def _check(eta: float, samples: int, rounds: int, n: int) -> None:
    if not eta > 0:
        raise ConfigError(f"eta ({eta}) must be > 0")
    if samples < 1:
        raise ConfigError(f"samples ({samples}) must be >= 1")
    if rounds < 1:
        raise ConfigError(f"rounds ({rounds}) must be >= 1")
    if n < 1:
        raise ConfigError(f"n ({n}) must be >= 1")


# ---------------------------------------------------------------------- DualQuery (Gaboardi et al. 2014)
def dualquery_round_epsilon(eta: float, t: int, n: int) -> float:
    """Per-draw ε'_t = 2η(t-1)/n of round ``t`` (proof of Theorem 4.2).

    One sample from ``Q^t`` is an exponential-mechanism draw whose score ``Σ_{i<t} (q(D) - q(x^i))`` has
    sensitivity ``(t-1)/n``.
    """
    return 2.0 * eta * (t - 1) / n


def dualquery_pure_epsilon(eta: float, samples: int, rounds: int, n: int) -> float:
    """Theorem 4.2: DualQuery is ε-DP for ``ε = η T (T-1) s / n``."""
    _check(eta, samples, rounds, n)
    return eta * rounds * (rounds - 1) * samples / n


def dualquery_advanced_epsilon(eta: float, samples: int, rounds: int, n: int, delta: float) -> float:
    """Theorem 4.3: DualQuery is (ε, δ)-DP for ``ε = ε' [√(2 k ln(1/δ)) + k (e^{ε'} - 1)]``.

    Here ``ε' = 2η(T-1)/n`` and ``k = s(T-1)`` (round 1 samples are free).
    """
    _check(eta, samples, rounds, n)
    if not 0 < delta < 1:
        raise ConfigError(f"delta ({delta}) must be in (0, 1)")
    worst = 2.0 * eta * (rounds - 1) / n
    k = samples * (rounds - 1)
    return worst * (math.sqrt(2 * k * math.log(1 / delta)) + k * math.expm1(worst))


def dualquery_events(eta: float, samples: int, rounds: int, n: int) -> list[PrivacyEvent]:
    """One event per round: ``s`` draws from ``Q^t`` at ε'_t (round 1 samples the uniform Q^1: free)."""
    _check(eta, samples, rounds, n)
    return [
        ExponentialMechanismEvent(
            epsilon=dualquery_round_epsilon(eta, t, n), count=samples, label=f"round {t}: {samples} samples from Q^{t}"
        )
        for t in range(1, rounds + 1)
    ]


# ---------------------------------------------------------------------- DQRS (Vietri et al. 2020, Algorithm 4)
def dqrs_gamma(t: int) -> float:
    """γ_t = 1 / (2 t^{2/3})."""
    return 1.0 / (2.0 * t ** (2.0 / 3.0))


def dqrs_rejects(eta: float, t: int) -> bool:
    """Whether round ``t`` of DQRS recycles samples by rejection: only when ``2γ_t + 4η < 1``.

    Otherwise Algorithm 4 would draw ``s̃_t >= s`` fresh samples, more than DualQuery's ``s``, and pay for the
    rejection step on top; such a round draws ``s`` fresh samples from ``Q^{t+1}`` instead, exactly as
    DualQuery's next round does (docs/decisions.md, "DQRS never draws more than DualQuery").
    """
    return 2.0 * dqrs_gamma(t) + 4.0 * eta < 1.0


def dqrs_fresh_samples(eta: float, samples: int, t: int) -> int:
    """Fresh samples drawn at the end of round ``t``: ``s̃_t = ⌈(2γ_t + 4η) s⌉`` when it rejects, else ``s``.

    Never more than ``s`` (:func:`dqrs_rejects`).
    """
    if not dqrs_rejects(eta, t):
        return samples
    return min(samples, math.ceil((2.0 * dqrs_gamma(t) + 4.0 * eta) * samples - 1e-9))


def dqrs_topup_reserve(eta: float, samples: int, t: int, fraction: float) -> int:
    """Fresh draws reserved (and charged) in round ``t`` to top up when too few samples survive (0 if no rejection)."""
    if not dqrs_rejects(eta, t):
        return 0
    return math.ceil(fraction * dqrs_fresh_samples(eta, samples, t) - 1e-9)


def dqrs_events(
    eta: float, samples: int, rounds: int, n: int, *, topup_fraction: float = 0.0
) -> list[PrivacyEvent]:
    """Privacy events of DQRS, following the proof of Theorem 17 of Vietri et al. 2020.

    Round ``t < T`` builds ``S_{t+1}``:

    * ``s`` rejection-sampling decisions on the carried samples, each ``η/(γ_t n)``-DP (Lemma 18);
    * ``s̃_t`` fresh draws from ``Q^{t+1}``, each an exponential-mechanism draw at ``2ηt/n`` (Lemma 19
      applied to ``Q^{t+1}``, whose score sums ``t`` best responses);
    * up to ``r_t = ⌈f · s̃_t⌉`` top-up draws from ``Q^{t+1}`` (same cost) used only if fewer than ``s``
      samples survive; they are charged whether used or not, so the charge is fixed before the run.

    Two deliberate differences from the printed proof, both conservative or neutral: the proof charges the
    fresh draws of round ``t`` at ``2η(t-1)/n``, but they come from ``Q^{t+1}`` (sensitivity ``t/n``), so we
    charge ``2ηt/n``; and round ``T`` builds no ``S_{T+1}`` (the algorithm never uses it), so it costs
    nothing. ``S_1`` is drawn from the uniform ``Q^1`` and is free.
    """
    _check(eta, samples, rounds, n)
    if not 0 <= topup_fraction <= 1:
        raise ConfigError(f"topup_fraction ({topup_fraction}) must be in [0, 1]")
    events: list[PrivacyEvent] = []
    for t in range(1, rounds):
        gamma = dqrs_gamma(t)
        if not dqrs_rejects(eta, t):  # a DualQuery step: s fresh draws from Q^{t+1}, no rejection
            events.append(
                ExponentialMechanismEvent(
                    epsilon=2.0 * eta * t / n, count=samples, label=f"round {t}: {samples} fresh draws from Q^{t + 1}"
                )
            )
            continue
        events.append(
            PureDpEvent(epsilon=eta / (gamma * n), count=samples, label=f"round {t}: rejection step (Lemma 18)")
        )
        fresh = dqrs_fresh_samples(eta, samples, t)
        reserve = dqrs_topup_reserve(eta, samples, t, topup_fraction)
        events.append(
            ExponentialMechanismEvent(
                epsilon=2.0 * eta * t / n, count=fresh + reserve,
                label=f"round {t}: {fresh} fresh + {reserve} reserved draws from Q^{t + 1}",
            )
        )
    return events
