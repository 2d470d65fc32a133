"""The single place where random generators are made.

Every generator is a :class:`numpy.random.Generator` over the **ChaCha20** stream cipher (``randomgen.ChaCha``,
20 rounds, the cipher of RFC 8439 and of the Linux kernel's random-number generator), keyed from a
:class:`numpy.random.SeedSequence`:

* real releases (no seed): the key comes from 128 bits of operating-system entropy (:func:`fresh_seed`), so
  the stream is a cryptographically secure pseudo-random stream that nobody can predict or reproduce;
* tests and audited replays (a seed): the key comes from the seed, so the run reproduces exactly. A seeded
  run is exactly as secret as its seed.

Seeded and unseeded runs use the same bit generator, so the tests exercise the generator real releases use.
Children made by :func:`spawn` are ChaCha20 streams keyed by the parent's spawned seed sequences.

Every function in the engine that draws randomness takes a :class:`numpy.random.Generator` argument and never
touches global state. Privacy-relevant draws use only ``Generator.integers`` (exact uniform integers: numpy
rejects out-of-range words, it never reduces modulo the bound), see :mod:`dq_engine.privacy.noise`.
"""

from __future__ import annotations

import secrets

import numpy as np
from randomgen import ChaCha

__all__ = ["CHACHA_ROUNDS", "fresh_seed", "make_rng", "spawn"]

CHACHA_ROUNDS = 20
"""ChaCha rounds of every generator (20: the standard, full-strength cipher)."""


def fresh_seed() -> int:
    """Return a 128-bit seed from the operating system's secure entropy source."""
    return secrets.randbits(128)


def make_rng(seed: int | None = None) -> np.random.Generator:
    """Make a ChaCha20 generator: seeded for tests and audits, keyed from OS entropy otherwise.

    Args:
        seed: A non-negative integer for a reproducible stream, or ``None`` (the default for real
            releases) to draw the key from the operating system's secure entropy source.

    Returns:
        A generator over a ChaCha20 bit generator.

    Raises:
        ValueError: If ``seed`` is negative.
    """
    if seed is not None and seed < 0:
        raise ValueError(f"seed ({seed}) must be a non-negative integer or None")
    entropy = fresh_seed() if seed is None else seed
    return np.random.Generator(ChaCha(np.random.SeedSequence(entropy), rounds=CHACHA_ROUNDS))


def spawn(rng: np.random.Generator, count: int) -> list[np.random.Generator]:
    """Derive ``count`` independent child generators from ``rng`` (reproducible when ``rng`` is seeded).

    Children are independent of how many workers later consume them, so results do not depend on the
    degree of parallelism. Each child has the parent's bit-generator type (ChaCha20 for generators made
    by :func:`make_rng`).
    """
    return list(rng.spawn(count))
