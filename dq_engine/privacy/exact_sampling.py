r"""Exact exponential-mechanism draws over a negation-closed query class, with integer arithmetic.

The query player's distribution over ``2N`` signed queries gives query ``q_i`` the weight ``exp(L_i)`` and its
negation ``q̄_i`` the weight ``exp(-L_i)`` (:mod:`dq_engine.privacy.mw`, :mod:`dq_engine.privacy.exponential_mechanism`);
``L`` are the float64 log-weights the mechanism computed. :func:`sample_signed_pairs` draws from exactly that
distribution (the ideal one for the given ``L``), not from a floating-point approximation of it:

1. **Proposal, integers only.** Pair ``i`` gets the integer weight
   ``W_i = ⌊2^K · P̂_i · (1 + 2^-20)⌋ + 1``, where ``P̂_i`` is the float64 value of
   ``P_i = e^{L_i - M} + e^{-L_i - M}`` (``M = max|L|``) and ``K`` is as large as int64 allows (``Σ W < 2^62``).
   ``W_i ≥ 2^K P_i`` for every ``i`` (this is the one assumption, see below). One int64 cumulative sum, one
   exact uniform integer ``u < ΣW`` per draw (``Generator.integers``) and ``searchsorted``: pair ``i`` is
   proposed with probability exactly ``W_i / ΣW``.
2. **Sign and acceptance, exact.** A uniform real ``V ∈ [0, W_i)`` (an integer part and as many further random
   bits as needed) is compared with ``2^K e^{L_i - M}`` and ``2^K (e^{L_i - M} + e^{-L_i - M})``: below the
   first, ``q_i``; below the second, ``q̄_i``; otherwise the proposal is rejected and drawn again. So
   ``P[q_i] ∝ W_i · 2^K e^{L_i - M} / W_i = 2^K e^{L_i - M}``: exactly the target, whatever the proposal
   weights are, as long as they are upper bounds. Comparisons are decided in float64 when ``V`` is farther
   than a relative ``2^-30`` from the threshold (a comparison that float64 cannot get wrong), else with
   correctly rounded decimal arithmetic (:meth:`decimal.Decimal.exp`) on an interval that shrinks until the
   comparison is decided (probability about ``2^-28`` per draw).

**The assumption.** ``W_i ≥ 2^K P_i`` needs numpy's float64 ``exp`` to be within a relative ``2^-21`` of the
true value (the ``(1 + 2^-20)`` margin), and the float64 filter needs it within ``2^-31``. A libm-quality
float64 ``exp`` is within a few ULP (``≈ 2^-50``); ``tests/privacy/test_exact_sampling.py`` checks numpy's ``exp``
against correctly rounded decimal values (2,000 arguments, bound ``2^-45``; worst seen ``≈ 2^-53``). Every
comparison decided in exact arithmetic also checks ``2^K P_i ≤ W_i`` and raises :class:`SamplingAssumptionError`
if it fails.

Rejections are rare: about ``2^-20 + (N + Z)/2^K`` per draw (``≈ 5·10⁻⁶`` at two million queries).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from fractions import Fraction

import numpy as np

from dq_engine.errors import DQEngineError

__all__ = [
    "SamplingAssumptionError",
    "bernoulli_exp",
    "bernoulli_real",
    "exp_interval",
    "pair_weights_into",
    "sample_signed_pairs",
]

FILTER_TOLERANCE = 2.0**-30
"""Relative distance from a threshold below which a comparison is decided in exact arithmetic."""

_PROPOSAL_MARGIN = 2.0**-20
_FRACTION_BITS = 62


class SamplingAssumptionError(DQEngineError, ArithmeticError):
    """A proposal weight was found below its target: float64 ``exp`` is off by more than ``2^-21``."""


def fixed_point_bits(items: int) -> int:
    """``K`` such that ``items`` weights of at most ``2^{K+1}(1 + 2^-20) + 1`` sum below ``2^62``."""
    return 60 - math.ceil(math.log2(items + 1))


def pair_weights_into(
    log_weight: np.ndarray, out: np.ndarray, scratch: np.ndarray, shift: float | None = None
) -> np.ndarray:
    """Write ``P̂_i = e^{|L_i| - M} (1 + e^{-2|L_i|})`` into the float64 ``out`` using ``scratch``; return ``out``.

    ``P̂_i`` is the float64 value of ``e^{L_i - M} + e^{-L_i - M}``, the weight of the pair ``{q_i, q̄_i}`` scaled by
    ``e^{-M}``; ``M`` is ``shift``, or ``max |L|`` when None. No allocation.
    """
    magnitude = np.abs(log_weight, out=out)
    if shift is None:
        shift = magnitude.max()
    np.multiply(magnitude, -2.0, out=scratch)
    np.exp(scratch, out=scratch)
    scratch += 1.0
    magnitude -= shift
    np.exp(magnitude, out=magnitude)
    magnitude *= scratch
    return magnitude


def proposal_weights(log_weight: np.ndarray, shift: float, bits: int, out: np.ndarray, scratch: np.ndarray) -> None:
    """Write ``W_i = ⌊2^K P̂_i (1 + 2^-20)⌋ + 1`` (int64) into ``out``, using the float64 ``scratch``.

    ``P̂_i = e^{|L_i| - M} (1 + e^{-2|L_i|})`` (:func:`pair_weights_into`, ``M = shift``).
    """
    # P̂ in scratch, with out's buffer as float64 workspace until the final cast
    magnitude = pair_weights_into(log_weight, scratch, out.view(np.float64), shift)
    magnitude *= math.ldexp(1.0 + _PROPOSAL_MARGIN, bits)
    np.copyto(out, magnitude, casting="unsafe")  # truncation = floor for these non-negative values
    out += 1


def sample_signed_pairs(
    log_weight: np.ndarray,
    count: int,
    rng: np.random.Generator,
    *,
    zero_pairs: int = 0,
    absent: np.ndarray | None = None,
    buffers: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` independent exact draws: ``q_i`` with weight ``e^{L_i}``, ``q̄_i`` with weight ``e^{-L_i}``.

    Args:
        log_weight: ``L``, float64, shape ``(N,)``, finite.
        count: Number of draws.
        rng: Generator (only ``integers`` is used).
        zero_pairs: ``Z`` further pairs whose ``L`` is 0 (not stored); a draw among them is returned as
            index ``N`` (the caller picks which one, uniformly: they all have the same weight).
        absent: Optional boolean mask, shape ``(N,)``: entries that are no query at all (padding that keeps the
            arrays at a public size); their proposal weight is 0, so they are never drawn.
        buffers: Optional ``(int64, float64)`` scratch arrays of shape ``(N,)`` (reused, no allocation).

    Returns:
        ``(index, negated)``: int64 indices in ``[0, N]`` (``N`` only when ``zero_pairs > 0``) and booleans.

    Raises:
        ValueError: If ``log_weight`` is not finite or ``count`` is negative.
        SamplingAssumptionError: If a proposal weight is found below its target (see the module docstring).
    """
    log_weight = np.asarray(log_weight, dtype=np.float64)
    size = int(log_weight.shape[0])
    if count < 0:
        raise ValueError(f"count ({count}) must be >= 0")
    if size + zero_pairs < 1:
        raise ValueError("there is no query to draw from")
    if count == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    shift = max(float(log_weight.max(initial=0.0)), -float(log_weight.min(initial=0.0)))
    if not math.isfinite(shift):
        raise ValueError("log-weights must be finite")
    bits = fixed_point_bits(size + zero_pairs)
    weights, scratch = buffers if buffers is not None else (np.empty(size, np.int64), np.empty(size, np.float64))
    proposal_weights(log_weight, shift, bits, weights, scratch)
    if absent is not None:
        weights[absent] = 0  # a zero-width step of the cumulative sum: searchsorted never lands on it
    cumulative = np.cumsum(weights, out=weights)
    explicit_total = int(cumulative[-1]) if size else 0
    zero_weight = math.floor(2.0 * math.exp(-shift) * math.ldexp(1.0 + _PROPOSAL_MARGIN, bits)) + 1
    total = explicit_total + zero_pairs * zero_weight
    if total == 0:
        raise ValueError("there is no query to draw from (every entry is absent)")
    index_out = np.empty(count, dtype=np.int64)
    negated_out = np.empty(count, dtype=bool)
    filled = 0
    while filled < count:
        wanted = count - filled
        target = rng.integers(0, total, size=wanted)
        index = np.searchsorted(cumulative, target, side="right") if size else np.zeros(wanted, dtype=np.int64)
        in_zero_block = index >= size
        upper = np.where(in_zero_block, zero_weight, 0)
        explicit = np.flatnonzero(~in_zero_block)
        upper[explicit] = cumulative[index[explicit]] - np.where(
            index[explicit] > 0, cumulative[np.maximum(index[explicit] - 1, 0)], 0
        )
        value = np.where(in_zero_block, 0.0, log_weight[np.minimum(index, max(size - 1, 0))] if size else 0.0)
        outcome = _signed_outcomes(value, upper, shift, bits, rng)
        accepted = outcome >= 0
        taken = int(accepted.sum())
        index_out[filled : filled + taken] = index[accepted]
        negated_out[filled : filled + taken] = outcome[accepted] == 1
        filled += taken
    return index_out, negated_out


def _signed_outcomes(
    value: np.ndarray, upper: np.ndarray, shift: float, bits: int, rng: np.random.Generator
) -> np.ndarray:
    """Per proposal: 0 (``q_i``), 1 (``q̄_i``) or -1 (rejected), from ``V ~ U[0, W_i)``."""
    whole = rng.integers(0, upper)
    fraction = rng.integers(0, 2**_FRACTION_BITS, size=len(upper))
    scale = math.ldexp(1.0, -bits)
    low = (whole.astype(np.float64) + np.ldexp(fraction.astype(np.float64), -_FRACTION_BITS)) * scale
    high = low * (1.0 + 2.0**-50) + 2.0 * math.ldexp(scale, -_FRACTION_BITS)  # V's interval is 2^-62 wide
    low *= 1.0 - 2.0**-50
    positive = np.exp(value - shift)
    both = positive + np.exp(-value - shift)
    outcome = np.full(len(upper), 2, dtype=np.int8)  # 2 = undecided
    outcome[high < positive * (1.0 - FILTER_TOLERANCE)] = 0
    outcome[(low > positive * (1.0 + FILTER_TOLERANCE)) & (high < both * (1.0 - FILTER_TOLERANCE))] = 1
    outcome[low > both * (1.0 + FILTER_TOLERANCE)] = -1
    for j in np.flatnonzero(outcome == 2):
        outcome[j] = _exact_outcome(
            float(value[j]), shift, bits, int(upper[j]), int(whole[j]), int(fraction[j]), rng
        )
    return outcome


def exp_interval(exponent: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """Rigorous bounds on ``e^exponent`` from correctly rounded decimal arithmetic with ``digits`` digits."""
    context = Context(prec=digits + 10, Emin=MIN_EMIN, Emax=MAX_EMAX)
    approximate = context.divide(Decimal(exponent.numerator), Decimal(exponent.denominator))
    value = Fraction(context.exp(approximate))
    # input rounding ≤ |x|·10^-(digits+9) relative, output rounding ≤ 10^-(digits+9): together below
    # (|x| + 2)·10^-digits for every x the sampler meets
    error = Fraction(math.floor(abs(exponent)) + 2, 10**digits)
    return value * (1 - error), value * (1 + error)


def _exact_outcome(
    value: float, shift: float, bits: int, upper: int, whole: int, fraction: int, rng: np.random.Generator
) -> int:
    """Decide one comparison of ``V`` with the two thresholds exactly (refining ``V`` and the precision)."""
    scale = Fraction(2**bits)
    positive_exponent = Fraction(value) - Fraction(shift)
    negative_exponent = -Fraction(value) - Fraction(shift)
    fraction_bits = _FRACTION_BITS
    digits = 40
    while True:
        v_low = whole + Fraction(fraction, 2**fraction_bits)
        v_high = v_low + Fraction(1, 2**fraction_bits)
        p_low, p_high = exp_interval(positive_exponent, digits)
        n_low, n_high = exp_interval(negative_exponent, digits)
        first_low, first_high = scale * p_low, scale * p_high
        second_low, second_high = first_low + scale * n_low, first_high + scale * n_high
        if second_low > upper:
            raise SamplingAssumptionError(
                "a proposal weight is below its exact target: float64 exp is less accurate than 2^-21 here; "
                "report this platform (numpy build and CPU)"
            )
        if v_high <= first_low:
            return 0
        if v_low >= first_high and v_high <= second_low:
            return 1
        if v_low >= second_high:
            return -1
        fraction = (fraction << _FRACTION_BITS) | int(rng.integers(0, 2**_FRACTION_BITS))
        fraction_bits += _FRACTION_BITS
        digits *= 2


def bernoulli_real(
    bounds: Callable[[int], tuple[Fraction, Fraction]], size: int, rng: np.random.Generator
) -> np.ndarray:
    """``size`` exact Bernoulli(``p``) draws for a real ``p`` known through rigorous bounds.

    Each draw compares a uniform real ``V`` (62 random bits at a time, drawn only as far as needed) with ``p``:
    ``True`` iff ``V < p``, which has probability exactly ``p``. ``bounds(digits)`` returns
    ``p_low ≤ p ≤ p_high`` whose width shrinks as ``digits`` grows; the first 62 bits decide unless ``V`` falls
    within the first bounds' width of ``p`` (probability about ``2^-61``).

    Args:
        bounds: Rigorous bounds on ``p`` for a number of decimal digits.
        size: Number of draws.
        rng: Generator (only ``integers`` is used).
    """
    digits = 40
    low, high = bounds(digits)
    scale = 2**_FRACTION_BITS
    below = math.floor(low * scale)  # V < p for sure when (w + 1)/2^62 <= low
    above = math.ceil(high * scale)  # V >= p for sure when w/2^62 >= high
    words = rng.integers(0, scale, size=size)
    result = words < below
    for j in np.flatnonzero((words >= below) & (words < above)):
        result[j] = _word_below(int(words[j]), bounds, rng)
    return result


def bernoulli_exp(log_probability: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(``e^x``) draws for float64 exponents ``x ≤ 0`` (one per element).

    A 62-bit uniform word decides in float64 when it is farther than a relative :data:`FILTER_TOLERANCE` from
    ``e^x`` (numpy's ``exp`` is far more accurate than that in the normal range; a subnormal ``e^x`` is below
    every word but 0, which goes to the exact path); otherwise :func:`bernoulli_real` decides with rigorous
    decimal bounds on ``e^x``, drawing further bits as needed.

    Raises:
        ValueError: If an exponent is positive or not finite.
    """
    exponent = np.asarray(log_probability, dtype=np.float64)
    if exponent.size and not (np.all(np.isfinite(exponent)) and exponent.max() <= 0):
        raise ValueError("bernoulli_exp needs finite exponents <= 0")
    scale = 2**_FRACTION_BITS
    words = rng.integers(0, scale, size=exponent.shape)
    probability = np.exp(exponent)
    low = np.ldexp(words.astype(np.float64), -_FRACTION_BITS) * (1.0 - 2.0**-50)
    high = np.ldexp(words.astype(np.float64) + 2.0, -_FRACTION_BITS) * (1.0 + 2.0**-50)
    result = high < probability * (1.0 - FILTER_TOLERANCE)
    undecided = np.flatnonzero(~result & ~(low > probability * (1.0 + FILTER_TOLERANCE)))
    for j in undecided:
        target = Fraction(float(exponent.flat[j]))
        word = int(words.flat[j])
        result.flat[j] = _word_below(word, lambda digits, x=target: exp_interval(x, digits), rng)
    return result


def _word_below(word: int, bounds: Callable[[int], tuple[Fraction, Fraction]], rng: np.random.Generator) -> bool:
    """``V < p`` for ``V`` uniform whose first 62 bits are ``word`` (further bits drawn as needed)."""
    fraction, bits, digits = word, _FRACTION_BITS, 40
    while True:
        low, high = bounds(digits)
        if Fraction(fraction + 1, 2**bits) <= low:
            return True
        if Fraction(fraction, 2**bits) >= high:
            return False
        fraction = (fraction << _FRACTION_BITS) | int(rng.integers(0, 2**_FRACTION_BITS))
        bits += _FRACTION_BITS
        digits *= 2
