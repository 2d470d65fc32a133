"""CP-SAT model of the best-response problem (DualQuery paper §5.2 integer program, seed 004 §6).

Model sections:

* **variables** -- one Boolean per bit of every touched attribute; one indicator per clause with two or
  more literals.
* **constraints** -- exactly one bit per touched one-hot block (every solution decodes to a valid record);
  a positive conjunction's indicator implies all its bits (``AddBoolAnd(...).OnlyEnforceIf(c)``); a negated
  conjunction's indicator implies that at least one bit is off (``AddBoolOr(¬x...).OnlyEnforceIf(d)``).
  This "indicator" encoding is the one the paper's IP describes; measurements in ``docs/oracle.md`` compare
  it with the alternatives on real instances.
* **objective** -- maximise the weighted number of satisfied clauses (+ the optional linear term,
  scaled to integers). One-literal clauses enter the objective directly as ``w·x`` or ``w·(1-x)``.
* **solve** -- time limit, workers, seed from :class:`~dq_engine.oracle.config.OracleConfig`; a complete
  hint (every bit *and* every indicator) when a start record is given; OPTIMAL and FEASIBLE accepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from dq_engine.oracle.config import OracleConfig
from dq_engine.oracle.problem import BestResponseProblem

__all__ = ["CpSatResult", "solve_cpsat"]

LINEAR_SCALE = 10_000
"""Float linear coefficients (FEM perturbations) are rounded to multiples of 1/LINEAR_SCALE."""


@dataclass(frozen=True, kw_only=True)
class CpSatResult:
    """Outcome of one CP-SAT solve.

    Attributes:
        codes: Solution as value codes ``(m,)`` (free attributes left at the hint's values), or None.
        status: CP-SAT status name (``OPTIMAL``, ``FEASIBLE``, ``UNKNOWN``, ...).
        objective: Objective of the solution in problem units (None without a solution).
        bound: Best proven upper bound in problem units.
        seconds: Solver wall time.
        build_seconds: Model building time.
    """

    codes: np.ndarray | None
    status: str
    objective: float | None
    bound: float | None
    seconds: float
    build_seconds: float


def solve_cpsat(
    problem: BestResponseProblem, config: OracleConfig, *, hint: np.ndarray | None, seed: int
) -> CpSatResult:
    """Solve the best-response problem with CP-SAT.

    Args:
        problem: The weighted MAX-CSP.
        config: Solver settings (time limit, workers, determinism).
        hint: Optional start record as value codes ``(m,)``; it also supplies free attributes' values.
        seed: CP-SAT ``random_seed`` (drawn from the run's generator, so seeded runs are reproducible).
    """
    began = time.perf_counter()
    domain = problem.domain
    model = cp_model.CpModel()

    # --- variables: one Boolean per bit of each touched attribute
    touched = problem.touched_attributes
    x: dict[int, cp_model.IntVar] = {}
    for attribute in touched:
        start = int(domain.offsets[attribute])
        for bit in range(start, start + domain.attributes[attribute].n_bits):
            x[bit] = model.new_bool_var(f"x{bit}")

    # --- constraints: a valid record has exactly one value per one-hot block
    for attribute in touched:
        if not domain.is_binary[attribute]:
            start = int(domain.offsets[attribute])
            model.add_exactly_one([x[b] for b in range(start, start + domain.attributes[attribute].size)])

    # --- constraints: clause indicators
    objective_terms: list[tuple[int, cp_model.LinearExprT]] = []
    constant = 0
    indicators: list[tuple[cp_model.IntVar, np.ndarray, bool]] = []
    for bits_row, negated, weight in zip(
        problem.clause_bits, problem.clause_negated, problem.clause_weight, strict=True
    ):
        bits = [int(b) for b in bits_row if b >= 0]
        w = int(weight)
        if len(bits) == 1:
            if negated:  # w * (1 - x)
                constant += w
                objective_terms.append((-w, x[bits[0]]))
            else:
                objective_terms.append((w, x[bits[0]]))
            continue
        indicator = model.new_bool_var("")
        if negated:
            model.add_bool_or([x[b].Not() for b in bits]).only_enforce_if(indicator)
        else:
            model.add_bool_and([x[b] for b in bits]).only_enforce_if(indicator)
        objective_terms.append((w, indicator))
        indicators.append((indicator, np.array(bits), bool(negated)))

    # --- objective: weighted satisfied clauses (+ scaled linear term)
    linear_scale = 1
    if problem.linear is not None:
        linear_scale = LINEAR_SCALE
        objective_terms = [(c * linear_scale, v) for c, v in objective_terms]
        constant *= linear_scale
        for bit in np.nonzero(problem.linear)[0]:
            objective_terms.append((round(problem.linear[bit] * linear_scale), x[int(bit)]))
    model.maximize(sum(c * v for c, v in objective_terms) + constant)

    # --- hint: complete (every bit and every indicator), or nothing
    if hint is not None:
        on = hint[domain.bit_attribute] == domain.bit_value
        for bit, var in x.items():
            model.add_hint(var, bool(on[bit]))
        for indicator, bits, negated in indicators:
            full = bool(on[bits].all())
            model.add_hint(indicator, (not full) if negated else full)
    build_seconds = time.perf_counter() - began

    # --- solve
    solver = cp_model.CpSolver()
    parameters = solver.parameters
    parameters.random_seed = int(seed)
    parameters.num_workers = int(config.num_workers)
    if config.deterministic:
        parameters.max_deterministic_time = float(config.deterministic_time_limit)
        if config.num_workers > 1:
            parameters.interleave_search = True
    else:
        parameters.max_time_in_seconds = float(config.time_limit)
    if config.max_presolve_iterations is not None:
        parameters.max_presolve_iterations = int(config.max_presolve_iterations)
    status = solver.solve(model)
    status_name = solver.status_name(status)

    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return CpSatResult(
            codes=None, status=status_name, objective=None, bound=None,
            seconds=solver.wall_time, build_seconds=build_seconds,
        )
    # --- decode: touched attributes from the solution, free ones from the hint (or 0)
    codes = np.zeros(len(domain), dtype=np.int64) if hint is None else hint.copy()
    for attribute in touched:
        start = int(domain.offsets[attribute])
        if domain.is_binary[attribute]:
            codes[attribute] = int(solver.boolean_value(x[start]))
        else:
            size = domain.attributes[attribute].size
            codes[attribute] = next(v for v in range(size) if solver.boolean_value(x[start + v]))
    return CpSatResult(
        codes=codes,
        status=status_name,
        objective=solver.objective_value / linear_scale,
        bound=solver.best_objective_bound / linear_scale,
        seconds=solver.wall_time,
        build_seconds=build_seconds,
    )
