r"""MWEM: Multiplicative Weights with the Exponential Mechanism (Hardt, Ligett & McSherry 2012, Algorithm 1).

MWEM plays the primal side of the query-release game with an *explicit* data player: a distribution
``A`` over records, updated by multiplicative weights. Each round ``t = 1..T``:

1. **select** -- one exponential-mechanism draw picks a query with large error ``q(D) - q(A)``
   (:mod:`dq_engine.privacy.exponential_mechanism`; ε-DP per draw, sensitivity ``1/n``);
2. **measure** -- its answer is measured with Laplace noise (pure ε; HLM) or Gaussian noise (ρ-zCDP,
   option ``measure_noise="gaussian"``);
3. **update** -- ``A(x) ← A(x) · exp(λ · q(x) · (m - q(A)))`` then renormalise, with ``λ = 1/2`` in
   fraction units (HLM's ``exp(q(x)(m - q(A))/2n)`` for counts).

The DualQuery paper (Gaboardi, Arias, Hsu, Roth & Wu 2014, "Dual Query: Practical Private Query Release for High
Dimensional Data", "Comparison with MWEM") finds MWEM more accurate than DualQuery on a 17-attribute Adult where
``A`` fits in memory; DualQuery exists for the universes where it does not.

**Universe limit.** With ``support="universe"`` (the algorithm as published) ``A`` holds one float per
record of the universe, as a dense tensor of shape ``domain.sizes`` (:mod:`dq_engine.fit.universe`). We refuse
universes larger than ``2^max_universe_log2`` records (default ``2^24`` = 16.8 M records = 128 MiB of weights)
with :class:`~dq_engine.errors.UniverseTooLargeError`: that is where DualQuery, DQRS and FEM take over.

**Documented changes to the published algorithm (all optional, all data-independent or charged):**

* ``replay_sweeps`` -- after each round the MW update is re-applied over the whole measurement history
  (HLM's own "use of measurement history" improvement); 0 gives plain Algorithm 1.
* ``final_sweeps`` -- history sweeps after the last round; with ``final_min_sweeps`` below it they stop, after
  at least ``final_min_sweeps``, once the fit is within the noise (the *discrepancy principle*, Morozov 1966):
  the squared differences between the fitted and the noisy answers, each divided by its measurement's noise
  variance (public: the sensitivities and the budgets), average at most 1. Fitting closer would fit the noise;
  stopping earlier leaves the cyclic updates unconverged. They also stop once a sweep lowers that average by less
  than the relative ``final_tolerance``: on histories of millions of nearly empty noisy cells the average sits a
  hair above 1 whatever the fit, and further sweeps only concentrate the weights on the noise. The average is
  taken two ways, over the cells and over the measurements (each its cells' mean), and both must stop: over the
  cells alone, a few wide measured marginals decide for the one-way marginals too (docs/decisions.md, "The fit's
  final sweeps stop at the noise" and "... of every measurement"). Post-processing of the noisy measurements.
* ``final_estimator="mirror"`` -- instead of those sweeps, entropic mirror descent on the whole history's Gaussian
  log-likelihood: the estimation problem of Private-PGM (McKenna, Sheldon & Miklau 2019, "Graphical-model based
  estimation and inference for differential privacy"), over the distributions the particles (or the universe's
  records) can hold. The loss is ``½ Σ_i ||A_i - y_i||² / σ_i²`` over the measured cells: unlike a sweep, a
  step weighs each measurement by its noise (the prior's one-way marginals and the rounds' marginals have
  different variances) and moves every measured marginal at once. The gradient of the loss at a record is a sum
  of per-marginal cell terms, so a step is one multiplicative update of every measured marginal with the cells'
  residuals divided by their variances, and ``A`` stays log-linear in the measured marginals (the particles'
  moves still target it). The step size is found by backtracking as Private-PGM's mirror descent does (accept
  when the loss drops by at least half of ``⟨∇L, A - A'⟩``, else halve; double it after an accepted step), and
  the steps stop by the same rule as the sweeps (``final_sweeps`` steps at most, at least ``final_min_sweeps``,
  then within the noise or converged). Post-processing of the noisy measurements.
* ``output="final"`` returns ``A_T`` (what implementations of MWEM return); ``"average"`` returns the
  average ``(1/T) Σ A_t`` of Algorithm 1's analysis.
* ``measure="marginal"`` measures every workload cell of the selected query's marginal at once (L1
  sensitivity ``min(2, cells)/n``, L2 ``√min(2, cells)/n``; the marginal-measurement variant of McKenna et
  al.'s MWEM implementations) instead of the one selected query.
* ``select="marginal"`` (with ``measure="marginal"``) selects a whole marginal instead of one query, scored as AIM
  scores its candidates (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for
  Differentially Private Synthetic Data"): the L1 distance between the marginal's true and fitted cells, minus
  the L1 error its measurement's noise is expected to leave, ``√(2/π) σ · cells`` (public: the budget, ``n`` and
  the marginal's size). A marginal whose fit is already within its noise scores below zero, so a round is not
  spent on fitting noise, and a marginal of many cells must be that much further off to be chosen. Sensitivity
  ``2/n`` (replace-one moves two cells of a marginal by ``1/n`` each). ``select="alternate"`` uses that score in
  the odd rounds and the query of largest error in the even ones.
* ``select="all"`` (with ``measure="marginal"``) selects nothing: round ``t`` measures the workload's marginal
  ``t mod M``, so ``T = M`` rounds measure each once, and the selections' budget goes to the measurements
  (``select_epsilon = 0``, no exponential-mechanism draw). When the budget can measure every workload marginal
  at a useful noise, adaptivity only costs budget: the measure-everything design of the workload-answering
  baselines (the Gaussian mechanism on the workload, then a consistent estimate, as Private-PGM's estimation
  does for its measurements: McKenna, Sheldon & Miklau 2019).
* ``candidates="closure"`` lets the rounds select and measure every marginal inside a workload marginal too (the
  workload's *downward closure*, AIM's candidates: a 3-way marginal's pairs and single columns), when the workload
  is made of complete marginals and the closure has at most :data:`MAX_CLOSURE_MARGINALS`. A pair measured itself
  carries one noise term per cell, where a pair summed from a measured 3-way marginal carries as many as the third
  column has values.
* ``support="sampled"`` replaces the universe by ``support_size`` i.i.d. records drawn from a *prior*
  ``P0`` (product of per-attribute distributions, :mod:`dq_engine.fit.prior`): the uniform distribution, or --
  with a positive ``support_budget`` -- a mixture of uniform and DP one-way marginals of every attribute (the
  workload's or not: every column is published), measured once with the configured noise and charged as an event.
  MW over such a sample with uniform initial weights is the self-normalised importance-sampling estimate of MW over
  the whole universe started at ``P0``, so this is MWEM with a non-uniform initial distribution, represented by samples.
  It never refuses (memory is ``support_size`` records). A fixed sample covers the cells where the data
  lives only if the prior puts mass there; ``support_moves > 0`` makes the particles follow ``A``
  (resample-move sequential Monte Carlo: Gilks & Berzuini 2001, Del Moral, Doucet & Jasra 2006), using
  that MW keeps ``A`` log-linear in the measured marginals (see :class:`ParticleDistribution`).

**Public constraints** (:class:`~dq_engine.data.constraints.Constraints`, optional): over the universe, ``A`` starts
uniform on the feasible records and gives every infeasible record weight 0 (multiplicative updates keep it 0, the
renormalisation runs over the feasible records); on particles, the initial draw and every Metropolis-Hastings move
reject infeasible records (:class:`~dq_engine.fit.particles.ParticleDistribution`). MW's regret bound then holds
over the feasible records; the rules are public, so privacy is unchanged.

Privacy: ``T`` selections and ``T`` measurements (plus the prior's one measurement), composed as events.
Paper mode: basic composition when every step is pure (HLM), else the zCDP analysis of Vietri, Tian, Bun, Steinke & Wu
2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release"; tight mode:
zCDP (EM draws ε²/8, Laplace ε²/2, Gaussian ρ) with the optimal conversion, or the pure ε when smaller.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dq_engine.data.answers import answer_workload
from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import Workload, concatenate_workloads, downward_closure_sets, marginal_queries
from dq_engine.errors import AccountingError, ConfigError, UniverseTooLargeError
from dq_engine.fit.particles import ParticleDistribution
from dq_engine.fit.prior import (
    Measurement,
    MixRule,
    NoiseKind,
    noise_variance,
    noisy_counts,
    prior_measurements,
    prior_sensitivities,
    replace_with_seeds,
    sample_support,
)
from dq_engine.fit.universe import UniverseDistribution, universe_distribution
from dq_engine.oracle.feasible import with_witness
from dq_engine.privacy.accounting import (
    AccountingMode,
    ExponentialMechanismEvent,
    PrivacyEvent,
    PureDpEvent,
    ZCDPEvent,
    mwem_costs,
    within_target,
)
from dq_engine.privacy.exponential_mechanism import select_by_score, select_signed_query
from dq_engine.privacy.grant import PrivacyGrant, require_grant
from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = [
    "MAX_CLOSURE_MARGINALS",
    "MAX_UNIVERSE_LOG2",
    "MWEMConfig",
    "calibrate_mwem",
    "mwem",
    "mwem_events",
    "selection_words",
]

MAX_UNIVERSE_LOG2 = 24
"""Default largest universe MWEM holds: 2^24 records (128 MiB of float64 weights)."""

MAX_CLOSURE_MARGINALS = 5_000
"""``candidates="closure"`` keeps the workload's own marginals when its closure would have more than this many."""

ProgressCallback = Callable[[RoundDiagnostics], None]


@dataclass(frozen=True, kw_only=True)
class MWEMConfig:
    """Parameters of MWEM.

    Attributes:
        rounds: ``T`` >= 1.
        select_epsilon: Pure ε of each exponential-mechanism draw (HLM: ``ε/2T``); 0 with ``select="all"``.
        measure_epsilon: Laplace ε of each measurement (``measure_noise="laplace"``; HLM: ``ε/2T``).
        measure_rho: Gaussian ρ of each measurement (``measure_noise="gaussian"``).
        measure_noise: ``"laplace"`` (pure ε, HLM) or ``"gaussian"`` (zCDP).
        measure: ``"query"`` (HLM) or ``"marginal"`` (every workload cell of the selected query's marginal).
        select: ``"query"`` (the query of largest error, HLM), ``"marginal"`` (the marginal of largest L1 error
            beyond its expected noise, as AIM; needs ``measure="marginal"``) or ``"alternate"`` (the marginal's
            score in odd rounds, the query's in even ones) or ``"all"`` (no selection: the workload's marginals in
            turn; module docstring).
        candidates: ``"workload"`` (the workload's marginals) or ``"closure"`` (also every marginal inside one;
            module docstring).
        learning_rate: λ of the update ``exp(λ q(x)(m - q(A)))`` in fraction units (HLM: 1/2).
        replay_sweeps: Sweeps over the measurement history after each round (0 = plain Algorithm 1).
        final_sweeps: Most history sweeps after the last round (post-processing).
        final_min_sweeps: Fewest of them; above it the sweeps stop once the fit is within the noise (module
            docstring). None = ``final_sweeps`` (always that many).
        final_tolerance: With ``final_min_sweeps``, the sweeps also stop (after the fewest) at the first sweep
            that lowers the discrepancy by less than this share of the previous sweep's; 0 = never on that ground.
        final_estimator: ``"sweeps"`` (cyclic MW updates over the history, at ``learning_rate``) or ``"mirror"``
            (mirror descent on the measurements' Gaussian log-likelihood; module docstring). ``final_sweeps``,
            ``final_min_sweeps`` and ``final_tolerance`` count and stop its steps alike.
        output: ``"final"`` (``A_T``) or ``"average"`` (``(1/T) Σ A_t``).
        support: ``"universe"`` (exact; refuses large universes) or ``"sampled"`` (see module docstring).
        support_size: Records drawn for ``support="sampled"``.
        support_budget: Budget of the prior's one-way marginals: pure ε (Laplace) or ρ (Gaussian), by
            ``measure_noise``; 0 = uniform prior, no cost.
        support_mix: Weight of the uniform distribution in the prior's mixture, in (0, 1] (the most, with
            ``support_mix_rule="noise"``).
        support_mix_rule: ``"fixed"`` (``support_mix`` for every attribute) or ``"noise"`` (less where the prior's
            noise is small against a uniform cell; :func:`dq_engine.fit.prior.uniform_share`).
        support_moves: Metropolis-Hastings sweeps per round after a resampling check (0 = fixed particles).
        final_moves: With ``support="sampled"``, after the final sweeps: resample the particles to equal weights
            and move them with this many Metropolis-Hastings sweeps (post-processing), so the published rows are
            not copies of a few heavy particles; 0 = keep the weighted particles.
        seed_fraction: Share of the particles drawn from seed records given to :func:`mwem` (e.g. another
            synthesizer's output, :mod:`dq_engine.fit.table_fit`); the rest come from the prior. 0 without seeds.
        replay_prior: Also replay the prior's noisy one-way marginals (already charged as its measurement) in
            every history sweep, for every column (the one-way marginals the workload lacks join the fit's
            candidates): the fitted distribution then matches them.
        max_universe_log2: Refuse ``support="universe"`` above ``2^max_universe_log2`` records (<= 30).
        delta: δ used to report (ε, δ) costs, in (0, 1).
        track_error: Record internal error-so-far in the diagnostics.
    """

    rounds: int
    select_epsilon: float
    measure_epsilon: float = 0.0
    measure_rho: float = 0.0
    measure_noise: NoiseKind = "laplace"
    measure: Literal["query", "marginal"] = "query"
    select: Literal["query", "marginal", "alternate", "all"] = "query"
    candidates: Literal["workload", "closure"] = "workload"
    learning_rate: float = 0.5
    replay_sweeps: int = 1
    final_sweeps: int = 0
    final_min_sweeps: int | None = None
    final_tolerance: float = 0.0
    final_estimator: Literal["sweeps", "mirror"] = "sweeps"
    output: Literal["final", "average"] = "final"
    support: Literal["universe", "sampled"] = "universe"
    support_size: int = 200_000
    support_budget: float = 0.0
    support_mix: float = 0.5
    support_mix_rule: MixRule = "fixed"
    support_moves: int = 0
    final_moves: int = 0
    seed_fraction: float = 0.0
    replay_prior: bool = False
    max_universe_log2: float = MAX_UNIVERSE_LOG2
    delta: float = 1e-6
    track_error: bool = True

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ConfigError(f"rounds ({self.rounds}) must be >= 1")
        if self.select == "all":
            if self.select_epsilon != 0:
                raise ConfigError(f"select='all' draws no selection: select_epsilon ({self.select_epsilon}) must be 0")
        elif not (self.select_epsilon > 0 and math.isfinite(self.select_epsilon)):
            raise ConfigError(f"select_epsilon ({self.select_epsilon}) must be finite and > 0")
        if self.measure_noise not in ("laplace", "gaussian"):
            raise ConfigError(f"measure_noise ({self.measure_noise!r}) must be 'laplace' or 'gaussian'")
        if self.measure_noise == "laplace" and not (self.measure_epsilon > 0 and self.measure_rho == 0):
            raise ConfigError("Laplace measurements need measure_epsilon > 0 and measure_rho = 0")
        if self.measure_noise == "gaussian" and not (self.measure_rho > 0 and self.measure_epsilon == 0):
            raise ConfigError("Gaussian measurements need measure_rho > 0 and measure_epsilon = 0")
        if self.measure not in ("query", "marginal"):
            raise ConfigError(f"measure ({self.measure!r}) must be 'query' or 'marginal'")
        if self.select not in ("query", "marginal", "alternate", "all"):
            raise ConfigError(f"select ({self.select!r}) must be 'query', 'marginal', 'alternate' or 'all'")
        if self.candidates not in ("workload", "closure"):
            raise ConfigError(f"candidates ({self.candidates!r}) must be 'workload' or 'closure'")
        if self.candidates == "closure" and self.measure != "marginal":
            raise ConfigError("candidates='closure' measures whole marginals: set measure='marginal'")
        if self.select != "query" and self.measure != "marginal":
            raise ConfigError(f"select={self.select!r} measures the selected marginal: set measure='marginal'")
        if not self.learning_rate > 0:
            raise ConfigError(f"learning_rate ({self.learning_rate}) must be > 0")
        if self.replay_sweeps < 0 or self.final_sweeps < 0:
            raise ConfigError("replay_sweeps and final_sweeps must be >= 0")
        if self.final_min_sweeps is not None and not 0 <= self.final_min_sweeps <= self.final_sweeps:
            raise ConfigError(
                f"final_min_sweeps ({self.final_min_sweeps}) must be in [0, final_sweeps ({self.final_sweeps})]"
            )
        if not 0 <= self.final_tolerance < 1:
            raise ConfigError(f"final_tolerance ({self.final_tolerance}) must be in [0, 1)")
        if self.final_estimator not in ("sweeps", "mirror"):
            raise ConfigError(f"final_estimator ({self.final_estimator!r}) must be 'sweeps' or 'mirror'")
        if self.output not in ("final", "average"):
            raise ConfigError(f"output ({self.output!r}) must be 'final' or 'average'")
        if self.support not in ("universe", "sampled"):
            raise ConfigError(f"support ({self.support!r}) must be 'universe' or 'sampled'")
        if self.support_size < 1:
            raise ConfigError(f"support_size ({self.support_size}) must be >= 1")
        if not self.support_budget >= 0:
            raise ConfigError(f"support_budget ({self.support_budget}) must be >= 0")
        if self.support == "universe" and self.support_budget != 0:
            raise ConfigError("support_budget is only used by support='sampled'; set it to 0")
        if self.support_moves < 0:
            raise ConfigError(f"support_moves ({self.support_moves}) must be >= 0")
        if self.support_moves and self.output == "average":
            raise ConfigError("output 'average' needs fixed particles; set support_moves to 0")
        if self.final_moves < 0:
            raise ConfigError(f"final_moves ({self.final_moves}) must be >= 0")
        if self.final_moves and (self.output == "average" or self.support != "sampled"):
            raise ConfigError("final_moves moves sampled particles of the final output; set it to 0 with "
                              "support='universe' or output='average'")
        if not 0 <= self.seed_fraction <= 1:
            raise ConfigError(f"seed_fraction ({self.seed_fraction}) must be in [0, 1]")
        if (self.seed_fraction or self.replay_prior) and self.support != "sampled":
            raise ConfigError("seed_fraction and replay_prior need support='sampled'")
        if not 0 < self.support_mix <= 1:
            raise ConfigError(f"support_mix ({self.support_mix}) must be in (0, 1]")
        if self.support_mix_rule not in ("fixed", "noise"):
            raise ConfigError(f"support_mix_rule ({self.support_mix_rule!r}) must be 'fixed' or 'noise'")
        if not 1 <= self.max_universe_log2 <= 30:
            raise ConfigError(f"max_universe_log2 ({self.max_universe_log2}) must be in [1, 30]")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta ({self.delta}) must be in (0, 1)")


_SELECT_WORDS = {
    "query": "by the largest query",
    "marginal": "by AIM's score",
    "alternate": "by AIM's score and by the largest query in turn",
}
_ALL_WORDS = "measures one of the workload's marginals in turn, each once, with no selection"
_CANDIDATE_WORDS = {
    "workload": "among the workload's marginals",
    "closure": "among the workload's marginals and every marginal inside one",
}


def selection_words(config: MWEMConfig) -> str:
    """What a round of ``config`` measures, in the words of a plan's note (public): "each round ..." ."""
    if config.select == "all":
        return _ALL_WORDS
    return f"selects a marginal {_SELECT_WORDS[config.select]}, {_CANDIDATE_WORDS[config.candidates]}"



# ---------------------------------------------------------------------- accounting
def mwem_events(config: MWEMConfig) -> list[PrivacyEvent]:
    """The prior's measurement (if any), ``T`` selections (none with ``select="all"``) and ``T`` measurements."""
    events: list[PrivacyEvent] = []
    if config.support == "sampled" and config.support_budget > 0:
        label = "one-way marginals of the support prior"
        if config.measure_noise == "laplace":
            events.append(PureDpEvent(epsilon=config.support_budget, count=1, label=label))
        else:
            events.append(ZCDPEvent(rho=config.support_budget, count=1, label=label))
    if config.select != "all":
        events.append(
            ExponentialMechanismEvent(epsilon=config.select_epsilon, count=config.rounds, label="query selections")
        )
    if config.measure_noise == "laplace":
        events.append(PureDpEvent(epsilon=config.measure_epsilon, count=config.rounds, label="Laplace measurements"))
    else:
        events.append(ZCDPEvent(rho=config.measure_rho, count=config.rounds, label="Gaussian measurements"))
    return events


def calibrate_mwem(
    *,
    epsilon: float,
    delta: float,
    rounds: int,
    mode: AccountingMode = "tight",
    measure_noise: NoiseKind = "laplace",
    select_share: float = 0.5,
    support_share: float = 0.0,
) -> dict[str, float]:
    """Per-step budgets whose composed cost in ``mode`` is at most ``(epsilon, delta)``.

    The budget is split in *shares*: ``support_share`` for the prior (if > 0) and, of the rest,
    ``select_share`` for the selections and ``1 - select_share`` for the measurements (``select_share = 0``: no
    selections, every round's budget measures, as ``select="all"`` runs). Shares are of ε
    (basic composition) for Laplace in paper mode and of ρ otherwise; one scale factor is then maximised
    by bisection on the exact composed cost, so the result never exceeds the target.

    Returns:
        ``{"select_epsilon", "measure_epsilon" or "measure_rho", "support_budget"}`` for :class:`MWEMConfig`.

    Raises:
        AccountingError: If no positive budget fits.
    """
    if not epsilon > 0:
        raise AccountingError(f"target epsilon ({epsilon}) must be > 0")
    if not 0 <= select_share < 1:
        raise ConfigError(f"select_share ({select_share}) must be in [0, 1)")
    if not 0 <= support_share < 1:
        raise ConfigError(f"support_share ({support_share}) must be in [0, 1)")
    if rounds < 1:
        raise ConfigError(f"rounds ({rounds}) must be >= 1")
    linear_in_epsilon = measure_noise == "laplace" and mode == "paper"

    def budgets(scale: float) -> dict[str, float]:
        # scale is the total ε (paper-mode Laplace) or the total ρ (otherwise); EM draws are charged as
        # ε^2/8 in tight mode and ε^2/2 in paper mode when converting a ρ share back to a per-draw ε
        support = support_share * scale
        select_total = (1 - support_share) * select_share * scale
        measure_total = (1 - support_share) * (1 - select_share) * scale
        if linear_in_epsilon:
            values = {"select_epsilon": select_total / rounds, "measure_epsilon": measure_total / rounds}
        else:
            em_factor = 8.0 if mode == "tight" else 2.0
            values = {"select_epsilon": math.sqrt(em_factor * select_total / rounds)}
            if measure_noise == "laplace":
                values["measure_epsilon"] = math.sqrt(2.0 * measure_total / rounds)
            else:
                values["measure_rho"] = measure_total / rounds
            if measure_noise == "laplace" and support > 0:
                support = math.sqrt(2.0 * support)
        values["support_budget"] = support
        return values

    def cost(scale: float) -> float:
        config = _budget_config(rounds, measure_noise, budgets(scale), delta)
        return mwem_costs(mwem_events(config), delta)[mode].epsilon

    low, high = 0.0, float(epsilon) if linear_in_epsilon else 1.0
    while within_target(cost(high), epsilon):
        low, high = high, 2 * high
    for _ in range(60):
        middle = 0.5 * (low + high)
        if within_target(cost(middle), epsilon):
            low = middle
        else:
            high = middle
    if not low > 0 or not within_target(cost(low), epsilon):
        raise AccountingError(f"no positive MWEM budget fits epsilon={epsilon} with {rounds} rounds")
    return budgets(low)


def _budget_config(rounds: int, measure_noise: NoiseKind, values: dict[str, float], delta: float) -> MWEMConfig:
    return MWEMConfig(
        rounds=rounds,
        measure_noise=measure_noise,
        measure="marginal" if values["select_epsilon"] == 0 else "query",
        select="all" if values["select_epsilon"] == 0 else "query",
        support="sampled" if values["support_budget"] > 0 else "universe",
        delta=delta,
        **values,
    )


# ---------------------------------------------------------------------- the algorithm
def _answers(distribution: UniverseDistribution | ParticleDistribution, index: MarginalIndex) -> np.ndarray:
    out = np.empty(len(index.workload))
    starts = index.workload.marginal_starts
    for m in range(index.n_marginals):
        out[starts[m] : starts[m + 1]] = distribution.table(m)[index.query_cells[m]]
    return out


def _positions(workload: Workload, marginals: list[tuple[int, ...]]) -> list[int]:
    """Where each of ``marginals`` (rows of a workload's ``marginals``) is among ``workload``'s (its closure's)."""
    def attributes(row: tuple[int, ...] | list[int]) -> tuple[int, ...]:
        return tuple(a for a in row if a >= 0)

    where = {attributes(row): m for m, row in enumerate(workload.marginals.tolist())}
    return [where[attributes(row)] for row in marginals]


def _with_every_column(workload: Workload) -> Workload:
    """``workload`` with the one-way marginal of every column it leaves out (public: the workload's shape only).

    The prior measures every column, and its measurements are replayed on the fit's one-way marginals: a column
    that no marginal of the fit holds would keep whatever values the particles started with, which for the table
    fit's seeded particles are the mechanism's records (DualQuery's best responses set a column the workload never
    asks about arbitrarily: KDD99 with 64 random 3-way marginals published such a column 0.34 off).
    """
    used = {int(a) for a in workload.marginals[workload.marginals >= 0]}
    missing = [(a,) for a in range(len(workload.domain)) if a not in used]
    if not missing:
        return workload
    return concatenate_workloads([workload, marginal_queries(workload.domain, missing)],
                                 description=f"{workload.description} and every other column's one-way marginal")


def _closure(workload: Workload, index: MarginalIndex) -> Workload:
    """The workload's downward closure as a workload (public).

    The workload itself when it has an incomplete marginal, when the closure adds nothing, or when the closure
    would have more than :data:`MAX_CLOSURE_MARGINALS` marginals.
    """
    if not index.complete.all():
        return workload
    sets = downward_closure_sets(workload)
    if len(sets) > MAX_CLOSURE_MARGINALS or len(sets) == workload.n_marginals:
        return workload
    return marginal_queries(workload.domain, sets,
                            description=f"{workload.description} and every marginal inside one")


def _expected_noise_l1(sizes: np.ndarray, config: MWEMConfig, budget: float, n: int) -> np.ndarray:
    """Per marginal, the expected L1 error of measuring it, in fractions: ``cells · E|noise|`` (public).

    ``E|noise|`` is ``√(2/π) σ`` for Gaussian noise and the scale ``b`` for Laplace noise (AIM's penalty,
    McKenna et al. 2022, uses the Gaussian's).
    """
    def mean_absolute(touched: int) -> float:  # a record touches min(2, cells) cells of a marginal
        variance = noise_variance(config.measure_noise, l1=float(touched), l2=math.sqrt(touched), budget=budget)
        return math.sqrt(2.0 * variance / math.pi) if config.measure_noise == "gaussian" else math.sqrt(variance / 2)

    sizes = np.asarray(sizes, dtype=np.float64)
    return sizes * np.where(sizes >= 2, mean_absolute(2), mean_absolute(1)) / n


def _final_sweeps(
    history: list[Measurement], apply: Callable[[Measurement], np.ndarray], config: MWEMConfig
) -> int:
    """Sweep the history after the last round; returns the number of sweeps run (module docstring).

    A sweep's discrepancy is the squared residual of each measured value before its update divided by its noise
    variance, averaged two ways: over every measured value of the history (the cells' mean) and over the
    measurements, each the mean of its own values (the measurements' mean). From ``final_min_sweeps`` on, a sweep
    is the last when each mean is at most 1 (within the noise) or lower than the previous sweep's by less than
    ``final_tolerance`` of it (converged). The cells' mean alone is ruled by the marginals with the most cells: a
    few measured 3-way marginals of thousands of near-empty cells hold it near 1 while the one-way marginals are
    still far from their measurements.
    """
    stop = _StopRule(config)
    for sweep in range(1, config.final_sweeps + 1):
        if stop(sweep, [(apply(past), past.variance) for past in history]):
            return sweep
    return config.final_sweeps


class _StopRule:
    """When the final sweeps or mirror-descent steps stop (:func:`_final_sweeps`): called once per step."""

    def __init__(self, config: MWEMConfig) -> None:
        self.least = config.final_sweeps if config.final_min_sweeps is None else config.final_min_sweeps
        self.tolerance = config.final_tolerance
        self.previous = (math.inf, math.inf)

    def __call__(self, step: int, residuals: list[tuple[np.ndarray, float]]) -> bool:
        """Whether ``step`` is the last, given each measurement's residuals and noise variance at that step."""
        cells = sum(len(residual) for residual, _ in residuals)
        total, per_measurement = 0.0, 0.0
        for residual, variance in residuals:
            squared = float(np.dot(residual, residual)) / variance
            total += squared
            per_measurement += squared / max(len(residual), 1)
        current = (total / max(cells, 1), per_measurement / max(len(residuals), 1))
        done = all(
            now <= 1.0 or before - now < self.tolerance * before
            for now, before in zip(current, self.previous, strict=True)
        )
        self.previous = current
        return step >= self.least and done


MIRROR_BACKTRACKS = 40
"""Most halvings of a mirror-descent step before the estimate counts as converged (a step ``2^-40`` of the first)."""


def _mirror_descent(
    history: list[Measurement], distribution: UniverseDistribution | ParticleDistribution, config: MWEMConfig
) -> int:
    """Mirror descent on the history's Gaussian log-likelihood; returns the steps run (module docstring).

    Post-processing: it reads only the noisy measurements, their public variances and the distribution.
    """
    marginals = sorted({past.marginal for past in history})
    stop = _StopRule(config)

    def loss_and_gradient(weights: np.ndarray | None) -> tuple[float, dict[int, np.ndarray], list, dict]:
        tables = {m: distribution.table(m, weights) for m in marginals}
        gradient = {m: np.zeros_like(tables[m]) for m in marginals}
        residuals, loss = [], 0.0
        for past in history:
            residual = past.values - tables[past.marginal][past.cells]
            residuals.append((residual, past.variance))
            loss += 0.5 * float(np.dot(residual, residual)) / past.variance
            np.add.at(gradient[past.marginal], past.cells, -residual / past.variance)
        return loss, gradient, residuals, tables

    loss, gradient, residuals, tables = loss_and_gradient(None)
    largest = max((float(np.abs(g).max()) for g in gradient.values()), default=0.0)
    if largest == 0.0:
        return 0
    eta = 0.5 / largest  # doubled below: the first trial moves no weight by more than a factor e
    for step in range(config.final_sweeps):  # ``step`` steps taken so far
        if stop(step, residuals):
            return step
        eta *= 2.0
        for _ in range(MIRROR_BACKTRACKS):
            factors = {m: -eta * gradient[m] for m in marginals}
            weights = distribution.weights_after(factors)
            trial = loss_and_gradient(weights)
            decrease = sum(float(np.dot(gradient[m], tables[m] - trial[3][m])) for m in marginals)
            if loss - trial[0] >= 0.5 * decrease:
                break
            eta *= 0.5
        else:
            return step  # no step lowers the loss enough: converged
        distribution.set_weights(weights, factors)
        loss, gradient, residuals, tables = trial
    return config.final_sweeps


def mwem(
    data: Dataset,
    workload: Workload,
    config: MWEMConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    constraints: Constraints | None = None,
    seeds: np.ndarray | None = None,
    seed_weights: np.ndarray | None = None,
    public_n: int | None = None,
    executor: Executor | None = None,
) -> SynthesisResult:
    """Run MWEM and return the final (or average) distribution as weighted records.

    Args:
        data: Private dataset (``n`` records).
        workload: Positive queries (selection is over them and their negations).
        config: Parameters.
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator (support, selections, noise).
        progress: Called after every round with its diagnostics.
        constraints: Public rules: infeasible records get weight 0 (universe) or are never particles (sampled).
        seeds: Records (value codes) that ``config.seed_fraction`` of the particles are drawn from (by
            ``seed_weights``, uniform if None), e.g. another synthesizer's output. They must be feasible under
            ``constraints``; they are public here (already released by a charged mechanism).
        seed_weights: Non-negative weights of ``seeds``.
        public_n: The public ``n`` the sensitivities and the measured fractions use (default ``data.n``, which is
            public under replace-one neighbours). Under add/remove neighbours pass the plan's lower bound on ``n``
            (a noisy count's): selections then use sensitivity ``1/public_n >= 1/min(n, n')`` and measured counts
            are divided by it, so the private ``n`` is never used.
        executor: With ``support="sampled"``, runs the shards of the particles' Metropolis-Hastings moves (e.g. a
            Dask cluster's executor; :class:`~dq_engine.fit.particles.ParticleDistribution`); the same result as
            without one.

    Raises:
        UniverseTooLargeError: With ``support="universe"``, if the universe has more than
            ``2^max_universe_log2`` records.
    """
    if data.domain != workload.domain:
        raise ConfigError("the dataset and the workload are over different domains")
    require_grant(grant, mechanism="MWEM").spend(mwem_events(config), mechanism="MWEM")
    domain = data.domain
    index = MarginalIndex(workload)
    in_turn = [tuple(row) for row in workload.marginals.tolist()] if config.select == "all" else []
    if config.candidates == "closure":
        closed = _closure(workload, index)
        if closed is not workload:
            workload, index = closed, MarginalIndex(closed)
    if config.replay_prior and config.support == "sampled":
        completed = _with_every_column(workload)
        if completed is not workload:
            workload, index = completed, MarginalIndex(completed)
    if constraints is not None and len(constraints):
        constraints = with_witness(constraints)  # raises, naming the rules, when no record is feasible
    if config.support == "universe":
        if domain.universe_log2 > config.max_universe_log2 + 1e-9:
            raise UniverseTooLargeError(
                f"MWEM keeps one weight per record: this domain has 2^{domain.universe_log2:.1f} records, more "
                f"than the limit 2^{config.max_universe_log2:g}; use DualQuery, DQRS or FEM for this domain "
                "(or MWEM with support='sampled')"
            )
        distribution: UniverseDistribution | ParticleDistribution = universe_distribution(
            domain, index, constraints, rng
        )
    else:
        particles, priors, prior_estimates = sample_support(data, config, rng, constraints=constraints)
        if seeds is not None and config.seed_fraction > 0:
            replace_with_seeds(particles, seeds, seed_weights, config.seed_fraction, rng)
        distribution = ParticleDistribution(particles, priors, index, rng, constraints=constraints,
                                            executor=executor)
    true_answers = answer_workload(data, workload)
    n = data.n if public_n is None else int(public_n)
    starts = workload.marginal_starts
    sizes_queried = np.diff(starts)
    history: list[Measurement] = []
    if config.replay_prior and config.support == "sampled" and prior_estimates:
        l1, l2 = prior_sensitivities(data, len(prior_estimates))
        variance = noise_variance(config.measure_noise, l1=l1, l2=l2, budget=config.support_budget) / n**2
        history += prior_measurements(prior_estimates, index, variance)
    average = distribution.snapshot() * 0.0 if config.output == "average" else None
    diagnostics: list[RoundDiagnostics] = []

    def apply(measurement: Measurement) -> np.ndarray:
        return distribution.apply(
            measurement.marginal, measurement.cells, measurement.values, config.learning_rate
        )

    budget = config.measure_epsilon if config.measure_noise == "laplace" else config.measure_rho
    order = _positions(workload, in_turn) if config.select == "all" else None  # measured in turn, not selected
    expected_noise = None if config.select in ("query", "all") else _expected_noise_l1(sizes_queried, config, budget, n)
    estimates = _answers(distribution, index) if order is None or config.track_error else None
    for t in range(1, config.rounds + 1):
        began = time.perf_counter()
        if order is not None:
            m = order[(t - 1) % len(order)]
        elif expected_noise is None or (config.select == "alternate" and t % 2 == 0):
            chosen, _ = select_signed_query(true_answers, estimates, epsilon=config.select_epsilon, n=n, rng=rng)
            m = int(workload.query_marginal[chosen])
        else:
            error = np.add.reduceat(np.abs(true_answers - estimates), starts[:-1])
            m = select_by_score(error - expected_noise, epsilon=config.select_epsilon, sensitivity=2.0 / n, rng=rng)
        if config.measure == "query":
            positions = np.array([chosen])
            l1 = l2 = 1.0
        else:
            positions = np.arange(starts[m], starts[m + 1])
            l1, l2 = float(min(2, sizes_queried[m])), math.sqrt(min(2, sizes_queried[m]))
        true_counts = np.rint(true_answers[positions] * data.n)  # q(D)·n: the integer counts
        noisy = noisy_counts(config.measure_noise, true_counts, l1=l1, l2=l2, budget=budget, rng=rng) / n
        variance = noise_variance(config.measure_noise, l1=l1, l2=l2, budget=budget) / n**2
        measurement = Measurement(m, index.query_cells[m][positions - starts[m]], noisy, variance)
        history.append(measurement)
        apply(measurement)
        for _ in range(config.replay_sweeps):
            for past in history:
                apply(past)
        if config.support_moves and config.support == "sampled":  # the universe's records never move
            distribution.refresh(config.support_moves)
        if average is not None:
            average += distribution.snapshot() / config.rounds
        if estimates is not None:
            estimates = _answers(distribution, index)
        internal = {}
        if config.track_error:
            error = np.abs(estimates - true_answers)
            internal = {"internal_max_error": float(error.max()), "internal_mean_error": float(error.mean())}
        diagnostics.append(
            RoundDiagnostics(
                round=t, sampled=1, distinct=len(positions), source="mw", status="NOT_RUN", objective=0.0,
                bound=None, solver_seconds=0.0, local_seconds=0.0, round_seconds=time.perf_counter() - began,
                free_attributes=0, extra={"marginal": float(m)}, **internal,
            )
        )
        if progress is not None:
            progress(diagnostics[-1])
    if config.final_estimator == "mirror":
        final_sweeps = _mirror_descent(history, distribution, config)
    else:
        final_sweeps = _final_sweeps(history, apply, config)
    if config.final_moves and isinstance(distribution, ParticleDistribution):
        distribution.rejuvenate(config.final_moves)
    final = average if average is not None else distribution.snapshot()
    codes, weights = distribution.records(final)
    events = mwem_events(config)
    return SynthesisResult(
        mechanism="mwem",
        domain=domain,
        records=codes,
        weights=weights,
        parameters={
            "rounds": config.rounds,
            "select_epsilon": config.select_epsilon,
            "measure_epsilon": config.measure_epsilon,
            "measure_rho": config.measure_rho,
            "measure_noise": config.measure_noise,
            "measure": config.measure,
            "select": config.select,
            "candidates": config.candidates,
            "learning_rate": config.learning_rate,
            "replay_sweeps": config.replay_sweeps,
            "final_sweeps": config.final_sweeps,
            "final_min_sweeps": config.final_min_sweeps,
            "final_tolerance": config.final_tolerance,
            "final_estimator": config.final_estimator,
            "final_sweeps_run": final_sweeps,
            "output": config.output,
            "support": config.support,
            "support_size": config.support_size if config.support == "sampled" else None,
            "support_budget": config.support_budget,
            "support_mix": config.support_mix,
            "support_mix_rule": config.support_mix_rule,
            "support_moves": config.support_moves,
            "final_moves": config.final_moves,
            "seed_fraction": config.seed_fraction,
            "replay_prior": config.replay_prior,
        },
        events=tuple(events),
        costs=mwem_costs(events, config.delta),
        n=n,
        diagnostics=tuple(diagnostics),
    )
