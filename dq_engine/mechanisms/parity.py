"""Parity queries and their best-response model (DualQuery paper, Appendix A).

Over binary attributes, the k-wise parity query of a set ``S`` takes value +1 on records with an even
number of ones in ``S`` and -1 otherwise (Definition A.1, with bit 1 standing for the paper's +1). To play
the same game as for marginals (payoffs in [-1, 1], a negation-closed class of [0, 1]-valued queries) we use
the equivalent 0/1 form ``e_S(x) = (p_S(x) + 1) / 2 = 1[|x_S| even]``; its negation ``1 - e_S`` is the
negated parity ``q̄_S``. Answers on data are fractions, so the sensitivity is ``1/n`` and DualQuery's privacy
analysis (Theorems 4.2/4.3, tight mode) applies unchanged.

Best response (Appendix A's integer program, generalised from k <= 3 to any k): one Boolean per attribute,
one indicator ``c_S`` per distinct sampled set and an integer ``d_S``, with
``Σ_{j∈S} x_j + (1 - c_S) = 2 d_S``, so ``c_S = 1`` exactly when ``|x_S|`` is even; the objective is
``Σ_S (w_even(S) c_S + w_odd(S) (1 - c_S))``. (The paper writes ``Σ x = 2d + c - 1`` with ``d ∈ {0, 1}``,
which for ``|S| = 3`` makes the all-ones assignment infeasible when ``c = 0``; letting ``d`` range over
``0..⌈k/2⌉`` fixes that without changing the optimum.)

Theorem A.2 (Barak et al.) links the two classes: with ``p_T = Π_{i∈T} (1 - 2 x_i)``,
``1[x_S = 0] = 2^{-k} Σ_{T⊆S} p_T`` and ``1[x_S = 1] = 2^{-k} Σ_{T⊆S} (-1)^{|T|} p_T``.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from dq_engine.data.answers import _packed_columns
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.errors import ConfigError, WorkloadError
from dq_engine.oracle.config import OracleConfig
from dq_engine.privacy.accounting import mode_costs
from dq_engine.privacy.grant import PrivacyGrant, require_grant
from dq_engine.privacy.mw import QueryDistribution, SampledQueries
from dq_engine.privacy.theorems import dualquery_events
from dq_engine.results import RoundDiagnostics, SynthesisResult

__all__ = [
    "ParityConfig",
    "ParityWorkload",
    "all_parities",
    "answer_parities",
    "dualquery_parity",
    "parity_best_response",
    "random_parities",
]


@dataclass(frozen=True, eq=False)
class ParityWorkload:
    """Parity queries ``e_S(x) = 1[|x_S| even]`` over the binary attributes of a domain.

    Attributes:
        domain: An all-binary domain.
        sets: Attribute indices of each query, shape ``(N, kmax)``, ascending, padded with -1.
    """

    domain: Domain
    sets: np.ndarray

    def __post_init__(self) -> None:
        if not self.domain.all_binary:
            raise WorkloadError("parity queries need a domain whose attributes are all binary")
        if self.sets.ndim != 2 or len(self.sets) == 0:
            raise WorkloadError("a parity workload needs at least one attribute set")
        if np.any(self.sets >= len(self.domain)):
            raise WorkloadError("a parity set refers to an attribute outside the domain")

    def __len__(self) -> int:
        return int(self.sets.shape[0])

    def evaluate_record(self, bits: np.ndarray) -> np.ndarray:
        """``e_S(x)`` for every query on one bit record ``(d,)``, as bool."""
        extended = np.append(np.asarray(bits, dtype=bool), False)  # index -1 (padding) reads False
        odd = np.zeros(len(self), dtype=bool)
        for column in self.sets.T:
            odd ^= extended[column]
        return ~odd


def _check_k(domain: Domain, k: int) -> None:
    if not 1 <= k <= len(domain):
        raise WorkloadError(f"k ({k}) must be in 1..{len(domain)}")


def all_parities(domain: Domain, k: int, *, up_to: bool = False) -> ParityWorkload:
    """Every k-wise parity (or every parity of size 1..k with ``up_to``, as Theorem A.2 needs)."""
    _check_k(domain, k)
    sizes = range(1, k + 1) if up_to else [k]
    rows = [s + (-1,) * (k - len(s)) for size in sizes for s in itertools.combinations(range(len(domain)), size)]
    return ParityWorkload(domain, np.array(rows, dtype=np.int64))


def random_parities(domain: Domain, k: int, count: int, rng: np.random.Generator) -> ParityWorkload:
    """``count`` distinct uniformly random k-sets of attributes."""
    _check_k(domain, k)
    available = math.comb(len(domain), k)
    if not 1 <= count <= available:
        raise WorkloadError(f"count ({count}) must be in 1..{available} (the number of {k}-sets)")
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < count:
        chosen.add(tuple(sorted(int(a) for a in rng.choice(len(domain), size=k, replace=False))))
    return ParityWorkload(domain, np.array(sorted(chosen), dtype=np.int64))


def answer_parities(data: Dataset, workload: ParityWorkload) -> np.ndarray:
    """Exact ``e_S(D)`` (fraction of records with an even number of ones in ``S``), shape ``(N,)``."""
    if data.domain != workload.domain:
        raise WorkloadError("the dataset and the parity workload are over different domains")
    if not data.is_sparse:
        codes = data.to_codes().astype(bool)
        return np.array([(~np.logical_xor.reduce(codes[:, row[row >= 0]], axis=1)).mean() for row in workload.sets])
    packed = _packed_columns(data).copy()
    packed[-1] = 0  # the padding index -1 reads an all-zero column: XOR identity
    odd = packed[workload.sets[:, 0]]
    for column in workload.sets.T[1:]:
        odd ^= packed[column]
    return 1.0 - np.bitwise_count(odd).sum(axis=1, dtype=np.int64) / data.n


# ---------------------------------------------------------------------- best response
@dataclass(frozen=True, kw_only=True)
class ParityResponse:
    """A best response to sampled parity queries."""

    bits: np.ndarray
    objective: float
    status: str
    bound: float | None
    seconds: float


def _objective(workload: ParityWorkload, sets: np.ndarray, even: np.ndarray, odd: np.ndarray, bits: np.ndarray):
    values = ParityWorkload(workload.domain, sets).evaluate_record(bits)
    return float((even * values + odd * ~values).sum())


def parity_best_response(
    workload: ParityWorkload,
    samples: SampledQueries,
    config: OracleConfig,
    *,
    hint: np.ndarray | None,
    seed: int,
) -> ParityResponse:
    """Maximise the weighted number of satisfied sampled parity queries (Appendix A's IP, see module doc).

    Args:
        workload: The parity workload the samples index.
        samples: Sampled queries (``negated`` = odd-parity target).
        config: Solver settings (time limit, workers, determinism).
        hint: Previous record (bits) used as a complete hint and as the fallback.
        seed: CP-SAT random seed.
    """
    index, negated, count = samples.distinct()
    distinct_sets, where = np.unique(index, return_inverse=True)
    even = np.bincount(where, weights=count * ~negated, minlength=len(distinct_sets))
    odd = np.bincount(where, weights=count * negated, minlength=len(distinct_sets))
    sets = workload.sets[distinct_sets]
    d = len(workload.domain)

    from ortools.sat.python import cp_model  # imported on first solve: OR-Tools takes ~0.5 s to load

    model = cp_model.CpModel()
    # --- variables: one Boolean per attribute, an indicator and an integer per distinct set
    x = [model.new_bool_var(f"x{j}") for j in range(d)]
    indicators = []
    for row in sets:
        members = [x[j] for j in row if j >= 0]
        c = model.new_bool_var("")
        half = model.new_int_var(0, (len(members) + 1) // 2, "")
        # --- constraints: Σ x_S + (1 - c) = 2 d  <=>  c = 1 iff |x_S| is even
        model.add(sum(members) + 1 - c == 2 * half)
        indicators.append((c, half, row[row >= 0]))
    # --- objective: satisfied even-target and odd-target samples
    model.maximize(
        sum(int(e) * c for e, (c, _, _) in zip(even, indicators, strict=True))
        + sum(int(o) * (1 - c) for o, (c, _, _) in zip(odd, indicators, strict=True))
    )
    if hint is not None:
        for j in range(d):
            model.add_hint(x[j], bool(hint[j]))
        for c, half, members in indicators:
            ones = int(np.asarray(hint)[members].sum())
            model.add_hint(c, ones % 2 == 0)
            model.add_hint(half, (ones + (1 - (ones % 2 == 0))) // 2)
    # --- solve
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = int(seed)
    solver.parameters.num_workers = int(config.num_workers)
    if config.deterministic:
        solver.parameters.max_deterministic_time = float(config.deterministic_time_limit)
    else:
        solver.parameters.max_time_in_seconds = float(config.time_limit)
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bits = np.array([solver.boolean_value(v) for v in x], dtype=bool)
        bound = float(solver.best_objective_bound)
    else:
        bits = np.zeros(d, dtype=bool) if hint is None else np.asarray(hint, dtype=bool)
        bound = None
    return ParityResponse(
        bits=bits, objective=_objective(workload, sets, even, odd, bits), status=solver.status_name(status),
        bound=bound, seconds=solver.wall_time,
    )


# ---------------------------------------------------------------------- DualQuery over parities
@dataclass(frozen=True, kw_only=True)
class ParityConfig:
    """DualQuery parameters for parity queries (same meaning as :class:`~dq_engine.DualQueryConfig`)."""

    eta: float
    samples: int
    rounds: int
    delta: float = 1e-6
    oracle: OracleConfig = field(default_factory=lambda: OracleConfig(kind="cpsat"))

    def __post_init__(self) -> None:
        if not self.eta > 0:
            raise ConfigError(f"eta ({self.eta}) must be > 0")
        if self.samples < 1 or self.rounds < 1:
            raise ConfigError(f"samples ({self.samples}) and rounds ({self.rounds}) must be >= 1")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta ({self.delta}) must be in (0, 1)")


def dualquery_parity(
    data: Dataset, workload: ParityWorkload, config: ParityConfig, *, grant: PrivacyGrant, rng: np.random.Generator
) -> SynthesisResult:
    """DualQuery (Algorithm 2) over the negation-closed class of parity queries (Appendix A).

    Privacy is exactly DualQuery's: sampling from ``Q^t`` is an exponential-mechanism draw at
    ``2η(t-1)/n`` because every parity answer has sensitivity ``1/n``. The events are spent on ``grant`` before
    the data is read.
    """
    events = dualquery_events(config.eta, config.samples, config.rounds, data.n)
    require_grant(grant, mechanism="DualQuery over parities").spend(events, mechanism="DualQuery over parities")
    true_answers = answer_parities(data, workload)
    distribution = QueryDistribution(len(workload), eta=config.eta)
    records: list[np.ndarray] = []
    diagnostics = []
    for t in range(1, config.rounds + 1):
        began = time.perf_counter()
        samples = distribution.sample(config.samples, rng)
        response = parity_best_response(
            workload, samples, config.oracle, hint=records[-1] if records else None,
            seed=int(rng.integers(0, 2**31 - 1)),
        )
        records.append(response.bits)
        distribution.update(true_answers - workload.evaluate_record(response.bits))
        diagnostics.append(
            RoundDiagnostics(
                round=t, sampled=len(samples), distinct=len(np.unique(samples.index)), source="cpsat",
                status=response.status, objective=response.objective, bound=response.bound,
                solver_seconds=response.seconds, local_seconds=0.0, round_seconds=time.perf_counter() - began,
                free_attributes=0,
            )
        )
    return SynthesisResult(
        mechanism="dualquery-parity",
        domain=data.domain,
        records=np.stack(records).astype(np.int64),
        parameters={"eta": config.eta, "samples": config.samples, "rounds": config.rounds},
        events=tuple(events),
        costs=mode_costs(events, config.delta, paper_analysis="advanced_composition"),
        n=data.n,
        diagnostics=tuple(diagnostics),
    )
