"""CP-SAT model of the best-response problem (Gaboardi et al. 2014 §5.2 integer program, Vietri et al. 2020 §6).

Model sections:

* **variables** -- one Boolean per bit of every touched attribute; one indicator per clause with two or
  more literals.
* **constraints** -- exactly one bit per touched one-hot block (every solution decodes to a valid record);
  clause indicators in one of four equivalent encodings (:data:`ENCODINGS`). The default, ``"indicator"``,
  is the paper's IP written with enforcement literals: a positive conjunction's indicator implies all its
  bits (``bool_and`` enforced by ``c``), a negated conjunction's indicator implies that at least one bit is
  off (``bool_or(¬x…)`` enforced by ``d``). Because the objective rewards indicators with positive weights,
  one direction of the implication suffices; at the optimum ``c`` (``d``) equals the clause's truth value.
* **constraints: public rules** -- with :class:`~dq_engine.data.constraints.Constraints`, each forbidden
  combination of ``k`` literals is the linear row ``Σ (one-hot bits of its literals) <= k - 1``
  (:func:`add_rule_constraints`); the attributes linked to the touched ones through rules are decision variables
  too (:attr:`~dq_engine.oracle.problem.BestResponseProblem.variable_attributes`), and every other attribute keeps
  a feasible record's value (the hint when it is feasible, else the constraints' witness).
* **objective** -- maximise the weighted number of satisfied clauses (+ the optional linear term, scaled to
  integers). One-literal clauses enter the objective directly as ``w·x`` or ``w·(1-x)``.
* **solve** -- time limit, workers, presolve iterations and seed from
  :class:`~dq_engine.oracle.config.OracleConfig`; a complete hint (every bit *and* every indicator) when a
  start record is given; OPTIMAL and FEASIBLE accepted.

The model is written straight into the ``CpModelProto`` from numpy arrays (one Python call per clause,
none per literal): with 20,000 sampled clauses that takes about 0.14 s including the hint, where building it
through the ``CpModel`` wrapper took 0.56-0.88 s. Measurements of the four encodings, worker counts, hints
and presolve settings on instances captured from real DualQuery runs are in ``docs/oracle.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.oracle.config import OracleConfig
from dq_engine.oracle.problem import BestResponseProblem

__all__ = ["ENCODINGS", "CpSatResult", "Encoding", "solve_cpsat"]

LINEAR_SCALE = 10_000
"""Float linear coefficients (FEM perturbations) are rounded to multiples of 1/LINEAR_SCALE."""

Encoding = Literal["indicator", "clause", "linear", "reified"]
ENCODINGS: tuple[Encoding, ...] = ("indicator", "clause", "linear", "reified")
"""Clause encodings: ``indicator`` (``bool_and``/``bool_or`` enforced by the indicator, the default),
``clause`` (plain CNF: ``¬c ∨ x`` per bit, ``¬d ∨ ¬x_a ∨ ¬x_b ∨ …``), ``linear`` (the paper's IP rows
``Σx ≥ k·c`` and ``Σ(1-x) ≥ d``) and ``reified`` (indicator ⇔ clause, both directions)."""

_INT_BOUND = 1 << 40


@dataclass(frozen=True, kw_only=True)
class CpSatResult:
    """Outcome of one CP-SAT solve.

    Attributes:
        codes: Solution as value codes ``(m,)`` (free attributes left at the hint's values), or None.
        status: CP-SAT status name (``OPTIMAL``, ``FEASIBLE``, ``UNKNOWN``, ...).
        objective: Exact objective of the decoded record in problem units (None without a solution). It can
            exceed ``solver_objective``: with one-sided encodings a non-optimal solution may leave the
            indicator of a satisfied clause at 0.
        bound: Best proven upper bound in problem units (None without a solution).
        seconds: Solver wall time.
        build_seconds: Model building time.
        deterministic_time: CP-SAT's deterministic time of the solve (its own work unit, not seconds).
        solver_objective: CP-SAT's own objective value (None without a solution).
        progress: ``(seconds, objective)`` of every improving solution, when ``record_progress`` was set.
    """

    codes: np.ndarray | None
    status: str
    objective: float | None
    bound: float | None
    seconds: float
    build_seconds: float
    deterministic_time: float = 0.0
    solver_objective: float | None = None
    progress: tuple[tuple[float, float], ...] = field(default_factory=tuple)


def _progress_callback(scale: int) -> object:
    """A CP-SAT solution callback that records the wall time and objective of every improving solution."""
    from ortools.sat.python import cp_model

    class _Progress(cp_model.CpSolverSolutionCallback):
        def __init__(self) -> None:
            super().__init__()
            self.began = time.perf_counter()
            self.points: list[tuple[float, float]] = []

        def on_solution_callback(self) -> None:
            self.points.append((time.perf_counter() - self.began, self.objective_value / scale))

    return _Progress()


def solve_cpsat(
    problem: BestResponseProblem,
    config: OracleConfig,
    *,
    hint: np.ndarray | None,
    seed: int,
    encoding: Encoding = "indicator",
    record_progress: bool = False,
) -> CpSatResult:
    """Solve the best-response problem with CP-SAT.

    Args:
        problem: The weighted MAX-CSP.
        config: Solver settings (time limit, workers, presolve, determinism).
        hint: Optional start record as value codes ``(m,)``; it also supplies free attributes' values (with
            constraints: only when it is feasible, else the witness supplies them).
        seed: CP-SAT ``random_seed`` (drawn from the run's generator, so seeded runs are reproducible).
        encoding: Clause encoding, one of :data:`ENCODINGS` (all give the same optimum).
        record_progress: Record ``(seconds, objective)`` of each improving solution (bench use).
    """
    from ortools.sat.python import cp_model  # imported on first solve: OR-Tools takes ~0.5 s to load

    if encoding not in ENCODINGS:
        raise ValueError(f"encoding ({encoding!r}) must be one of {ENCODINGS}")
    began = time.perf_counter()
    domain = problem.domain
    model = cp_model.CpModel()
    proto = model.proto

    # --- variables: one Boolean per bit of each variable attribute (the touched ones, plus those linked to them
    # through public rules), then one indicator per long clause
    touched = problem.variable_attributes
    touched_bit = np.zeros(domain.n_bits, dtype=bool)
    touched_bit[np.isin(domain.bit_attribute, touched)] = True
    var_of_bit = np.full(domain.n_bits, -1, dtype=np.int64)
    var_of_bit[touched_bit] = np.arange(int(touched_bit.sum()))
    n_bit_vars = int(touched_bit.sum())

    size = problem.clause_size
    long = np.flatnonzero(size >= 2)
    single = np.flatnonzero(size == 1)
    n_vars = n_bit_vars + len(long)
    for _ in range(n_vars):
        proto.variables.add().domain.extend((0, 1))

    # --- constraints: a valid record has exactly one value per one-hot block
    add_block_constraints(proto, domain, touched, var_of_bit)

    # --- constraints: public rules (edit rules, structural zeros). A forbidden combination of k literals may
    # not hold in full: the sum of its literals' one-hot bits is at most k - 1. Only the rules inside the
    # variable attributes are rows; every other rule involves only attributes held at the base record's values
    # (a feasible record), so it holds already.
    constraints = problem.constraints
    base = hint
    if constraints is not None and len(constraints):
        if base is None or not constraints.feasible(np.asarray(base)):
            base = constraints.witness_codes if hint is None else _with_free_from(hint, constraints, touched)
        add_rule_constraints(proto, constraints, constraints.involving(touched), var_of_bit)

    # --- constraints: clause indicators
    indicator_of_clause = np.arange(n_bit_vars, n_vars)
    literal_vars = [
        [int(v) for v in var_of_bit[row[row >= 0]]] for row in problem.clause_bits[long]
    ]
    negated_long = problem.clause_negated[long].tolist()
    _add_clause_constraints(proto, encoding, literal_vars, negated_long, indicator_of_clause.tolist())

    # --- objective: weighted satisfied clauses (+ scaled linear term); the proto minimises, so negate
    scale = LINEAR_SCALE if problem.linear is not None else 1
    weight = problem.clause_weight.astype(np.int64) * scale
    objective_vars = [indicator_of_clause]
    objective_coeffs = [weight[long]]
    single_negated = problem.clause_negated[single]
    single_vars = var_of_bit[problem.clause_bits[single, 0]]
    # w·x for a positive literal; w·(1-x) = w - w·x for a negated one
    objective_vars.append(single_vars)
    objective_coeffs.append(np.where(single_negated, -weight[single], weight[single]))
    constant = int(weight[single][single_negated].sum())
    if problem.linear is not None:
        bits = np.flatnonzero(problem.linear)
        objective_vars.append(var_of_bit[bits])
        objective_coeffs.append(np.round(problem.linear[bits] * scale).astype(np.int64))
    variables = np.concatenate(objective_vars)
    coefficients = np.concatenate(objective_coeffs)
    # merge repeated variables (a bit can appear in several one-literal clauses and in the linear term)
    merged_vars, inverse = np.unique(variables, return_inverse=True)
    merged_coeffs = np.bincount(inverse, weights=coefficients, minlength=len(merged_vars)).astype(np.int64)
    keep = merged_coeffs != 0
    proto.objective.vars.extend(merged_vars[keep].tolist())
    proto.objective.coeffs.extend((-merged_coeffs[keep]).tolist())
    proto.objective.offset = float(-constant)
    proto.objective.scaling_factor = -1.0

    # --- hint: complete (every bit and every indicator), or nothing
    if hint is not None and (constraints is None or constraints.feasible(np.asarray(hint))):
        on = hint[domain.bit_attribute] == domain.bit_value
        padded = np.where(problem.clause_bits[long] >= 0, on[np.maximum(problem.clause_bits[long], 0)], True)
        full = padded.all(axis=1)
        satisfied = np.where(problem.clause_negated[long], ~full, full)
        proto.solution_hint.vars.extend(range(n_vars))
        proto.solution_hint.values.extend(np.concatenate([on[touched_bit], satisfied]).astype(np.int64).tolist())
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
    callback = _progress_callback(scale) if record_progress else None
    status = solver.solve(model, callback)
    status_name = solver.status_name(status)
    response = solver.response_proto

    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return CpSatResult(
            codes=None, status=status_name, objective=None, bound=None, seconds=solver.wall_time,
            build_seconds=build_seconds, deterministic_time=response.deterministic_time,
        )
    # --- decode: variable attributes from the solution, the others from the base record (hint, witness or 0)
    solution = np.asarray(response.solution, dtype=np.int64)[:n_bit_vars].astype(bool)
    on_bits = np.zeros(domain.n_bits, dtype=bool)
    on_bits[touched_bit] = solution
    codes = np.zeros(len(domain), dtype=np.int64) if base is None else np.asarray(base, dtype=np.int64).copy()
    for attribute in touched:
        start = int(domain.offsets[attribute])
        if domain.is_binary[attribute]:
            codes[attribute] = int(on_bits[start])
        else:
            codes[attribute] = int(np.argmax(on_bits[start : start + domain.attributes[attribute].size]))
    exact = float(problem.objective(domain.encode_records(codes[None, :]))[0])
    return CpSatResult(
        codes=codes,
        status=status_name,
        objective=exact,
        solver_objective=solver.objective_value / scale,
        bound=solver.best_objective_bound / scale,
        seconds=solver.wall_time,
        build_seconds=build_seconds,
        deterministic_time=response.deterministic_time,
        progress=tuple(callback.points) if callback is not None else (),
    )


def add_block_constraints(proto: object, domain: object, attributes: np.ndarray, var_of_bit: np.ndarray) -> None:
    """Exactly one bit per one-hot block of each listed attribute (binary attributes are one free bit)."""
    for attribute in attributes:
        if not domain.is_binary[attribute]:
            start = int(domain.offsets[attribute])
            block = var_of_bit[start : start + domain.attributes[attribute].size]
            proto.constraints.add().exactly_one.literals.extend(block.tolist())


def add_rule_constraints(
    proto: object,
    constraints: Constraints,
    combinations: np.ndarray,
    var_of_bit: np.ndarray,
    *,
    enforcement: list[int] | None = None,
) -> None:
    """Forbid each listed combination: ``Σ literal indicators <= k - 1`` for a combination of ``k`` literals.

    A one-hot literal's indicator is the sum of the bits of its codes (exactly one bit of the block is on); a
    binary attribute's literal is ``x`` (code 1), ``1 - x`` (code 0) or ``1`` (both), the constants written on a
    variable fixed to 1 so that every row has a variable. Every attribute of a listed combination must have
    variables (``var_of_bit >= 0``).

    Args:
        proto: The ``CpModelProto`` being written.
        constraints: The rules.
        combinations: Indices of the combinations to forbid.
        var_of_bit: Model variable of each bit (-1 for bits without one).
        enforcement: Optional enforcement literal per combination of ``constraints`` (indexed by combination),
            e.g. one assumption per rule for an infeasibility core.
    """
    domain = constraints.domain
    one = None
    for k in combinations:
        _, literals = constraints.combinations[int(k)]
        coefficient: dict[int, int] = {}
        for attribute, codes in literals:
            offset = int(domain.offsets[attribute])
            if domain.is_binary[attribute]:
                bit = int(var_of_bit[offset])
                if 0 in codes:  # 1 - x (or 1 when both codes are listed)
                    if one is None:
                        one = len(proto.variables)
                        proto.variables.add().domain.extend((1, 1))
                    coefficient[one] = coefficient.get(one, 0) + 1
                    if 1 not in codes:
                        coefficient[bit] = coefficient.get(bit, 0) - 1
                else:
                    coefficient[bit] = coefficient.get(bit, 0) + 1
            else:
                for variable in var_of_bit[offset + np.asarray(codes)].tolist():
                    coefficient[variable] = coefficient.get(variable, 0) + 1
        if min(coefficient, default=0) < 0:
            raise ValueError("a rule attribute has no model variable; make it a variable attribute")
        row = proto.constraints.add()
        if enforcement is not None:
            row.enforcement_literal.append(int(enforcement[int(k)]))
        row.linear.vars.extend(list(coefficient))
        row.linear.coeffs.extend(list(coefficient.values()))
        row.linear.domain.extend((-_INT_BOUND, len(literals) - 1))


def _with_free_from(hint: np.ndarray, constraints: Constraints, variables: np.ndarray) -> np.ndarray:
    """The hint's values on the variable attributes, the witness's elsewhere (a base whose fixed part is feasible)."""
    base = constraints.witness_codes.copy()
    base[variables] = np.asarray(hint, dtype=np.int64)[variables]
    return base


def _add_clause_constraints(
    proto: object, encoding: Encoding, literal_vars: list[list[int]], negated: list[bool], indicators: list[int]
) -> None:
    """Write the clause constraints of one encoding (``c`` for a conjunction, ``d`` for a negated one)."""
    constraints = proto.constraints
    for bits, is_negated, indicator in zip(literal_vars, negated, indicators, strict=True):
        off = [-v - 1 for v in bits]  # literals ¬x
        if encoding == "indicator":
            constraint = constraints.add()
            constraint.enforcement_literal.append(indicator)
            if is_negated:  # d → ∨ ¬x
                constraint.bool_or.literals.extend(off)
            else:  # c → ∧ x
                constraint.bool_and.literals.extend(bits)
        elif encoding == "clause":
            if is_negated:  # ¬d ∨ ¬x_a ∨ ¬x_b ∨ …
                constraints.add().bool_or.literals.extend([-indicator - 1, *off])
            else:  # ¬c ∨ x_b for every bit
                for v in bits:
                    constraints.add().bool_or.literals.extend((-indicator - 1, v))
        elif encoding == "linear":
            linear = constraints.add().linear
            k = len(bits)
            if is_negated:  # Σ(1 - x) ≥ d  ⇔  -Σx - d ≥ -k
                linear.vars.extend([*bits, indicator])
                linear.coeffs.extend([-1] * k + [-1])
                linear.domain.extend((-k, _INT_BOUND))
            else:  # Σx ≥ k·c  ⇔  Σx - k·c ≥ 0
                linear.vars.extend([*bits, indicator])
                linear.coeffs.extend([1] * k + [-k])
                linear.domain.extend((0, _INT_BOUND))
        else:  # reified: indicator ⇔ clause
            forward = constraints.add()
            forward.enforcement_literal.append(indicator)
            if is_negated:  # d → ∨ ¬x ; each ¬x → d
                forward.bool_or.literals.extend(off)
                for v in bits:
                    constraints.add().bool_or.literals.extend((v, indicator))
            else:  # c → ∧ x ; ∧ x → c
                forward.bool_and.literals.extend(bits)
                constraints.add().bool_or.literals.extend([*off, indicator])
