"""The best-response oracle over feasible records only: CP-SAT against brute force, local search, filler."""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import make_rng
from dq_engine.oracle import FreeAttributeFiller, OracleConfig, best_response, brute_force_best
from dq_engine.oracle.cpsat import solve_cpsat
from dq_engine.oracle.feasible import with_witness
from dq_engine.oracle.local_search import _State, local_search
from dq_engine.oracle.problem import BestResponseProblem

CPSAT = OracleConfig(kind="cpsat", deterministic=True, num_workers=1, deterministic_time_limit=2.0)


def _problem(domain, rng, *, constraints=None, clauses=12, linear=False) -> BestResponseProblem:
    """Random positive 2-way conjunctions, each including a bit that breaks a rule when paired with a child."""
    rows = []
    for _ in range(clauses):
        attributes = rng.choice(len(domain), size=2, replace=False)
        rows.append([int(domain.bits_of(a, int(rng.integers(1, domain.sizes[a])) if domain.is_binary[a]
                                        else int(rng.integers(0, domain.sizes[a])))) for a in attributes])
    rows += [[int(domain.offsets[0]), int(domain.offsets[1]) + 2]] * 3  # "child and married": heavy, infeasible
    bits = np.array(rows, dtype=np.int64)
    return BestResponseProblem(
        domain=domain, clause_bits=bits, clause_negated=rng.random(len(bits)) < 0.3,
        clause_weight=rng.integers(1, 5, len(bits)).astype(np.int64),
        linear=rng.normal(0, 0.5, domain.n_bits) if linear else None, constraints=constraints,
    )


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("linear", [False, True])
def test_cpsat_optimum_equals_brute_force_over_feasible_records(census_domain, census_rules, seed, linear):
    constraints = with_witness(census_rules)
    rng = make_rng(seed)
    free_problem = _problem(census_domain, rng, linear=linear)
    problem = BestResponseProblem(
        domain=census_domain, clause_bits=free_problem.clause_bits, clause_negated=free_problem.clause_negated,
        clause_weight=free_problem.clause_weight, linear=free_problem.linear, constraints=constraints,
    )
    best, _ = brute_force_best(problem)
    result = solve_cpsat(problem, CPSAT, hint=None, seed=seed)
    assert result.status == "OPTIMAL"
    assert census_rules.feasible(result.codes)
    assert result.objective == pytest.approx(best, abs=1e-3 * (1 + linear * census_domain.n_bits))
    # the rules matter: without them the optimum is a record breaking them (the heavy clause "child and married"),
    # except where the random clauses happen to favour a feasible record (then the two optima coincide)
    unconstrained_best, record = brute_force_best(free_problem)
    assert unconstrained_best >= best
    if not linear:
        assert unconstrained_best > best and not census_rules.feasible(record)


def test_rule_section_is_a_model_row_per_combination(census_domain, census_rules):
    constraints = with_witness(census_rules)
    problem = _problem(census_domain, make_rng(0), constraints=constraints)
    unconstrained = _problem(census_domain, make_rng(0))
    assert set(problem.variable_attributes.tolist()) >= set(problem.touched_attributes.tolist()) | {0, 1, 2, 3}
    assert unconstrained.variable_attributes.tolist() == unconstrained.touched_attributes.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_local_search_visits_only_feasible_records(census_domain, census_rules, seed, monkeypatch):
    constraints = with_witness(census_rules)
    visited: list[np.ndarray] = []
    original_set, original_apply = _State.set_codes, _State.apply

    def set_codes(state, codes):
        original_set(state, codes)
        visited.append(state.codes.copy())

    def apply(state, moves):
        original_apply(state, moves)
        visited.append(state.codes.copy())

    monkeypatch.setattr(_State, "set_codes", set_codes)
    monkeypatch.setattr(_State, "apply", apply)
    rng = make_rng(seed)
    problem = _problem(census_domain, rng, constraints=constraints, clauses=20)
    infeasible_start = np.array([0, 2, 2, 1, 0])
    result = local_search(problem, [infeasible_start], rng, max_restarts=30, time_limit=None, batch=seed % 2 == 1)
    assert len(visited) > 30
    assert census_rules.feasible(np.array(visited)).all()
    assert census_rules.feasible(result.codes)
    assert result.objective <= brute_force_best(problem)[0] + 1e-9
    # without the rules the same instrumented search visits records that break them
    visited.clear()
    free = _problem(census_domain, make_rng(seed), clauses=20)
    local_search(free, [infeasible_start], make_rng(seed), max_restarts=30, time_limit=None, batch=seed % 2 == 1)
    assert not census_rules.feasible(np.array(visited)).all()


@pytest.mark.parametrize("kind", ["portfolio", "local", "cpsat"])
def test_every_oracle_kind_returns_feasible_records(census_domain, census_rules, kind):
    constraints = with_witness(census_rules)
    config = OracleConfig(kind=kind, deterministic=True, num_workers=1, deterministic_time_limit=0.5)
    for seed in range(5):
        rng = make_rng(seed)
        problem = _problem(census_domain, rng, constraints=constraints)
        previous = np.array([0, 1, 1, 1, 1])  # an infeasible previous record is repaired, never returned
        response = best_response(problem, config, rng, previous=previous if seed % 2 else None)
        assert census_rules.feasible(response.codes)


def test_problem_without_witness_is_refused(census_domain, census_rules):
    with pytest.raises(ValueError, match="need a witness"):
        _problem(census_domain, make_rng(0), constraints=census_rules)


@pytest.mark.parametrize("policy", ["zero", "random"])
def test_free_attribute_filler_keeps_records_feasible(census_domain, census_rules, policy):
    constraints = with_witness(census_rules)
    rng = make_rng(4)
    child = np.array([0, 0, 0, 0, 0])  # the oracle's feasible record
    free = np.array([1, 2, 3, 4])
    filled = np.stack([
        FreeAttributeFiller(census_domain, policy, constraints=constraints).fill(child, free, rng) for _ in range(300)
    ])
    assert census_rules.feasible(filled).all()
    unconstrained = np.stack([FreeAttributeFiller(census_domain, "random").fill(child, free, rng) for _ in range(300)])
    assert not census_rules.feasible(unconstrained).all()
    if policy == "random":  # the rule-free attribute (region) still varies: rejection does not collapse the draw
        assert len(np.unique(filled[:, 4])) == 3


def test_filler_draws_feasible_values_from_the_conditional_distribution(census_domain, census_rules):
    """An adult's free marital status stays uniform; a child's flag is always 0 (the only feasible value)."""
    constraints = with_witness(census_rules)
    rng = make_rng(12)
    filler = FreeAttributeFiller(census_domain, "random", constraints=constraints)
    adult = np.array([2, 0, 1, 0, 0])
    draws = np.stack([filler.fill(adult, np.array([1, 3]), rng) for _ in range(3000)])
    shares = np.bincount(draws[:, 1], minlength=3) / len(draws)
    assert np.allclose(shares, 1 / 3, atol=0.04)  # 3000 draws: sd 0.0086 per share, 0.04 is > 4 sd
    child = np.array([0, 0, 0, 0, 0])
    assert (np.stack([filler.fill(child, np.array([3]), rng) for _ in range(50)])[:, 3] == 0).all()
