"""Privacy cost as immutable events, composed by accountants.

Events describe what a mechanism did with the private data, in public terms only:

* :class:`ExponentialMechanismEvent` -- ``count`` draws of an ε-DP exponential mechanism (DualQuery's
  samples from ``Q^t``, FEM's query selection). Pure ε each; ε²/8-zCDP each by the bounded-range analysis
  (Cesar & Rogers 2021), which OpenDP's ``make_noisy_max`` implements.
* :class:`PureDpEvent` -- ``count`` runs of another ε-DP mechanism (Laplace counts, DQRS's rejection step,
  randomized response). ε²/2-zCDP each (Bun & Steinke 2016, Prop. 1.4).
* :class:`ZCDPEvent` -- a ρ-zCDP mechanism (Gaussian noise).

Two accounting *modes* are reported for every run:

* ``paper`` -- exactly what the papers prove. DualQuery: Theorem 4.2 (basic composition, pure ε) and
  Theorem 4.3 (advanced composition with the worst per-draw ε'); the smaller of the two valid bounds is the
  paper-mode ε. DQRS / FEM / sepFEM (Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for
  Private Synthetic Data Release"): every ε-DP step is ε²/2-zCDP and
  ``ρ → (ρ + 2√(ρ ln(1/δ)), δ)``.
* ``tight`` (default for new releases) -- zCDP with the per-round ε'_t, EM draws at ε'²/8, other pure steps
  at ε²/2, converted to (ε, δ) with the optimal conversion of Canonne, Kamath & Steinke (2020) as
  implemented by OpenDP's ``make_zCDP_to_approxDP``.

Budgets are compared exactly: costs are converted to :class:`fractions.Fraction` (exact binary value of the
float) before they are added to or compared with a cap.

Every cost is rounded **outward**, never to nearest: a float this module returns is never below the exact value of
the analysis it names. Sums (basic composition, zCDP ρ) are kept exact -- every float is ``m / 2^k``, and so is
``ε²/8`` -- and rounded once, up (:func:`basic_composition_exact`, :func:`zcdp_rho_exact`); a result that needs a
transcendental function (the (ε, δ) conversions, advanced composition) is computed in float64 and raised by a
relative :data:`CONVERSION_MARGIN` (:func:`outward`), far more than the float64 rounding error of those few
operations; an inverse that yields a budget (:func:`zcdp_from_approx_dp_simple`) is lowered by the same margin.
``tests/privacy/test_outward_rounding.py`` checks every registry plan over a grid against exact rational sums and
50-digit decimal conversions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from dq_engine.errors import AccountingError

__all__ = [
    "AccountingMode",
    "ComposedCost",
    "ExponentialMechanismEvent",
    "PrivacyEvent",
    "PureDpEvent",
    "ZCDPEvent",
    "advanced_composition_epsilon",
    "approx_dp_from_zcdp",
    "basic_composition_epsilon",
    "basic_composition_exact",
    "best_cost",
    "combined_costs",
    "compose",
    "em_rho_bounded_range",
    "fem_costs",
    "mode_costs",
    "mwem_costs",
    "outward",
    "rounded_up",
    "within_target",
    "zcdp_from_approx_dp_simple",
    "zcdp_rho",
    "zcdp_rho_exact",
    "zcdp_to_approx_dp_simple",
]

PAPER_ZCDP = "Vietri et al. 2020, New Oracle-Efficient Algorithms for Private Synthetic Data Release"
"""The paper whose zCDP analysis paper mode uses for DQRS, FEM and sepFEM, as a method line cites it."""

AccountingMode = Literal["paper", "tight"]
PaperAnalysis = Literal["advanced_composition", "zcdp", "basic_composition"]
ZcdpConversion = Literal["optimal", "simple"]


# ---------------------------------------------------------------------- costs as charged
CONVERSION_MARGIN = 2.0**-40
"""Relative margin by which a float64 result of a transcendental formula is raised (:func:`outward`).

The formulas here (``ρ + 2√(ρ ln(1/δ))``, advanced composition, OpenDP's optimal conversion) are a dozen float64
operations on positive terms, each within an ulp or two of the exact result (no cancellation), so their relative
error is below ``2^-48``; the margin is ``2^8`` times that. Tests compare with 50-digit decimal evaluations.
"""


def outward(value: float) -> float:
    """``value · (1 + 2^-40)`` rounded up: an upper bound on the exact result that ``value`` approximates.

    For a float64 evaluation of a formula whose relative rounding error is below :data:`CONVERSION_MARGIN`
    (see there). Zero and infinity stay as they are.
    """
    if not 0 < value < math.inf:
        return value
    return math.nextafter(value * (1.0 + CONVERSION_MARGIN), math.inf)


def _inward(value: float) -> float:
    """``value · (1 - 2^-40)`` rounded down: a budget derived from a transcendental formula, never above it."""
    if not 0 < value < math.inf:
        return value
    return math.nextafter(value * (1.0 - CONVERSION_MARGIN), 0.0)


def _float_up(exact: Fraction) -> float:
    """The smallest float >= ``exact`` (>= 0).

    ``numerator / denominator`` of Python integers is correctly rounded (to nearest); one exact comparison decides
    whether the next float up is needed.
    """
    value = exact.numerator / exact.denominator
    if Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    return value


def rounded_up(value: float | None) -> Fraction | None:
    """A float cost as the exact amount the ledger records: the next float above it.

    The costs of this module are already upper bounds on the exact values (rounded outward, see the module
    docstring); the ledger still charges one float step more, so that a charge never equals a computed cost and
    every calibration compares as the ledger charges (:func:`within_target`). Zero stays zero.
    """
    if value is None:
        return None
    return Fraction(math.nextafter(value, math.inf)) if value > 0 else Fraction(0)


def within_target(cost: float, target: float) -> bool:
    """Whether a computed cost, rounded up as the ledger charges it (:func:`rounded_up`), is within ``target``.

    Every calibration compares with this, not with ``cost <= target``: a plan calibrated exactly onto its target
    would otherwise be charged one float step above it and refused by a cap equal to the target.
    """
    return rounded_up(cost) <= Fraction(target)


# ---------------------------------------------------------------------- events
def _check_amount(name: str, value: float) -> None:
    """An event's ε or ρ must be finite and >= 0."""
    if not (value >= 0 and math.isfinite(value)):
        raise AccountingError(f"{name} ({value}) must be finite and >= 0")


@dataclass(frozen=True, kw_only=True)
class PrivacyEvent:
    """Base class: one or more identical mechanism invocations on the private data.

    Attributes:
        count: Number of invocations (>= 0).
        label: Public description, e.g. ``"round 12 samples from Q^t"``.
    """

    count: int = 1
    label: str = ""

    def __post_init__(self) -> None:
        if self.count < 0:
            raise AccountingError(f"event count ({self.count}) must be >= 0")


@dataclass(frozen=True, kw_only=True)
class ExponentialMechanismEvent(PrivacyEvent):
    """``count`` draws of an ε-DP exponential mechanism (Definition 4.1 of the DualQuery paper).

    Attributes:
        epsilon: Pure-DP ε of one draw, ``2 Δ · (scale)`` in the paper's notation (e.g. ``2η(t-1)/n``).
    """

    epsilon: float

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_amount("epsilon", self.epsilon)


@dataclass(frozen=True, kw_only=True)
class PureDpEvent(PrivacyEvent):
    """``count`` runs of an ε-DP mechanism that is not an exponential mechanism."""

    epsilon: float

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_amount("epsilon", self.epsilon)


@dataclass(frozen=True, kw_only=True)
class ZCDPEvent(PrivacyEvent):
    """``count`` runs of a ρ-zCDP mechanism (e.g. Gaussian noise)."""

    rho: float

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_amount("rho", self.rho)


# ---------------------------------------------------------------------- generic formulas
class _DyadicSum:
    """An exact sum of ``count · m / 2^k`` terms: one integer over the largest power of two seen.

    Exact, as with :class:`fractions.Fraction`, without a gcd per addition (plans compose thousands of event lists
    while they calibrate).
    """

    def __init__(self) -> None:
        self.numerator, self.denominator = 0, 1

    def add(self, count: int, top: int, bottom: int) -> None:
        """Add ``count · top / bottom`` (``bottom`` a power of two)."""
        if bottom > self.denominator:
            self.numerator *= bottom // self.denominator
            self.denominator = bottom
        self.numerator += count * top * (self.denominator // bottom)

    def value(self) -> Fraction:
        """The sum, exactly."""
        return Fraction(self.numerator, self.denominator)


def basic_composition_exact(events: list[PrivacyEvent]) -> Fraction:
    """Σ count·ε over pure events (Dwork & Roth, Theorem 3.16), exactly (each ε the exact value of its float).

    Raises:
        AccountingError: If an event is zCDP-only (it has no pure-ε guarantee).
    """
    total = _DyadicSum()
    for event in events:
        if isinstance(event, ZCDPEvent):
            if event.rho > 0 and event.count > 0:
                raise AccountingError(f"event {event.label!r} is zCDP-only; it has no pure-ε bound")
            continue
        total.add(event.count, *float(event.epsilon).as_integer_ratio())  # the ratio's bottom is a power of two
    return total.value()


def basic_composition_epsilon(events: list[PrivacyEvent]) -> float:
    """:func:`basic_composition_exact` rounded up to a float (never below the exact sum).

    Raises:
        AccountingError: If an event is zCDP-only (it has no pure-ε guarantee).
    """
    return _float_up(basic_composition_exact(events))


def advanced_composition_epsilon(events: list[PrivacyEvent], delta: float) -> float:
    """Advanced composition (Dwork, Rothblum & Vadhan 2010) as used in DualQuery's Theorem 4.3.

    The exponential-mechanism draws compose as ``ε = √(2k ln(1/δ)) ε' + k ε' (e^{ε'} - 1)`` with ``k`` the
    number of draws with ε > 0 and ``ε'`` the largest per-draw ε (the paper's worst case ``2η(T-1)/n``);
    any other pure-ε events (e.g. noisy marginals) are added by basic composition. Rounded outward
    (:func:`outward`).

    Raises:
        AccountingError: If ``delta`` is outside (0, 1) or a zCDP-only event is present.
    """
    if not 0 < delta < 1:
        raise AccountingError(f"delta ({delta}) must be in (0, 1)")
    if any(isinstance(e, ZCDPEvent) and e.count > 0 and e.rho > 0 for e in events):
        raise AccountingError("advanced composition needs pure-ε events; a zCDP event was given")
    draws = [e for e in events if isinstance(e, ExponentialMechanismEvent) and e.count > 0 and e.epsilon > 0]
    others = [e for e in events if isinstance(e, PureDpEvent)]
    total = basic_composition_epsilon(others)
    if draws:
        k = sum(e.count for e in draws)
        worst = max(e.epsilon for e in draws)
        total += math.sqrt(2 * k * math.log(1 / delta)) * worst + k * worst * math.expm1(worst)
    return outward(total)


@lru_cache(maxsize=4096)
def em_rho_bounded_range(epsilon: float) -> float:
    """ZCDP ρ of one ε-DP exponential-mechanism draw: ε²/8 (Cesar & Rogers 2021), via OpenDP.

    OpenDP's ``make_noisy_max`` with Gumbel scale ``σ`` on a score of sensitivity ``Δ`` (L∞) is
    ``(2Δ/σ)``-DP and ``(2Δ/σ)²/8``-zCDP; we instantiate it with ``Δ = 1``, ``σ = 2/ε``.
    """
    if epsilon == 0:
        return 0.0
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    measurement = dp.m.make_noisy_max(*space, scale=2.0 / epsilon, output_measure=dp.zero_concentrated_divergence())
    return float(measurement.map(1.0))


def zcdp_rho_exact(events: list[PrivacyEvent], *, em_bound: Literal["bounded_range", "pure"]) -> Fraction:
    """Total zCDP ρ of the events (composition adds ρ, Bun & Steinke 2016, Lemma 2.3), exactly.

    Each term is exact: a ZCDP event's ρ, ``ε²/2`` of a pure step, and for an EM draw under ``"bounded_range"``
    the larger of ``ε²/8`` and OpenDP's value (:func:`em_rho_bounded_range`, which rounds its own ``2/ε`` scale
    to nearest and can sit an ulp below ``ε²/8``). Squares of floats are ``m / 2^k`` too, so the sum is exact.

    Args:
        events: Events to compose.
        em_bound: ``"bounded_range"`` charges an ε-EM draw ε²/8 (tight mode); ``"pure"`` charges ε²/2 as
            Vietri et al. 2020 does (paper mode).
    """
    total = _DyadicSum()
    for event in events:
        if event.count == 0:
            continue
        if isinstance(event, ZCDPEvent):
            total.add(event.count, *float(event.rho).as_integer_ratio())
            continue
        top, bottom = float(event.epsilon).as_integer_ratio()
        if isinstance(event, ExponentialMechanismEvent) and em_bound == "bounded_range":
            library_top, library_bottom = em_rho_bounded_range(event.epsilon).as_integer_ratio()
            if library_top * 8 * bottom * bottom > top * top * library_bottom:  # OpenDP's value > ε²/8, exactly
                total.add(event.count, library_top, library_bottom)
            else:
                total.add(event.count, top * top, 8 * bottom * bottom)
        else:
            total.add(event.count, top * top, 2 * bottom * bottom)
    return total.value()


def zcdp_rho(events: list[PrivacyEvent], *, em_bound: Literal["bounded_range", "pure"]) -> float:
    """:func:`zcdp_rho_exact` rounded up to a float (never below the exact sum).

    Args:
        events: Events to compose.
        em_bound: ``"bounded_range"`` charges an ε-EM draw ε²/8 (tight mode); ``"pure"`` charges ε²/2 as
            Vietri et al. 2020 does (paper mode).
    """
    return _float_up(zcdp_rho_exact(events, em_bound=em_bound))


def zcdp_to_approx_dp_simple(rho: float, delta: float) -> float:
    """``ε = ρ + 2√(ρ ln(1/δ))``, rounded outward.

    Bun & Steinke 2016, Prop. 1.3; the conversion Vietri et al. 2020 uses.
    """
    if not 0 < delta < 1:
        raise AccountingError(f"delta ({delta}) must be in (0, 1)")
    return outward(rho + 2 * math.sqrt(rho * math.log(1 / delta)))


def zcdp_from_approx_dp_simple(epsilon: float, delta: float) -> float:
    """The ρ whose simple conversion (:func:`zcdp_to_approx_dp_simple`) is exactly ``epsilon``.

    ``ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))²``, computed as ``(ε / (√(ln(1/δ) + ε) + √(ln(1/δ))))²`` (no
    cancellation) and rounded inward: it is a budget, so it may be below the exact inverse, never above.
    """
    if not 0 < delta < 1:
        raise AccountingError(f"delta ({delta}) must be in (0, 1)")
    log_term = math.log(1 / delta)
    return _inward((epsilon / (math.sqrt(log_term + epsilon) + math.sqrt(log_term))) ** 2)


@lru_cache(maxsize=4096)
def approx_dp_from_zcdp(rho: float, delta: float) -> float:
    """Optimal ε(δ) of a ρ-zCDP mechanism (Canonne, Kamath & Steinke 2020), via OpenDP, rounded outward."""
    if not 0 < delta < 1:
        raise AccountingError(f"delta ({delta}) must be in (0, 1)")
    if rho == 0:
        return 0.0
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    space = dp.atom_domain(T=int), dp.absolute_distance(T=int)
    measurement = dp.m.make_user_measurement(
        *space,
        output_measure=dp.zero_concentrated_divergence(),
        function=lambda _: 0,
        privacy_map=lambda _: rho,
    )
    curve = dp.c.make_zCDP_to_approxDP(measurement).map(1)
    return outward(float(curve.epsilon(delta)))


# ---------------------------------------------------------------------- composed cost
@dataclass(frozen=True, kw_only=True)
class ComposedCost:
    """The privacy cost of a list of events in one accounting mode.

    Attributes:
        mode: ``"paper"`` or ``"tight"``.
        epsilon: ε of the (ε, δ) guarantee.
        delta: δ of the guarantee (0 for a pure-ε guarantee).
        rho: zCDP ρ when the mode's analysis is zCDP, else None.
        pure_epsilon: Basic-composition pure ε when all events are pure, else None.
        method: Public description of the analysis used.
    """

    mode: AccountingMode
    epsilon: float
    delta: float
    rho: float | None = None
    pure_epsilon: float | None = None
    method: str = ""
    details: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly view."""
        return {
            "mode": self.mode,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "pure_epsilon": self.pure_epsilon,
            "method": self.method,
            **({"details": dict(self.details)} if self.details else {}),
        }


def compose(
    events: list[PrivacyEvent],
    *,
    mode: AccountingMode,
    delta: float,
    paper_analysis: Literal["advanced_composition", "zcdp"] = "zcdp",
) -> ComposedCost:
    """Compose events in one mode.

    Args:
        events: All events of a run.
        mode: ``"paper"`` or ``"tight"`` (see module docstring).
        delta: Target δ in (0, 1).
        paper_analysis: For paper mode, the paper's own analysis: ``"advanced_composition"`` (DualQuery,
            Theorems 4.2/4.3: the smaller of the pure and the advanced-composition ε) or ``"zcdp"``
            (Vietri et al. 2020: ε²/2 per pure step, simple conversion). With a zCDP event (e.g. Gaussian free-attribute
            marginals) ``"advanced_composition"`` falls back to ``"zcdp"``, the only one of the two that
            covers it.
    """
    pure_ok = not any(isinstance(e, ZCDPEvent) and e.count and e.rho for e in events)
    pure = basic_composition_epsilon(events) if pure_ok else None
    if mode == "tight":
        rho = zcdp_rho(events, em_bound="bounded_range")
        epsilon = approx_dp_from_zcdp(rho, delta)
        return ComposedCost(
            mode=mode,
            epsilon=epsilon,
            delta=delta,
            rho=rho,
            pure_epsilon=pure,
            method=(
                "zCDP: ε²/8 per exponential-mechanism draw (bounded range), ε²/2 per other ε-DP step, then the "
                "optimal conversion to (ε, δ) of Canonne, Kamath & Steinke 2020, The Discrete Gaussian for "
                "Differential Privacy"
            ),
        )
    if mode != "paper":
        raise AccountingError(f"accounting mode {mode!r} must be 'paper' or 'tight'")
    if paper_analysis == "advanced_composition" and pure_ok:
        advanced = advanced_composition_epsilon(events, delta)
        if pure is not None and pure <= advanced:
            return ComposedCost(
                mode=mode, epsilon=pure, delta=0.0, pure_epsilon=pure,
                method="basic composition (Gaboardi et al. 2014, Theorem 4.2)",
                details={"theorem_4_2_epsilon": pure, "theorem_4_3_epsilon": advanced},
            )
        return ComposedCost(
            mode=mode, epsilon=advanced, delta=delta, pure_epsilon=pure,
            method="advanced composition (Gaboardi et al. 2014, Theorem 4.3)",
            details={"theorem_4_2_epsilon": pure if pure is not None else math.nan, "theorem_4_3_epsilon": advanced},
        )
    # a zCDP event (Gaussian noise) has no pure-ε bound, so Theorems 4.2/4.3 do not apply; the paper-mode
    # cost is then Vietri et al. 2020's zCDP analysis, which is valid for every event type
    rho = zcdp_rho(events, em_bound="pure")
    fallback = (
        " (a zCDP event: Gaboardi et al. 2014's Theorems 4.2/4.3 do not apply)"
        if paper_analysis == "advanced_composition" else ""
    )
    return ComposedCost(
        mode=mode,
        epsilon=zcdp_to_approx_dp_simple(rho, delta),
        delta=delta,
        rho=rho,
        pure_epsilon=pure,
        method=f"zCDP as in {PAPER_ZCDP}: ε²/2 per ε-DP step, then ε = ρ + 2√(ρ ln(1/δ))" + fallback,
    )


# ---------------------------------------------------------------------- per-mode costs of a run
def best_cost(events: list[PrivacyEvent], delta: float) -> ComposedCost:
    """Tight-mode cost: the zCDP bound (optimal conversion) or the pure ε, whichever is smaller.

    Both are valid guarantees ((ε, 0)-DP implies (ε, δ)-DP), so the smaller is too.
    """
    zcdp = compose(events, mode="tight", delta=delta)
    if zcdp.pure_epsilon is not None and zcdp.pure_epsilon <= zcdp.epsilon:
        return ComposedCost(
            mode="tight", epsilon=zcdp.pure_epsilon, delta=0.0, rho=zcdp.rho, pure_epsilon=zcdp.pure_epsilon,
            method="basic composition of pure steps (smaller than the zCDP bound here)",
        )
    return zcdp


def mode_costs(
    events: list[PrivacyEvent],
    delta: float,
    *,
    paper_analysis: PaperAnalysis = "zcdp",
    pure_when_smaller: bool = False,
) -> dict[str, ComposedCost]:
    """The cost of a run's events in both accounting modes, ``{"paper": ..., "tight": ...}``.

    Args:
        events: All events of the run.
        delta: Target δ in (0, 1).
        paper_analysis: The paper's own analysis: ``"advanced_composition"`` (DualQuery) or ``"zcdp"``
            (Vietri et al. 2020), as in :func:`compose`, or ``"basic_composition"`` (HLM 2012: basic composition
            when every step is pure, else Vietri et al. 2020's zCDP analysis).
        pure_when_smaller: Tight mode reports :func:`best_cost` (the pure ε when it is below the zCDP bound) instead
            of the zCDP bound.
    """
    pure_only = not any(isinstance(e, ZCDPEvent) and e.count and e.rho for e in events)
    if paper_analysis == "basic_composition" and pure_only:
        pure = basic_composition_epsilon(events)
        paper = ComposedCost(
            mode="paper", epsilon=pure, delta=0.0, pure_epsilon=pure,
            method="basic composition (Hardt, Ligett, McSherry 2012)",
        )
    else:
        analysis = "zcdp" if paper_analysis == "basic_composition" else paper_analysis
        paper = compose(events, mode="paper", delta=delta, paper_analysis=analysis)
    tight = best_cost(events, delta) if pure_when_smaller else compose(events, mode="tight", delta=delta)
    return {"paper": paper, "tight": tight}


def fem_costs(events: list[PrivacyEvent], delta: float) -> dict[str, ComposedCost]:
    """FEM and sepFEM: paper mode and tight mode.

    Paper mode as Vietri et al. 2020 (ε₀²/2 per draw, ``ρ + 2√(ρ ln 1/δ)``); tight mode ε₀²/8, optimal conversion.
    """
    return mode_costs(events, delta, paper_analysis="zcdp")


def mwem_costs(events: list[PrivacyEvent], delta: float) -> dict[str, ComposedCost]:
    """MWEM: paper mode and tight mode (best).

    Paper mode: basic composition if all steps are pure, else Vietri et al. 2020's zCDP.
    """
    return mode_costs(events, delta, paper_analysis="basic_composition", pure_when_smaller=True)


def combined_costs(events: list[PrivacyEvent], delta: float) -> dict[str, ComposedCost]:
    """Paper-mode and tight-mode costs of a mechanism's events together with a table fit's.

    The mix of pure-ε, exponential-mechanism and zCDP events is composed in zCDP in both modes (Vietri et al. 2020's
    analysis in paper mode, the tight conversion in tight mode; the tight cost is the smaller of that and the
    pure ε when every step is pure).
    """
    return mode_costs(events, delta, paper_analysis="zcdp", pure_when_smaller=True)
