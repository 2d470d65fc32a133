"""The single place where random generators are made.

Real releases draw from operating-system entropy (``secrets``-grade, via :class:`numpy.random.SeedSequence`
with no seed); a seed is accepted only for tests and audited re-runs. Every function in the engine that
draws randomness takes a :class:`numpy.random.Generator` argument and never touches global state.
"""

from __future__ import annotations

import secrets

import numpy as np

__all__ = ["fresh_seed", "make_rng", "spawn"]


def fresh_seed() -> int:
    """Return a 128-bit seed from the operating system's secure entropy source."""
    return secrets.randbits(128)


def make_rng(seed: int | None = None) -> np.random.Generator:
    """Make a generator: seeded for tests and audits, OS entropy otherwise.

    Args:
        seed: A non-negative integer for a reproducible stream, or ``None`` (the default for real
            releases) to draw the seed from the operating system's secure entropy source.

    Returns:
        A PCG64DXSM-backed generator.

    Raises:
        ValueError: If ``seed`` is negative.
    """
    if seed is not None and seed < 0:
        raise ValueError(f"seed ({seed}) must be a non-negative integer or None")
    entropy = fresh_seed() if seed is None else seed
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(entropy)))


def spawn(rng: np.random.Generator, count: int) -> list[np.random.Generator]:
    """Derive ``count`` independent child generators from ``rng`` (reproducible when ``rng`` is seeded).

    Children are independent of how many workers later consume them, so results do not depend on the
    degree of parallelism.
    """
    return list(rng.spawn(count))
