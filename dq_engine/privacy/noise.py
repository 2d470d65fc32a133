r"""Exact additive noise on integer counts: the discrete Laplace and discrete Gaussian mechanisms.

Both samplers are Canonne, Kamath & Steinke (2020, "The Discrete Gaussian for Differential Privacy",
Algorithms 1-3) run on integers only, with the run's :class:`numpy.random.Generator` as the source of
uniform integers (``Generator.integers`` is an exact uniform sampler on ``{0, ..., m - 1}``). No floating-point
number is rounded on the way, so the output distribution is *exactly* the stated one; the only parameters are
rationals, and where a float parameter is not representable with the integers used we round it so that the
noise gets **larger** (never smaller), which keeps the stated guarantee.

* :func:`discrete_laplace`: ``P[Z = z] ∝ exp(-|z| / scale)`` on the integers. Adding it to an integer-valued
  query of L1 sensitivity ``Δ₁`` (counts) is ``Δ₁ / scale``-DP (pure ε).
* :func:`discrete_gaussian`: ``P[Z = z] ∝ exp(-z² / (2σ²))`` on the integers. Adding it to an integer-valued
  query of L2 sensitivity ``Δ₂`` (counts) is ``Δ₂² / (2σ²)``-zCDP (Canonne, Kamath & Steinke 2020, Theorem 4), the
  same ρ as the continuous Gaussian mechanism.

**Why not OpenDP's samplers.** OpenDP (a dependency) samples both distributions exactly too, but from its own
operating-system-seeded generator, which no seed can reproduce. Seeded runs (tests, audited replays) must
reproduce every draw, so the engine has one sampler, on the run's generator: seeded runs replay it, unseeded
runs feed it from the cryptographic generator of :func:`dq_engine.privacy.rng.make_rng`. The tests check these
samplers against OpenDP's (same distribution) and check the privacy ratio empirically.

**Bit sizes.** The rejection steps draw uniforms below ``den · K`` with numpy int64; parameters are chosen so
that every quantity stays below ``2^62``. Draws whose intermediate values would not fit (probability below
``e^{-60}`` per draw) are redone with Python integers, so there is no overflow and no truncation anywhere.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dq_engine.errors import ConfigError

__all__ = [
    "MAX_GAUSSIAN_SIGMA",
    "MAX_LAPLACE_SCALE",
    "bernoulli_exp_minus",
    "discrete_gaussian",
    "discrete_gaussian_noise",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_noise",
    "discrete_laplace_scale",
]

MAX_LAPLACE_SCALE = float(2**40)
"""Largest scale (in counts) :func:`discrete_laplace` accepts (``U + tV`` must fit int64)."""

MAX_GAUSSIAN_SIGMA = float(2**24)
"""Largest σ (in counts) :func:`discrete_gaussian` accepts (the rejection step's integers must fit int64)."""

_LAPLACE_SCALE_BITS = 40  # the discrete Laplace scale is t/s with t < 2^41 (t ≥ 2^40 when scale ≥ 1)
_GAUSSIAN_PRECISION_BITS = 25  # σ'² = t·a/c with c a power of two, c·σ ≈ 2^25
_FACTORIAL_20 = math.factorial(20)  # < 2^62
_MIN_BATCH = 64  # candidates drawn per rejection pass at least
_GAUSSIAN_TAIL = 64  # |Y| ≤ 64·t handled in int64; larger |Y| (probability ≈ e^{-64}) in Python integers


# ---------------------------------------------------------------------- Bernoulli(exp(-γ)), γ rational
def _bernoulli_exp_fraction(numerator: np.ndarray, denominator: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-γ)) for ``γ = numerator/denominator ∈ [0, 1]`` (CKS Algorithm 1, vectorised).

    ``K ← 1``; while ``Bernoulli(γ/K)`` succeeds, ``K ← K + 1``; return ``K`` odd. ``Bernoulli(γ/K)`` is
    ``uniform{0..den·K-1} < num``, exact with integers.
    """
    result = np.empty(len(numerator), dtype=bool)
    active = np.arange(len(numerator))
    k = 1
    while active.size:
        if denominator * k >= 2**62:
            for i in active:  # γ^K/K! is below 2^-200 by now; finish exactly with Python integers
                result[i] = _bernoulli_exp_fraction_python(int(numerator[i]), denominator, k, rng)
            break
        success = rng.integers(0, denominator * k, size=active.size) < numerator[active]
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def _bernoulli_exp_fraction_python(numerator: int, denominator: int, k: int, rng: np.random.Generator) -> bool:
    """CKS Algorithm 1 continued from ``K = k`` with Python integers (any size)."""
    while _uniform_below(denominator * k, rng) < numerator:
        k += 1
    return k % 2 == 1


def _uniform_below(bound: int, rng: np.random.Generator) -> int:
    """Exact uniform integer in ``[0, bound)`` for any positive Python integer (rejection on 62-bit words)."""
    if bound < 2**62:
        return int(rng.integers(0, bound))
    bits = bound.bit_length()
    while True:
        value = 0
        for _ in range(0, bits, 62):
            value = (value << 62) | int(rng.integers(0, 2**62))
        value >>= (-bits) % 62
        if value < bound:
            return value


def bernoulli_exp_minus(numerator: np.ndarray, denominator: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(``exp(-numerator/denominator)``) draws, one per element.

    Canonne, Kamath & Steinke 2020, Algorithm 1.

    ``exp(-γ) = exp(-1)^⌊γ⌋ · exp(-(γ - ⌊γ⌋))``: ``⌊γ⌋`` independent Bernoulli(``e^{-1}``) coins (stopping at
    the first failure) and one Bernoulli of the fractional part, all with integer arithmetic.

    Args:
        numerator: Non-negative integers, shape ``(k,)``.
        denominator: A positive integer below ``2^56``.
        rng: Generator.

    Returns:
        Boolean array, ``True`` with probability ``exp(-numerator/denominator)`` each.
    """
    numerator = np.asarray(numerator, dtype=np.int64)
    denominator = int(denominator)
    if not 1 <= denominator < 2**56 or (numerator.size and int(numerator.min()) < 0):
        raise ConfigError("bernoulli_exp_minus needs numerator >= 0 and 1 <= denominator < 2^56")
    whole, fraction = np.divmod(numerator, denominator)
    result = _bernoulli_exp_fraction(fraction, denominator, rng)
    pending = np.flatnonzero(result & (whole > 0))
    spent = np.zeros(len(numerator), dtype=np.int64)
    while pending.size:  # e^{-1} coins: each survives with probability e^{-1}, so this loop is short
        coin = _bernoulli_exp_minus_one(pending.size, rng)
        result[pending[~coin]] = False
        spent[pending] += 1
        pending = pending[coin & (spent[pending] < whole[pending])]
    return result


def _bernoulli_exp_minus_one(size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` Bernoulli(``e^{-1}``) coins: Algorithm 1 with ``γ = 1``, one uniform integer per coin.

    With ``γ = 1``, ``Bernoulli(γ/K)`` is ``U_K = 0`` for ``U_K`` uniform on ``{0..K-1}``, and the coin is
    ``K`` odd for the first ``K ≥ 2`` with ``U_K ≠ 0``. The digits ``U_2, ..., U_20`` of one uniform integer
    below ``20!`` in the factorial number system are independent and uniform, so one draw decides a coin unless
    all 19 digits are 0 (probability ``1/20!``); such a coin continues from ``K = 21`` with fresh uniforms.
    """
    words = rng.integers(0, _FACTORIAL_20, size=size)
    stop = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    for k in range(2, 21):
        digit = words % k
        nonzero = digit != 0
        stop[active[nonzero]] = k
        active, words = active[~nonzero], words[~nonzero] // k
        if not active.size:
            break
    for j in active:
        k = 21
        while int(rng.integers(0, k)) == 0:
            k += 1
        stop[j] = k
    return stop % 2 == 1


def _check_noise_parameter(name: str, value: float, supported: float, advice: str) -> None:
    """A noise scale must be finite, > 0 and at most ``supported`` counts (``advice`` says what to do instead)."""
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{name} ({value}) must be finite and > 0")
    if value > supported:
        raise ConfigError(f"{name} ({value:g}) is above the supported {supported:g} counts; {advice}")


# ---------------------------------------------------------------------- discrete Laplace
@lru_cache(maxsize=256)
def discrete_laplace_scale(scale: float) -> Fraction:
    """The exact scale :func:`discrete_laplace` uses for ``scale``: ``t/s ≥ scale``, ``s`` a power of two.

    A float is a dyadic rational, so the scale is kept exactly unless its numerator would need more than
    41 bits; then it is rounded *up* (relative change below ``2^-40``), i.e. slightly more noise.
    """
    _check_noise_parameter("discrete Laplace scale", scale, MAX_LAPLACE_SCALE, "spend more budget on this measurement")
    exact = Fraction(scale)
    shift = _LAPLACE_SCALE_BITS - math.floor(math.log2(scale))
    denominator = 2**shift if shift > 0 else 1
    if exact.denominator <= denominator and exact.numerator * (denominator // exact.denominator) < 2**62:
        return exact
    numerator = math.ceil(exact * denominator)
    return Fraction(numerator, denominator)


def discrete_laplace_noise(size: int, *, scale: float, rng: np.random.Generator) -> np.ndarray:
    r"""``size`` independent draws from the discrete Laplace distribution ``P[z] ∝ exp(-|z|/scale)``.

    Canonne, Kamath & Steinke 2020, Algorithm 2 with ``scale = t/s`` (:func:`discrete_laplace_scale`):
    ``U ~ uniform{0..t-1}`` accepted with probability ``exp(-U/t)``; ``V`` counts successes of ``e^{-1}`` coins;
    ``X = U + tV`` is geometric with ratio ``e^{-1/t}``; ``Y = ⌊X/s⌋``; a fair sign, rejecting ``-0``.

    Args:
        size: Number of draws.
        scale: ``b > 0`` (counts); rounded up as :func:`discrete_laplace_scale` says.
        rng: Generator.

    Returns:
        int64 array of shape ``(size,)``.
    """
    exact = discrete_laplace_scale(scale)
    t, s = exact.numerator, exact.denominator
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        # candidates are i.i.d.; a few extra per pass save passes (each pass costs numpy calls, not draws)
        batch = max(size - filled, _MIN_BATCH)
        u = rng.integers(0, t, size=batch)
        u = u[bernoulli_exp_minus(u, t, rng)]
        y = (u + t * _count_exp_minus_one_successes(u.size, rng)) // s
        negative = rng.integers(0, 2, size=u.size).astype(bool)
        accepted = np.where(negative, -y, y)[~(negative & (y == 0))][: size - filled]
        out[filled : filled + accepted.size] = accepted
        filled += accepted.size
    return out


def _count_exp_minus_one_successes(size: int, rng: np.random.Generator) -> np.ndarray:
    """Number of successes before the first failure of i.i.d. Bernoulli(``e^{-1}``) coins, per element."""
    count = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    while active.size:
        coin = _bernoulli_exp_minus_one(active.size, rng)
        count[active[coin]] += 1
        active = active[coin]
    return count


def discrete_laplace(counts: np.ndarray, *, scale: float, rng: np.random.Generator) -> np.ndarray:
    r"""Integer counts plus exact discrete Laplace noise: ``(Δ₁/scale)``-DP for L1 sensitivity ``Δ₁``.

    The privacy guarantee: for integer-valued ``f`` with ``‖f(D) - f(D')‖₁ ≤ Δ₁`` on neighbours,
    ``f(D) + Z`` with i.i.d. ``Z_i ∝ exp(-|z|/scale)`` is ``ε``-DP with ``ε = Δ₁/scale`` (the ratio of the two
    densities at any output is at most ``exp(‖f(D) - f(D')‖₁/scale)``).

    Args:
        counts: Integer counts (any shape; floats holding integers are accepted, other floats refused).
        scale: Noise scale ``b = Δ₁/ε`` in counts; rounded *up* to a rational as
            :func:`discrete_laplace_scale` says.
        rng: Generator.

    Returns:
        int64 array of ``counts``'s shape.

    Raises:
        ConfigError: If ``counts`` is not integer-valued or ``scale`` is not finite and positive.
    """
    values = _as_integer_counts(counts)
    return values + discrete_laplace_noise(values.size, scale=scale, rng=rng).reshape(values.shape)


# ---------------------------------------------------------------------- discrete Gaussian
def discrete_gaussian_variance(sigma: float) -> tuple[int, Fraction]:
    """The exact parameters :func:`discrete_gaussian` uses for ``sigma``: ``(t, σ'²)`` with ``σ'² ≥ σ²``.

    ``t = ⌊σ⌋ + 1`` (CKS Algorithm 3) and ``σ'² = t·a/c`` with ``c`` a power of two near ``2^25/σ`` and
    ``a = ⌈σ² c / t⌉``: ``σ²`` rounded *up*, by less than ``2^-24`` relatively, so the rejection step's
    integers fit int64 and the noise is never smaller than asked.
    """
    _check_noise_parameter(
        "discrete Gaussian sigma", sigma, MAX_GAUSSIAN_SIGMA,
        "spend more budget on this measurement or measure fewer cells together",
    )
    t = math.floor(sigma) + 1
    a, c = _gaussian_integers(sigma)
    return t, Fraction(t * a, c)


def discrete_gaussian_noise(size: int, *, sigma: float, rng: np.random.Generator) -> np.ndarray:
    r"""``size`` independent draws from the discrete Gaussian ``P[z] ∝ exp(-z²/(2σ'²))`` (``σ'² ≥ σ²``).

    Canonne, Kamath & Steinke 2020, Algorithm 3: ``Y ~`` discrete Laplace of scale ``t``, accepted with probability
    ``exp(-(|Y| - σ'²/t)² / (2σ'²))``. With ``σ'² = t a/c`` the exponent is the integer fraction
    ``(c|Y| - a)² / (2 t a c)``.

    Args:
        size: Number of draws.
        sigma: ``σ > 0`` in counts, at most :data:`MAX_GAUSSIAN_SIGMA`; ``σ²`` is rounded up as
            :func:`discrete_gaussian_variance` says.
        rng: Generator.

    Returns:
        int64 array of shape ``(size,)``.
    """
    t, _ = discrete_gaussian_variance(sigma)  # checks sigma
    a, c = _gaussian_integers(sigma)
    denominator = 2 * t * a * c
    tail = _GAUSSIAN_TAIL * t
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        y = discrete_laplace_noise(max(size - filled, _MIN_BATCH), scale=float(t), rng=rng)
        magnitude = np.abs(y)
        inside = magnitude <= tail
        accept = np.zeros(y.size, dtype=bool)
        numerator = (c * magnitude[inside] - a) ** 2
        accept[inside] = bernoulli_exp_minus(numerator, denominator, rng)
        for j in np.flatnonzero(~inside):  # probability ≈ e^{-64} per draw: exact Python integers
            accept[j] = _bernoulli_exp_minus_python((c * int(magnitude[j]) - a) ** 2, denominator, rng)
        accepted = y[accept][: size - filled]
        out[filled : filled + accepted.size] = accepted
        filled += accepted.size
    return out


@lru_cache(maxsize=256)
def _gaussian_integers(sigma: float) -> tuple[int, int]:
    """``(a, c)`` with ``σ'² = t·a/c`` as in :func:`discrete_gaussian_variance`."""
    t = math.floor(sigma) + 1
    c = 2 ** max(0, _GAUSSIAN_PRECISION_BITS - math.ceil(math.log2(t)))
    return math.ceil(Fraction(sigma) ** 2 * c / t), c


def _bernoulli_exp_minus_python(numerator: int, denominator: int, rng: np.random.Generator) -> bool:
    """Bernoulli(``exp(-numerator/denominator)``) with Python integers (any size)."""
    whole, fraction = divmod(numerator, denominator)
    for _ in range(whole):
        if not _bernoulli_exp_minus_one(1, rng)[0]:
            return False
    return _bernoulli_exp_fraction_python(fraction, denominator, 1, rng)


def discrete_gaussian(counts: np.ndarray, *, sigma: float, rng: np.random.Generator) -> np.ndarray:
    r"""Integer counts plus exact discrete Gaussian noise: ``Δ₂²/(2σ²)``-zCDP for L2 sensitivity ``Δ₂``.

    The privacy guarantee (Canonne, Kamath & Steinke 2020, Theorem 4): for integer-valued ``f`` with
    ``‖f(D) - f(D')‖₂ ≤ Δ₂`` on neighbours, ``f(D) + Z`` with i.i.d. ``Z_i ∝ exp(-z²/(2σ²))`` on the integers
    is ``ρ``-zCDP with ``ρ = Δ₂²/(2σ²)``. The sampler uses ``σ'² ≥ σ²`` (:func:`discrete_gaussian_variance`),
    so the guarantee stated with ``σ`` holds.

    Args:
        counts: Integer counts (any shape; floats holding integers are accepted, other floats refused).
        sigma: Noise standard-deviation parameter ``σ = Δ₂/√(2ρ)`` in counts.
        rng: Generator.

    Returns:
        int64 array of ``counts``'s shape.

    Raises:
        ConfigError: If ``counts`` is not integer-valued or ``sigma`` is out of range.
    """
    values = _as_integer_counts(counts)
    return values + discrete_gaussian_noise(values.size, sigma=sigma, rng=rng).reshape(values.shape)


def _as_integer_counts(counts: np.ndarray) -> np.ndarray:
    values = np.asarray(counts)
    if values.dtype.kind in "iub":
        return values.astype(np.int64)
    if values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    raise ConfigError("exact noise is added to integer counts; pass counts, not proportions or floats")
