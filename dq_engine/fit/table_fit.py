"""The table fit: a synthesizer's records calibrated against charged noisy marginals (MWEM on seeded particles).

The raw output of DualQuery, DQRS, FEM and sepFEM is a few hundred best responses: records that together answer
the workload's queries on average, but that are not a sample of anything, so single columns, pairs and the
number of distinct rows are far from the data (docs/benchmarks.md, "Fidelity"). The table fit turns them into a
table a statistician can accept:

1. **particles** -- ``seed_fraction`` of the particles are drawn from the mechanism's records (by their weights;
   they keep every public rule, since each mechanism enforces them), the rest from a prior built from noisy
   one-way marginals;
2. **MWEM rounds on those particles** (:func:`dq_engine.fit.mwem.mwem`, ``support="sampled"``): each round selects
   a marginal the particles represent badly (exponential mechanism; by default AIM's score and the largest query
   in turn, among the workload's marginals and every marginal inside one: ``select`` and ``candidates`` of
   :class:`~dq_engine.fit.mwem.MWEMConfig`), measures it with Gaussian noise, and reweights the particles by
   multiplicative weights, replaying every earlier measurement and the prior's one-way marginals; particles are
   resampled and moved (Metropolis-Hastings, feasible moves only) when their weights degenerate;
3. the release's rows are then sampled from the weighted particles (:meth:`SynthesisResult.sample_rows`).

Privacy: the fit reads the private data only through its prior's one-way measurement, its selections and its
Gaussian measurements, which are privacy events (:func:`fit_events`) composed with the mechanism's own events;
the mechanism's records are already its released output, so seeding particles with them is post-processing.
The pipeline plans the mechanism's budget around the fit's so that the combined cost never exceeds the target
(:mod:`dqrelease.mechanisms.fit`). Guarantees of the mechanism about its own records (e.g. DualQuery's accuracy
theorem) are not claimed for the fitted table; its accuracy is what ``bench/fidelity.py`` measures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import Workload, all_kway_marginals, concatenate_workloads
from dq_engine.errors import ConfigError
from dq_engine.fit.mwem import MWEMConfig, mwem, mwem_events
from dq_engine.privacy.accounting import PrivacyEvent, combined_costs
from dq_engine.privacy.grant import PrivacyGrant
from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = ["MAX_FIT_MARGINALS", "fit_events", "fit_table", "fit_workload", "fit_workload_size"]

MAX_FIT_MARGINALS = 5_000
"""The fit selects among the release workload's marginals when it has at most this many, all complete."""


def fit_events(config: MWEMConfig) -> list[PrivacyEvent]:
    """The privacy events of a table fit with ``config`` (its prior, selections and measurements)."""
    return mwem_events(config)


def fit_workload(workload: Workload) -> Workload:
    """The marginals the fit may select and measure (public: the workload's shape only).

    The release workload itself when it is made of at most :data:`MAX_FIT_MARGINALS` complete marginals (every
    cell queried): the fit then steers by exactly what the release is judged on. Otherwise (e.g. millions of
    single random conjunctions), every one-way marginal and every two-way marginal (a public sample on wide
    schemas, :func:`dq_engine.data.workload.all_kway_marginals`): the single columns and pairs a reader checks first.
    """
    if _fits_the_workload_itself(workload):
        return workload
    parts = [all_kway_marginals(workload.domain, 1)]
    if len(workload.domain) >= 2:
        parts.append(all_kway_marginals(workload.domain, 2))
    return concatenate_workloads(parts)


def fit_workload_size(workload: Workload) -> tuple[int, int]:
    """``(marginals, queries)`` of :func:`fit_workload` of ``workload``, counted without building it.

    The memory forecast reads it (``dqrelease.memory_estimate``): on a wide schema the pairs the fit falls back to
    are far too many to build just to count them.
    """
    if _fits_the_workload_itself(workload):
        return workload.n_marginals, len(workload)
    domain = workload.domain
    per_column = np.where(domain.is_binary, 1, domain.sizes).astype(object)  # a binary column is queried as "= 1"
    total, squares = int(per_column.sum()), int((per_column * per_column).sum())
    columns = len(domain)
    return columns + columns * (columns - 1) // 2, total + (total * total - squares) // 2


def _fits_the_workload_itself(workload: Workload) -> bool:
    """The fit selects among the release workload's own marginals (at most :data:`MAX_FIT_MARGINALS`, all complete)."""
    return workload.n_marginals <= MAX_FIT_MARGINALS and bool(MarginalIndex(workload).complete.all())


def fit_table(
    data: Dataset,
    workload: Workload,
    result: SynthesisResult,
    config: MWEMConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    constraints: Constraints | None = None,
    progress: Callable[[RoundDiagnostics], None] | None = None,
    public_n: int | None = None,
    executor: Executor | None = None,
) -> SynthesisResult:
    """Fit the mechanism's records to noisy marginals of ``data`` (see the module docstring).

    Args:
        data: The private dataset the mechanism ran on.
        workload: The release workload (the fit selects among :func:`fit_workload` of it).
        result: The mechanism's output (its records seed the particles).
        config: MWEM on particles (``support="sampled"``, ``seed_fraction`` > 0 to use the records).
        grant: The budget the fit's events are spent on before it reads ``data``: the one the mechanism spent
            its own events on, so the two are composed together.
        rng: Generator for the fit's draws.
        constraints: Public rules: particles stay feasible.
        progress: Called after every fit round, numbered after the mechanism's rounds.
        public_n: The public ``n`` of the plan (a noisy count's lower bound under add/remove neighbours; default
            ``data.n``, public under replace-one), see :func:`dq_engine.fit.mwem.mwem`.
        executor: Runs the shards of the particles' moves (see :func:`dq_engine.fit.mwem.mwem`); same result.

    Returns:
        The fitted distribution as weighted records, with the mechanism's and the fit's events and their
        combined costs; the mechanism's diagnostics followed by the fit's.

    Raises:
        ConfigError: If ``config`` is not MWEM on sampled particles, or the result is over another domain.
    """
    if config.support != "sampled":
        raise ConfigError("the table fit runs MWEM on particles: support must be 'sampled'")
    if result.domain != workload.domain:
        raise ConfigError("the mechanism's records and the workload are over different domains")
    offset = len(result.diagnostics)

    def forward(diagnostics: RoundDiagnostics) -> None:
        if progress is not None:
            progress(dataclasses.replace(diagnostics, round=offset + diagnostics.round))

    fitted = mwem(
        data, fit_workload(workload), config, grant=grant, rng=rng, progress=forward, constraints=constraints,
        seeds=result.records, seed_weights=result.weights, public_n=public_n, executor=executor,
    )
    events = [*result.events, *fitted.events]
    shifted = tuple(dataclasses.replace(d, round=offset + d.round) for d in fitted.diagnostics)
    return dataclasses.replace(
        result,
        records=fitted.records,
        weights=fitted.weights,
        parameters={**result.parameters, "fit": fitted.parameters},
        events=tuple(events),
        costs=combined_costs(events, config.delta),
        diagnostics=(*result.diagnostics, *shifted),
    )
