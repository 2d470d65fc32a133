r"""FEM: Follow-the-perturbed-leader with the Exponential Mechanism (Vietri et al. 2020, Algorithms 1-2).

The primal no-regret dynamics of the query-release game (Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient
Algorithms for Private Synthetic Data Release", Algorithm 1):

* the **query player** picks one query per round with the exponential mechanism, score
  ``S_t(D, q) = q(D) - q(D̂^t)`` over the negation-closed class (:mod:`dq_engine.privacy.exponential_mechanism`);
* the **data player** runs Non-Convex Follow-the-Perturbed-Leader (Algorithm 2): ``D̂^t`` is the uniform
  distribution over ``s`` samples, each the best response ``argmax_x Σ_{i<t} q_i(x) - <x, σ_j>`` to the
  queries selected so far under a fresh perturbation ``σ_j``, solved by the CP-SAT/local-search oracle with
  the perturbation as the problem's linear term (Vietri et al. 2020 §6 integer program);
* the output is the union of the per-round samples, i.e. the average ``(1/T) Σ_t D̂^t``.

**Perturbation.** Algorithm 2 draws every coordinate of ``σ_j`` from the exponential distribution
``Exp(η)`` and subtracts ``<x, σ_j>``; the authors' reference code (``giusevtr/fem``, ``fem.py``) does the
same with ``numpy.random.exponential(η)``, i.e. η is the *scale* (mean). §6 of the paper writes
``σ ~ Lap(η)^d`` instead. We follow Algorithm 2 and the code (``perturbation="exponential"``, the
default) because Non-Convex FTPL's regret bound (Suggala & Netrapalli 2019), which Corollary 8.1 uses, is
proved for exponential perturbations; ``perturbation="laplace"`` reproduces the §6 text. With one-hot
blocks the exponential penalty acts per block like a random utility per value, so every attribute is a
decision variable and no attribute is left free.

**Rounds.** ``rounds`` is the number ``T`` of exponential-mechanism draws, each ε₀-DP, so the run is
``T · ρ₀``-zCDP with ``ρ₀ = ε₀²/2`` as Vietri et al. 2020 charges it (Theorem 8, paper mode) or ``ε₀²/8`` by the
bounded-range analysis (tight mode). The data player plays ``T + 1`` times (``D̂^1`` from the free uniform
draw ``q_0``, ``D̂^{T+1}`` from ``q_0..q_T``): Algorithm 1 with ``T + 1`` rounds would draw a final
``q_{T+1}`` that nothing uses; we skip that draw, so the output distribution is the algorithm's and the
charge is one draw smaller. :func:`calibrate_fem` picks ``T`` (or ε₀) so the cost never exceeds the target.
The reference code checks the budget before each draw and so never overspends either; it additionally
keeps only the rounds after half the budget is spent (``burn_in`` here, 0 by default = the paper).

**Oracle and privacy.** The data player never reads the private data: it sees only the selected queries
and its own noise. Privacy (Theorem 8) therefore holds for *any* oracle — exact, time-limited, heuristic
or failing ("differential privacy is guaranteed even if the solver runs forever or fails to optimize
correctly", Vietri et al. 2020 §1). What an approximate oracle breaks is the *accuracy* analysis: FTPL's regret bound
(and Corollary 8.1) assumes each sample is an exact argmax of the perturbed objective; a sub-optimal answer
is a sample from some other distribution and the error guarantee no longer applies. Our default
(:func:`default_fem_oracle`) is CP-SAT alone with one search worker per call and a *deterministic* time
limit, so runs are reproducible; calls that stop at the limit return CP-SAT's best feasible record and are
counted in the diagnostics (``extra["not_optimal"]``), so a reader can see when the accuracy guarantee's
premise failed. CP-SAT rounds the float perturbation to multiples of 1e-4 (``cpsat.LINEAR_SCALE``), so
"exact" means exact up to that rounding.

**Public constraints** (:class:`~dq_engine.data.constraints.Constraints`, optional): every oracle call takes its
perturbed best response over the feasible records only (CP-SAT models the rules; starts and fallbacks are
feasible), so every published sample keeps the rules. FTPL's regret bound then holds against the best feasible
record; privacy is unchanged (the rules are public and the data player never reads the data).

**Parallelism.** The ``s`` oracle calls of a round are independent. Each gets its own child generator
(:func:`dq_engine.privacy.rng.spawn`, drawn in call order before any call runs) that draws its perturbation and
seeds its oracle, and call ``j`` is warm-started from the previous round's ``j``-th sample; with a
deterministic oracle the output is therefore identical for any number of ``workers`` (a process pool) and
for any ``executor`` passed in (any :class:`concurrent.futures.Executor`, e.g. a Dask cluster's
``distributed.Client.get_executor()``: the engine only calls its ``map`` and never imports a cluster library).
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dq_engine.data.answers import answer_workload
from dq_engine.data.constraints import Constraints
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import Workload
from dq_engine.errors import AccountingError, ConfigError
from dq_engine.oracle import (
    BestResponse,
    BestResponseProblem,
    OracleConfig,
    best_response,
    problem_from_samples,
    with_witness,
)
from dq_engine.privacy.accounting import (
    AccountingMode,
    ExponentialMechanismEvent,
    PrivacyEvent,
    fem_costs,
    within_target,
)
from dq_engine.privacy.calibration import largest_admissible
from dq_engine.privacy.exponential_mechanism import SparseSignedSelector
from dq_engine.privacy.grant import PrivacyGrant, require_grant
from dq_engine.privacy.mw import SampledQueries
from dq_engine.privacy.rng import spawn
from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = [
    "FEMConfig",
    "Perturbation",
    "calibrate_fem",
    "default_fem_oracle",
    "fem",
    "fem_events",
]

Perturbation = Literal["exponential", "laplace", "separator-laplace"]
ProgressCallback = Callable[[RoundDiagnostics], None]


def default_fem_oracle() -> OracleConfig:
    """CP-SAT alone, one search worker per call (calls already run in parallel), deterministic limit 1.0."""
    return OracleConfig(kind="cpsat", num_workers=1, deterministic=True, deterministic_time_limit=1.0)


@dataclass(frozen=True, kw_only=True)
class FEMConfig:
    """Parameters of FEM.

    Attributes:
        epsilon_0: Pure ε₀ of each exponential-mechanism draw (Vietri et al. 2020, Table 3: 0.003 .. 0.019).
        noise_scale: η, the scale (mean) of the exponential perturbation (Table 3: 1 .. 4).
        samples: ``s``, FTPL samples (oracle calls) per round, >= 1.
        rounds: ``T``, number of exponential-mechanism draws, >= 1 (see :func:`calibrate_fem`).
        perturbation: ``"exponential"`` (Algorithm 2, reference code) or ``"laplace"`` (§6 text).
        burn_in: Fraction in [0, 1) of the first data-player rounds left out of the output (0 = Algorithm 1).
        delta: δ used to report (ε, δ) costs, in (0, 1).
        oracle: Oracle settings; use a deterministic one for reproducible, worker-independent runs.
        workers: Processes for the oracle calls of a round (1 = in this process).
        track_error: Record internal error-so-far in the diagnostics.
    """

    epsilon_0: float
    noise_scale: float
    samples: int
    rounds: int
    perturbation: Literal["exponential", "laplace"] = "exponential"
    burn_in: float = 0.0
    delta: float = 1e-6
    oracle: OracleConfig = field(default_factory=default_fem_oracle)
    workers: int = 1
    track_error: bool = True

    def __post_init__(self) -> None:
        check_game_parameters(self)
        if self.perturbation not in ("exponential", "laplace"):
            raise ConfigError(f"perturbation ({self.perturbation!r}) must be 'exponential' or 'laplace'")


def check_game_parameters(config: object) -> None:
    """Bounds shared by FEM and sepFEM configurations."""
    if not (config.epsilon_0 > 0 and math.isfinite(config.epsilon_0)):
        raise ConfigError(f"epsilon_0 ({config.epsilon_0}) must be finite and > 0")
    if not (config.noise_scale > 0 and math.isfinite(config.noise_scale)):
        raise ConfigError(f"noise_scale ({config.noise_scale}) must be finite and > 0")
    if config.samples < 1:
        raise ConfigError(f"samples ({config.samples}) must be >= 1")
    if config.rounds < 1:
        raise ConfigError(f"rounds ({config.rounds}) must be >= 1")
    if not 0 <= config.burn_in < 1:
        raise ConfigError(f"burn_in ({config.burn_in}) must be in [0, 1)")
    if not 0 < config.delta < 1:
        raise ConfigError(f"delta ({config.delta}) must be in (0, 1)")
    if not 1 <= config.workers <= 64:
        raise ConfigError(f"workers ({config.workers}) must be in 1..64")


# ---------------------------------------------------------------------- accounting
def fem_events(epsilon_0: float, rounds: int) -> list[PrivacyEvent]:
    """``T`` ε₀-DP exponential-mechanism draws (Theorem 8); the initial uniform draw ``q_0`` is free."""
    if rounds < 1:
        raise ConfigError(f"rounds ({rounds}) must be >= 1")
    return [ExponentialMechanismEvent(epsilon=epsilon_0, count=rounds, label=f"{rounds} query selections")]


def _fem_cost(epsilon_0: float, rounds: int, delta: float, mode: AccountingMode) -> float:
    return fem_costs(fem_events(epsilon_0, rounds), delta)[mode].epsilon


def calibrate_fem(
    *,
    epsilon: float,
    delta: float,
    mode: AccountingMode = "tight",
    epsilon_0: float | None = None,
    rounds: int | None = None,
) -> tuple[float, int]:
    """``(ε₀, T)`` whose cost in ``mode`` is at most ``(epsilon, delta)``; give exactly one of the two.

    With ``epsilon_0`` the largest admissible ``T`` is returned (so ``T + 1`` draws would exceed the
    target); with ``rounds`` the largest admissible ε₀ (found by bisection, re-checked on the exact cost).

    Raises:
        AccountingError: If the target cannot be met (even one round at ``epsilon_0`` is too expensive).
        ConfigError: Unless exactly one of ``epsilon_0`` and ``rounds`` is given.
    """
    if (epsilon_0 is None) == (rounds is None):
        raise ConfigError("give exactly one of epsilon_0 and rounds to calibrate the other")
    if not epsilon > 0:
        raise AccountingError(f"target epsilon ({epsilon}) must be > 0")
    if epsilon_0 is not None:
        found = largest_admissible(lambda t: _fem_cost(epsilon_0, t, delta, mode), epsilon, minimum=1)
        return float(epsilon_0), found
    if rounds < 1:
        raise ConfigError(f"rounds ({rounds}) must be >= 1")
    low, high = 0.0, 1.0
    while within_target(_fem_cost(high, rounds, delta, mode), epsilon):
        low, high = high, 2 * high
    for _ in range(60):
        middle = 0.5 * (low + high)
        if within_target(_fem_cost(middle, rounds, delta, mode), epsilon):
            low = middle
        else:
            high = middle
    if not low > 0 or not within_target(_fem_cost(low, rounds, delta, mode), epsilon):
        raise AccountingError(f"no epsilon_0 > 0 fits {rounds} rounds in epsilon={epsilon}; use fewer rounds")
    return low, int(rounds)


# ---------------------------------------------------------------------- the oracle calls
@dataclass(frozen=True, kw_only=True)
class _FTPLTask:
    """One perturbed best-response call (picklable: sent to worker processes)."""

    domain: Domain
    clause_bits: np.ndarray
    clause_negated: np.ndarray
    clause_weight: np.ndarray
    perturbation: Perturbation
    noise_scale: float
    oracle: OracleConfig
    previous: np.ndarray | None
    rng: np.random.Generator
    constraints: Constraints | None = None


def perturbation_term(
    domain: Domain, perturbation: Perturbation, noise_scale: float, rng: np.random.Generator
) -> np.ndarray:
    """The linear term added to the best-response objective, one coefficient per bit.

    * ``exponential``: ``-σ`` with ``σ_b ~ Exp(η)`` (FEM, Algorithm 2: maximise ``Σ q_i(x) - <x, σ>``);
    * ``laplace``: ``-σ`` with ``σ_b ~ Lap(η)`` (FEM as written in Vietri et al. 2020 §6);
    * ``separator-laplace``: ``+σ`` with ``σ_b ~ Lap(η)``, one weight per separator query ``x_b = 1``
      (sepFEM, Algorithm 3: maximise ``Σ q_i(x) + Σ_j σ_j q̃_j(x)``).
    """
    if perturbation == "exponential":
        return -rng.exponential(noise_scale, size=domain.n_bits)
    if perturbation == "laplace":
        return -rng.laplace(0.0, noise_scale, size=domain.n_bits)
    if perturbation == "separator-laplace":
        return rng.laplace(0.0, noise_scale, size=domain.n_bits)
    raise ConfigError(f"perturbation ({perturbation!r}) must be 'exponential', 'laplace' or 'separator-laplace'")


def _ftpl_sample(task: _FTPLTask) -> BestResponse:
    """Draw the perturbation from the task's generator and solve the perturbed best response."""
    rng = task.rng
    linear = perturbation_term(task.domain, task.perturbation, task.noise_scale, rng)
    problem = BestResponseProblem(
        domain=task.domain,
        clause_bits=task.clause_bits,
        clause_negated=task.clause_negated,
        clause_weight=task.clause_weight,
        linear=linear,
        constraints=task.constraints,
    )
    return best_response(problem, task.oracle, rng, previous=task.previous)


@contextmanager
def _oracle_pool(
    workers: int, executor: Executor | None = None
) -> Iterator[Callable[[list[_FTPLTask]], list[BestResponse]]]:
    """A ``map`` over tasks: the given executor, else in-process for one worker, else a process pool.

    A passed-in ``executor`` is used as is (its ``map`` must return results in task order, as
    :meth:`concurrent.futures.Executor.map` does) and is not shut down here: its owner manages it.
    The process pool is kept for the whole run and uses the ``forkserver`` start method (forking a process
    whose CP-SAT threads are running can deadlock), with :mod:`dq_engine.mechanisms.fem` preloaded in the server. As
    with any non-fork start method, a script that runs FEM with ``workers > 1`` must guard its entry point
    with ``if __name__ == "__main__":``.
    """
    if executor is not None:
        yield lambda tasks: list(executor.map(_ftpl_sample, tasks))
        return
    if workers == 1:
        yield lambda tasks: [_ftpl_sample(task) for task in tasks]
        return
    context = multiprocessing.get_context("forkserver")
    # import once in the server, fork cheap workers from it
    context.set_forkserver_preload(["dq_engine.mechanisms.fem"])
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:

        def run(tasks: list[_FTPLTask]) -> list[BestResponse]:
            chunk = max(1, math.ceil(len(tasks) / workers))
            return list(pool.map(_ftpl_sample, tasks, chunksize=chunk))

        yield run


def oracle_pool_name(workers: int, executor: Executor | None) -> str:
    """Where a round's oracle calls ran, for the result's public parameters."""
    if executor is not None:
        return "executor"
    return "processes" if workers > 1 else "serial"


# ---------------------------------------------------------------------- the game
def run_primal_game(
    data: Dataset,
    workload: Workload,
    config: object,
    *,
    mechanism: str,
    perturbation: Perturbation,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    progress: ProgressCallback | None,
    executor: Executor | None = None,
    constraints: Constraints | None = None,
) -> SynthesisResult:
    """Algorithm 1 with an FTPL data player (Algorithm 2 or 3, chosen by ``perturbation``); what FEM and sepFEM share.

    Args:
        data: Private dataset.
        workload: Positive queries.
        config: A :class:`FEMConfig` or :class:`dq_engine.mechanisms.sepfem.SepFEMConfig` (checked by
            :func:`check_game_parameters`); only the fields they share are read.
        mechanism: Name recorded in the result (``"fem"`` or ``"sepfem"``).
        perturbation: The data player's perturbation (Algorithm 2 or 3).
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator.
        progress: Called after every data-player round with its diagnostics.
        executor: Runs each round's oracle calls instead of ``config.workers`` processes.
        constraints: Public rules every sample keeps (every oracle call is restricted to feasible records), or None.
    """
    if data.domain != workload.domain:
        raise ConfigError("the dataset and the workload are over different domains")
    events = fem_events(config.epsilon_0, config.rounds)
    require_grant(grant, mechanism=mechanism).spend(events, mechanism=mechanism)
    domain = data.domain
    constraints = with_witness(constraints) if constraints is not None and len(constraints) else None
    true_answers = answer_workload(data, workload)
    selector = SparseSignedSelector(true_answers)
    index = MarginalIndex(workload)
    n_signed = 2 * len(workload)
    first = int(rng.integers(0, n_signed))  # q_0: uniform over the negation-closed class, no privacy cost
    selected = SampledQueries(np.array([first // 2]), np.array([bool(first % 2)]))
    previous: list[np.ndarray] | None = None
    kept: list[np.ndarray] = []
    synthetic_sum = np.zeros(len(workload)) if config.track_error else None
    first_kept = math.floor(config.burn_in * (config.rounds + 1)) + 1
    diagnostics: list[RoundDiagnostics] = []
    with _oracle_pool(config.workers, executor) as run_tasks:
        for t in range(1, config.rounds + 2):
            began = time.perf_counter()
            base = problem_from_samples(workload, selected)
            used = len(selected)
            children = spawn(rng, config.samples)
            tasks = [
                _FTPLTask(
                    domain=domain,
                    clause_bits=base.clause_bits,
                    clause_negated=base.clause_negated,
                    clause_weight=base.clause_weight,
                    perturbation=perturbation,
                    noise_scale=config.noise_scale,
                    oracle=config.oracle,
                    previous=None if previous is None else previous[j],
                    rng=child,
                    constraints=constraints,
                )
                for j, child in enumerate(children)
            ]
            samples = run_tasks(tasks)
            records = np.stack([sample.codes for sample in samples])
            previous = list(records)
            if t >= first_kept:
                kept.append(records)
            positions, values = index.sparse_answers(records)
            if t <= config.rounds:  # query player: q_t ~ EM(S_t), S_t(D, q) = q(D) - q(D̂^t)
                chosen, negated = selector.select(positions, values, epsilon=config.epsilon_0, n=data.n, rng=rng)
                selected = selected.concat(SampledQueries(np.array([chosen]), np.array([negated])))
            internal = {}
            if synthetic_sum is not None:
                synthetic_sum[positions] += values
                error = np.abs(synthetic_sum / t - true_answers)
                internal = {"internal_max_error": float(error.max()), "internal_mean_error": float(error.mean())}
            optimal = sum(sample.status == "OPTIMAL" for sample in samples)
            diagnostics.append(
                RoundDiagnostics(
                    round=t,
                    sampled=used,
                    distinct=base.n_clauses,
                    source=Counter(sample.source for sample in samples).most_common(1)[0][0],
                    status="OPTIMAL" if optimal == len(samples) else "MIXED",
                    objective=float(np.mean([sample.objective for sample in samples])),
                    bound=None,
                    solver_seconds=float(sum(sample.solver_seconds for sample in samples)),
                    local_seconds=float(sum(sample.local_seconds for sample in samples)),
                    round_seconds=time.perf_counter() - began,
                    free_attributes=0,
                    extra={
                        "not_optimal": float(len(samples) - optimal),
                        "fallback": float(sum(sample.source == "fallback" for sample in samples)),
                    },
                    **internal,
                )
            )
            if progress is not None:
                progress(diagnostics[-1])
    return SynthesisResult(
        mechanism=mechanism,
        domain=domain,
        records=np.concatenate(kept).astype(np.int64),
        parameters={
            "epsilon_0": config.epsilon_0,
            "noise_scale": config.noise_scale,
            "samples": config.samples,
            "rounds": config.rounds,
            "perturbation": perturbation,
            "burn_in": config.burn_in,
            "workers": config.workers,
            "oracle_pool": oracle_pool_name(config.workers, executor),
            "oracle_kind": config.oracle.kind,
            "oracle_deterministic": config.oracle.deterministic,
        },
        events=tuple(events),
        costs=fem_costs(events, config.delta),
        n=data.n,
        diagnostics=tuple(diagnostics),
    )


def fem(
    data: Dataset,
    workload: Workload,
    config: FEMConfig,
    *,
    grant: PrivacyGrant,
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    executor: Executor | None = None,
    constraints: Constraints | None = None,
) -> SynthesisResult:
    """Run FEM (Vietri et al. 2020, Algorithms 1-2) and return the union of the per-round FTPL samples.

    Args:
        data: Private dataset (``n`` records).
        workload: Positive queries; the game is played over them and their negations.
        config: Parameters (ε₀, η, s, T, perturbation, oracle, workers).
        grant: The budget this run spends before it reads ``data`` (refused when it does not cover the run).
        rng: Generator for the initial query, the selections and (through spawned children) the oracle calls.
        progress: Called after every data-player round with its diagnostics.
        executor: Runs each round's independent oracle calls (e.g. a Dask cluster's executor) instead of
            ``config.workers`` local processes; the output is the same either way.
        constraints: Public rules; every published sample keeps them (None: no rules).

    Returns:
        ``(T + 1 - burn-in rounds) · s`` records (value codes, uniform weights), the ``T`` exponential
        mechanism events and their costs in paper and tight modes.
    """
    return run_primal_game(
        data, workload, config, mechanism="fem", perturbation=config.perturbation, grant=grant,
        rng=rng, progress=progress, executor=executor, constraints=constraints,
    )
