r"""Independent columns: every column's noisy one-way marginal, and rows whose columns are drawn independently.

The baseline every synthesizer must beat, as a mechanism (the "DP independent columns" table of docs/benchmarks.md,
"Fidelity of the published tables"): it measures the one-way marginal of every column once, all together, with
exact discrete Gaussian noise on the counts (ρ-zCDP; L2 sensitivity ``√(2m)`` counts for ``m`` columns under
replace-one neighbours, ``√m`` under add/remove), turns them into probability vectors
(:func:`dq_engine.fit.prior.projected_one_way_marginals`: one inverse-variance estimate of ``n``, projection onto the
simplex) and publishes rows in which the columns are independent. It publishes no dependence between columns at
all, so it can never invent one: it is what a table of few rows or a small ε should publish when the noise of
any two-way measurement would be larger than the dependence it measures. In the graphical models of MST and AIM
(McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable and general approach to differentially private
synthetic data", 2021; McKenna et al., "AIM: An Adaptive and Iterative Mechanism for Differentially Private Synthetic
Data", 2022) columns that no measurement joins come out independent in the same way.

**Rows.** The ``rows`` records hold, in each column, every value ``round(p_v · rows)`` times (largest remainders,
so each column's counts sum to ``rows``), and each column is shuffled on its own: the published one-way marginals
are the noisy estimates up to the rounding, with no sampling noise on top, and any two columns are independent up
to the shuffles' chance agreement. With public rules the rows that break one are redrawn from the product
conditioned on feasibility (:func:`dq_engine.fit.prior.feasible_particles`): the rules' columns are then dependent
exactly as the rules force them to be.

Privacy: one ρ-zCDP Gaussian measurement (:func:`independent_events`); everything after it is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.errors import ConfigError
from dq_engine.fit.prior import noise_scale, prior_sensitivities, projected_one_way_marginals, redraw_infeasible
from dq_engine.privacy.accounting import PrivacyEvent, ZCDPEvent, mwem_costs
from dq_engine.privacy.grant import PrivacyGrant, require_grant
from dq_engine.results import SynthesisResult

__all__ = [
    "INDEPENDENT_LABEL",
    "RAKING_SWEEPS",
    "IndependentConfig",
    "exact_counts",
    "independent_columns",
    "independent_events",
    "raked_component",
]

INDEPENDENT_LABEL = "independent columns: Gaussian one-way marginals"
"""The label of the mechanism's privacy event."""

RAKING_SWEEPS = 200
"""Most sweeps of iterative proportional fitting over a rule component (it stops earlier at a 1e-9 change)."""


@dataclass(frozen=True, kw_only=True)
class IndependentConfig:
    """Parameters of :func:`independent_columns`.

    Attributes:
        rho: zCDP budget of the one measurement of every column's one-way marginal.
        rows: Records published.
        delta: δ the costs are reported at.
    """

    rho: float
    rows: int
    delta: float = 1e-9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rho) and self.rho > 0):
            raise ConfigError(f"rho ({self.rho}) must be a positive number")
        if self.rows < 1:
            raise ConfigError(f"rows ({self.rows}) must be >= 1")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta ({self.delta}) must be in (0, 1)")


def independent_events(config: IndependentConfig) -> list[PrivacyEvent]:
    """The mechanism's privacy events: one ρ-zCDP Gaussian measurement."""
    return [ZCDPEvent(rho=config.rho, count=1, label=INDEPENDENT_LABEL)]


def exact_counts(probabilities: np.ndarray, rows: int) -> np.ndarray:
    """``rows`` split over the values by ``probabilities``: floors, then one more for the largest remainders.

    Ties between equal remainders go to the lower value code (deterministic; the probabilities are already noisy).
    """
    expected = np.asarray(probabilities, dtype=np.float64) * rows
    counts = np.floor(expected).astype(np.int64)
    short = rows - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(expected - counts), kind="stable")[:short]] += 1
    return counts


def independent_columns(
    data: Dataset,
    config: IndependentConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    constraints: Constraints | None = None,
) -> SynthesisResult:
    """Publish ``config.rows`` records whose columns are independent draws of their noisy one-way marginals.

    Args:
        data: Private dataset (codes layout or sparse binary).
        config: Budget and rows.
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator (the noise, the shuffles, the redraws of rows that break a rule).
        constraints: Public rules every record keeps (with a witness), or None.

    Returns:
        The records (value codes) with equal weights; ``parameters`` holds the public noise scale.
    """
    events = independent_events(config)
    require_grant(grant, mechanism="independent columns").spend(events, mechanism="independent columns")
    domain = data.domain
    columns = list(range(len(domain)))
    estimates = projected_one_way_marginals(data, columns, kind="gaussian", budget=config.rho, rng=rng)
    records = np.empty((config.rows, len(columns)), dtype=np.int64)
    for a in columns:
        column = np.repeat(np.arange(len(estimates[a]), dtype=np.int64), exact_counts(estimates[a], config.rows))
        records[:, a] = rng.permutation(column)
    if constraints is not None and len(constraints):
        for c, attributes in enumerate(constraints.components):
            listed = constraints.component_records(c)
            if listed is None:
                continue
            values, feasible = listed
            joint = raked_component(values, feasible, [estimates[a] for a in attributes])
            if joint is not None:
                cells = np.repeat(np.arange(len(values)), exact_counts(joint, config.rows))
                records[:, attributes] = values[rng.permutation(cells)]
        records = redraw_infeasible(records, [estimates[a] for a in columns], constraints, rng)
    _, l2 = prior_sensitivities(data, len(columns))
    return SynthesisResult(
        mechanism="independent",
        domain=domain,
        records=records,
        parameters={
            "rho": config.rho, "rows": config.rows, "delta": config.delta,
            "noise_sd_counts": noise_scale("gaussian", l1=0.0, l2=l2, budget=config.rho),
        },
        events=tuple(events),
        costs=mwem_costs(events, config.delta),
        n=data.n,
    )


def raked_component(
    values: np.ndarray, feasible: np.ndarray, marginals: list[np.ndarray], *, sweeps: int = RAKING_SWEEPS
) -> np.ndarray | None:
    """The distribution on a rule component's feasible joint values closest to the product of ``marginals``.

    Iterative proportional fitting: start from the product restricted to the feasible values, then scale it to each
    column's marginal in turn until a sweep changes no probability by more than 1e-9 (or after ``sweeps``). Where
    the marginals cannot all be met on the feasible values, IPF still converges towards the closest fit it can.

    Args:
        values: Joint values ``(J, k)`` of the component's ``k`` columns.
        feasible: Whether each joint value keeps the rules, ``(J,)``.
        marginals: Each column's probability vector.
        sweeps: Most sweeps.

    Returns:
        Probabilities ``(J,)`` (0 on infeasible values), or None when the product has no mass on a feasible value.
    """
    weight = np.prod([m[values[:, j]] for j, m in enumerate(marginals)], axis=0) * feasible
    if not weight.sum() > 0:
        return None
    weight = weight / weight.sum()
    for _ in range(sweeps):
        before = weight.copy()
        for j, target in enumerate(marginals):
            current = np.bincount(values[:, j], weights=weight, minlength=len(target))
            ratio = np.divide(target, current, out=np.zeros_like(target, dtype=np.float64), where=current > 0)
            weight = weight * ratio[values[:, j]]
        total = weight.sum()
        if not total > 0:
            return before
        weight = weight / total
        if np.abs(weight - before).max() < 1e-9:
            break
    return weight
