"""The best-response oracle: local search, CP-SAT, or a portfolio of both.

The portfolio (default) runs the numpy local search first, then CP-SAT warm-started with the local
search's record as a *complete* hint (every bit and every clause indicator), and keeps the better record
by the exact objective. On *large dense* problems (>= 1,000 distinct clauses and >= 4 per touched bit) the
portfolio skips CP-SAT (status ``SKIPPED_DENSE``): on instances captured from DualQuery runs CP-SAT there
mostly returned nothing within 2 s and never beat the local search (``docs/oracle.md``). On sparse problems
CP-SAT is what finds and proves the optimum (the local search misses it by ~0.4 % on average there).

Whatever the solvers do, the returned record is a valid record (one value per
one-hot block), and if CP-SAT finds nothing and there is no local-search record, a documented fallback
(previous round's record, or a random record) is used and counted. With public constraints on the problem
every record here is feasible: the random record is repaired towards the constraints' witness
(:meth:`~dq_engine.data.constraints.Constraints.repair`), the local search only visits feasible records and CP-SAT
models the rules. Privacy never depends on the oracle:
it only sees sampled queries, which are already private.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dq_engine.oracle.config import OracleConfig
from dq_engine.oracle.cpsat import solve_cpsat
from dq_engine.oracle.local_search import local_search
from dq_engine.oracle.problem import BestResponseProblem

__all__ = ["DENSE_CLAUSES_PER_BIT", "DENSE_MIN_CLAUSES", "BestResponse", "best_response", "is_large_and_dense"]


@dataclass(frozen=True, kw_only=True)
class BestResponse:
    """A best response and how it was found.

    Attributes:
        codes: The record as value codes ``(m,)`` (touched attributes only are meaningful; free ones are
            filled afterwards by the free-attribute policy).
        objective: Exact objective of ``codes`` (weighted satisfied sampled queries).
        source: ``"local"``, ``"cpsat"`` or ``"fallback"``.
        status: CP-SAT status name, ``"NOT_RUN"``, or ``"SKIPPED_DENSE"`` (portfolio on a large dense problem).
        bound: CP-SAT's proven upper bound, when available.
        solver_seconds: CP-SAT wall time (0 if not run).
        local_seconds: Local-search wall time (0 if not run).
        build_seconds: CP-SAT model build time.
        local_objective: Objective found by local search (None if not run).
        cpsat_objective: Objective found by CP-SAT (None if not run or no solution).
    """

    codes: np.ndarray
    objective: float
    source: str
    status: str
    bound: float | None
    solver_seconds: float
    local_seconds: float
    build_seconds: float
    local_objective: float | None
    cpsat_objective: float | None

    @property
    def gap(self) -> float | None:
        """Relative optimality gap ``(bound - objective) / max(1, |bound|)`` when a bound exists."""
        if self.bound is None:
            return None
        return max(0.0, (self.bound - self.objective) / max(1.0, abs(self.bound)))


DENSE_CLAUSES_PER_BIT = 4.0
"""A problem is *dense* from this many distinct clauses per touched bit (``docs/oracle.md``)."""
DENSE_MIN_CLAUSES = 1000
"""... and *large* from this many distinct clauses (smaller problems are solved to optimality instantly)."""


def is_large_and_dense(problem: BestResponseProblem) -> bool:
    """True when CP-SAT is measured not to help within seconds: >= 1000 clauses and >= 4 per touched bit.

    On such instances captured from DualQuery runs (KDD99 s >= 1750, Adult/KDD99 s >= 5000) CP-SAT with a
    complete local-search hint returned *no solution* in 2 s on most, and 5 s of CP-SAT had a higher mean
    regret than 0.25 s of local search (``docs/oracle.md``).
    """
    return problem.n_clauses >= DENSE_MIN_CLAUSES and problem.clauses_per_touched_bit >= DENSE_CLAUSES_PER_BIT


def _objective(problem: BestResponseProblem, codes: np.ndarray) -> float:
    return float(problem.objective(problem.domain.encode_records(codes[None, :]))[0])


def best_response(
    problem: BestResponseProblem,
    config: OracleConfig,
    rng: np.random.Generator,
    *,
    previous: np.ndarray | None = None,
) -> BestResponse:
    """Compute an (approximate) best response.

    Args:
        problem: The weighted MAX-CSP built from the sampled queries.
        config: Oracle settings.
        rng: Generator (local-search perturbations, CP-SAT seed, random fallback).
        previous: Previous round's record (value codes), used as a start, hint and fallback (repaired towards
            the witness if it breaks a rule of ``problem.constraints``).
    """
    domain = problem.domain
    random_record = (rng.random(len(domain)) * domain.sizes).astype(np.int64)
    constraints = problem.constraints
    if constraints is not None and len(constraints):  # starts and fallbacks are feasible records
        witness = constraints.witness_codes
        everything = np.arange(len(domain))
        random_record = constraints.repair(random_record, witness, everything)
        if previous is not None and not constraints.feasible(np.asarray(previous)):
            previous = constraints.repair(previous, witness, everything)
    start = previous if previous is not None else random_record
    cpsat_seed = int(rng.integers(0, 2**31 - 1))

    local = None
    if config.kind in ("portfolio", "local"):
        starts = [start] if previous is None else [previous, random_record]
        local = local_search(
            problem,
            starts,
            rng,
            max_restarts=config.local_restarts,
            time_limit=None if config.deterministic else config.local_time_limit,
        )
    cp = None
    skipped = config.kind == "portfolio" and config.skip_cpsat_when_dense and is_large_and_dense(problem)
    if config.kind in ("portfolio", "cpsat") and problem.n_clauses + (problem.linear is not None) > 0 and not skipped:
        hint = local.codes if local is not None else previous
        cp = solve_cpsat(problem, config, hint=hint, seed=cpsat_seed)

    candidates: list[tuple[float, str, np.ndarray]] = []
    if local is not None:
        candidates.append((local.objective, "local", local.codes))
    if cp is not None and cp.codes is not None:
        candidates.append((cp.objective, "cpsat", cp.codes))  # exact objective of the decoded record
    if candidates:
        # prefer CP-SAT on ties (it carries a proof); otherwise the higher objective
        objective, source, codes = max(candidates, key=lambda c: (c[0], c[1] == "cpsat"))
    else:
        codes = previous if (previous is not None and config.fallback == "previous") else random_record
        objective, source = _objective(problem, codes), "fallback"
    return BestResponse(
        codes=np.asarray(codes, dtype=np.int64),
        objective=objective,
        source=source,
        status=cp.status if cp is not None else ("SKIPPED_DENSE" if skipped else "NOT_RUN"),
        bound=cp.bound if cp is not None else None,
        solver_seconds=cp.seconds if cp is not None else 0.0,
        local_seconds=local.seconds if local is not None else 0.0,
        build_seconds=cp.build_seconds if cp is not None else 0.0,
        local_objective=local.objective if local is not None else None,
        cpsat_objective=cp.objective if cp is not None else None,
    )


