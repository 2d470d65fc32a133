"""Is there a feasible record? CP-SAT finds one (the run's *witness*) or names the rules that leave none.

Every mechanism that honours :class:`~dq_engine.data.constraints.Constraints` needs one feasible record to start
from and fall back to (the oracle's fallback, the local search's starts, the free-attribute filler's repair,
MWEM's particles). :func:`with_witness` finds it once per run with CP-SAT over the attributes the rules name
(the others keep the preferred record's values, or code 0) and stores it in the constraints. When the rules
leave no feasible record, :func:`infeasible_rules` asks CP-SAT for a core: each rule's rows are enforced by an
assumption literal, and the assumptions CP-SAT reports as sufficient for infeasibility name the rules to fix.

Solves are deterministic (one worker, fixed seed): the witness depends only on the public rules and the
preferred record, never on the data.
"""

from __future__ import annotations

import numpy as np

from dq_engine.data.constraints import Constraints
from dq_engine.errors import InfeasibleConstraintsError

__all__ = ["feasible_record", "infeasible_rules", "with_witness"]

TIME_LIMIT_SECONDS = 30.0
"""Wall-clock cap of one satisfiability solve (rules over a few attributes are solved in milliseconds)."""


def _model(constraints: Constraints, *, assumptions: bool) -> tuple[object, np.ndarray, dict[str, int]]:
    """A CP-SAT model whose solutions are the rule attributes' values of the feasible records.

    Returns:
        The model, the variable of every bit of a rule attribute (-1 elsewhere), and each rule's assumption
        literal (empty unless ``assumptions``).
    """
    from ortools.sat.python import cp_model

    from dq_engine.oracle.cpsat import add_block_constraints, add_rule_constraints

    domain = constraints.domain
    model = cp_model.CpModel()
    proto = model.proto
    attributes = constraints.attributes
    is_variable = np.isin(domain.bit_attribute, attributes)
    var_of_bit = np.full(domain.n_bits, -1, dtype=np.int64)
    var_of_bit[is_variable] = np.arange(int(is_variable.sum()))
    for _ in range(int(is_variable.sum())):
        proto.variables.add().domain.extend((0, 1))
    add_block_constraints(proto, domain, attributes, var_of_bit)
    literal_of_rule: dict[str, int] = {}
    if assumptions:
        for name in constraints.rule_names:
            literal_of_rule[name] = len(proto.variables)
            proto.variables.add().domain.extend((0, 1))
        proto.assumptions.extend(literal_of_rule.values())
    add_rule_constraints(
        proto, constraints, np.arange(len(constraints)), var_of_bit,
        enforcement=[literal_of_rule[name] for name, _ in constraints.combinations] if assumptions else None,
    )
    return model, var_of_bit, literal_of_rule


def _solver(seed: int) -> object:
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed)
    solver.parameters.max_time_in_seconds = TIME_LIMIT_SECONDS
    return solver


def feasible_record(constraints: Constraints, *, prefer: np.ndarray | None = None) -> np.ndarray | None:
    """A feasible record, as close as CP-SAT finds to ``prefer`` on the rule attributes; None if there is none.

    Args:
        constraints: The rules.
        prefer: A record whose values to keep where the rules allow (default: code 0 everywhere).

    Raises:
        InfeasibleConstraintsError: CP-SAT neither found a record nor proved there is none within
            :data:`TIME_LIMIT_SECONDS`.
    """
    from ortools.sat.python import cp_model

    domain = constraints.domain
    base = np.zeros(len(domain), dtype=np.int64) if prefer is None else np.asarray(prefer, dtype=np.int64).copy()
    if len(constraints) == 0:
        return base
    model, var_of_bit, _ = _model(constraints, assumptions=False)
    # objective: keep as many rule attributes at the preferred value as the rules allow
    on = base[domain.bit_attribute] == domain.bit_value
    preferred = np.flatnonzero(on & (var_of_bit >= 0))
    binary_off = np.flatnonzero(~on & (var_of_bit >= 0) & domain.is_binary[domain.bit_attribute])
    proto = model.proto
    proto.objective.vars.extend([int(v) for v in var_of_bit[preferred]] + [int(v) for v in var_of_bit[binary_off]])
    proto.objective.coeffs.extend([-1] * len(preferred) + [1] * len(binary_off))
    solver = _solver(seed=0)
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise InfeasibleConstraintsError(
            f"CP-SAT found no feasible record within {TIME_LIMIT_SECONDS:g} s and did not prove there is none; "
            "simplify the rules"
        )
    solution = np.asarray(solver.response_proto.solution, dtype=np.int64)
    for attribute in constraints.attributes:
        bits = np.arange(domain.offsets[attribute], domain.offsets[attribute] + domain.attributes[attribute].n_bits)
        values = solution[var_of_bit[bits]]
        base[attribute] = int(values[0]) if domain.is_binary[attribute] else int(np.argmax(values))
    return base


def infeasible_rules(constraints: Constraints) -> tuple[str, ...]:
    """Rules that together leave no feasible record (a core CP-SAT reports); empty when a record exists."""
    from ortools.sat.python import cp_model

    if len(constraints) == 0:
        return ()
    model, _, literal_of_rule = _model(constraints, assumptions=True)
    solver = _solver(seed=0)
    status = solver.solve(model)
    if status != cp_model.INFEASIBLE:
        return ()
    core = set(solver.sufficient_assumptions_for_infeasibility())
    named = tuple(name for name, literal in literal_of_rule.items() if literal in core)
    return named or constraints.rule_names


def with_witness(constraints: Constraints, *, prefer: np.ndarray | None = None) -> Constraints:
    """``constraints`` with a feasible record attached (kept if one is already there).

    Raises:
        InfeasibleConstraintsError: No record satisfies the rules; the message names the rules of a core.
    """
    if constraints.witness is not None:
        return constraints
    record = feasible_record(constraints, prefer=prefer)
    if record is None:
        rules = ", ".join(repr(name) for name in infeasible_rules(constraints))
        raise InfeasibleConstraintsError(f"the rules {rules} together leave no feasible record; fix or remove one")
    return constraints.with_witness(record)
