"""Baselines every error report compares against, at the same budget.

* **zeros** -- answer 0 to every query (DualQuery paper §6's trivial baseline).
* **uniform** -- the uniform distribution over the universe
  (:func:`dq_engine.data.answers.uniform_answers`).
* **independent Laplace** (pure ε) -- each marginal's queried cells get Laplace noise; the budget is split
  evenly across the ``M`` marginals. Under replace-one neighbours a record moves at most two cells of a
  marginal by one, so the L1 sensitivity of a marginal's counts is ``min(2, cells queried)``.
* **independent Gaussian** (ρ-zCDP) -- the same with Gaussian noise, ρ split evenly; L2 sensitivity
  ``√min(2, cells)``.

Answers are clipped to [0, 1]. These are *not* synthetic data: they are the "simpler perturbation
approaches" the papers compare with.
"""

from __future__ import annotations

import numpy as np

from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload
from dq_engine.errors import ConfigError
from dq_engine.privacy.accounting import PureDpEvent, ZCDPEvent

__all__ = [
    "independent_gaussian_answers",
    "independent_laplace_answers",
    "zeros_answers",
]


def zeros_answers(workload: Workload) -> np.ndarray:
    """All-zero answers."""
    return np.zeros(len(workload), dtype=np.float64)


def _cells_per_marginal(workload: Workload) -> np.ndarray:
    return np.diff(workload.marginal_starts)


def independent_laplace_answers(
    data: Dataset, workload: Workload, true_answers: np.ndarray, *, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, PureDpEvent]:
    """ε-DP answers: Laplace noise per marginal with ε split evenly over the marginals.

    Args:
        data: Private dataset (only ``n`` is used; the true answers are passed in).
        workload: The workload.
        true_answers: Exact answers (fractions), shape ``(N,)``.
        epsilon: Total pure ε > 0.
        rng: Generator.

    Returns:
        Clipped noisy answers and the privacy event.
    """
    if not epsilon > 0:
        raise ConfigError(f"epsilon ({epsilon}) must be > 0")
    sensitivity = np.minimum(2, _cells_per_marginal(workload))[workload.query_marginal]
    scale = sensitivity * workload.n_marginals / (epsilon * data.n)
    noisy = np.clip(true_answers + rng.laplace(0.0, 1.0, size=len(workload)) * scale, 0.0, 1.0)
    return noisy, PureDpEvent(epsilon=epsilon, count=1, label="independent Laplace per marginal")


def independent_gaussian_answers(
    data: Dataset, workload: Workload, true_answers: np.ndarray, *, rho: float, rng: np.random.Generator
) -> tuple[np.ndarray, ZCDPEvent]:
    """ρ-zCDP answers: Gaussian noise per marginal with ρ split evenly over the marginals.

    Each marginal gets ``ρ/M``; the Gaussian mechanism with L2 sensitivity ``Δ`` and standard deviation
    ``σ = Δ/√(2ρ/M)`` is ``ρ/M``-zCDP (Bun & Steinke 2016, Prop. 1.6).
    """
    if not rho > 0:
        raise ConfigError(f"rho ({rho}) must be > 0")
    sensitivity = np.sqrt(np.minimum(2, _cells_per_marginal(workload)))[workload.query_marginal]
    sigma = sensitivity / np.sqrt(2 * rho / workload.n_marginals) / data.n
    noisy = np.clip(true_answers + rng.normal(0.0, 1.0, size=len(workload)) * sigma, 0.0, 1.0)
    return noisy, ZCDPEvent(rho=rho, count=1, label="independent Gaussian per marginal")
