"""The optimised oracle internals agree with direct computation: incremental local-search bookkeeping, batch
moves, the four CP-SAT encodings, and the exact objective of every returned record.

Problems are random but seeded; domains are small enough for brute force. No timing is asserted.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dq_engine import Domain, OracleConfig, make_rng
from dq_engine.data.domain import Attribute
from dq_engine.data.workload import marginal_queries, random_queries
from dq_engine.oracle import BestResponseProblem, brute_force_best, problem_from_samples
from dq_engine.oracle.cpsat import ENCODINGS, solve_cpsat
from dq_engine.oracle.local_search import _State, local_search
from dq_engine.privacy.mw import QueryDistribution


def _mixed_domain(rng: np.random.Generator, attributes: int = 6) -> Domain:
    parts = []
    for i in range(attributes):
        if rng.random() < 0.4:
            parts.append(Attribute(name=f"a{i}", size=2, binary=True))
        else:
            parts.append(Attribute(name=f"a{i}", size=int(rng.integers(2, 5))))
    return Domain(tuple(parts))


def _problem(domain: Domain, seed: int, samples: int = 40, *, linear: bool = False) -> BestResponseProblem:
    """Signed 1-, 2- and 3-way queries sampled from a random MW distribution, as DualQuery builds them."""
    rng = make_rng(seed)
    sets = [s for k in (1, 2, 3) for s in itertools.combinations(range(len(domain)), k)]
    workload = marginal_queries(domain, sets)
    distribution = QueryDistribution(len(workload), eta=1.0)
    distribution.log_weight = rng.normal(0.0, 1.5, size=len(workload))
    coefficients = np.round(rng.normal(0.0, 1.0, size=domain.n_bits), 2) if linear else None
    return problem_from_samples(workload, distribution.sample(samples, rng), linear=coefficients)


def _exact(problem: BestResponseProblem, codes: np.ndarray) -> float:
    return float(problem.objective(problem.domain.encode_records(codes[None, :]))[0])


@pytest.mark.parametrize("seed", range(8))
def test_incremental_move_terms_match_a_full_recount_after_every_move(seed):
    rng = make_rng(seed)
    domain = _mixed_domain(rng)
    problem = _problem(domain, seed, linear=seed % 2 == 0)
    state = _State(problem)
    state.set_codes((rng.random(len(domain)) * domain.sizes).astype(np.int64))
    for _ in range(25):
        gain = state.gains()
        candidates = np.flatnonzero(np.isfinite(gain))
        bit = int(rng.choice(candidates))
        before = _exact(problem, state.codes)
        state.apply(np.array([bit]))
        assert _exact(problem, state.codes) - before == pytest.approx(gain[bit], abs=1e-9)
        fresh = _State(problem)
        fresh.set_codes(state.codes)
        np.testing.assert_array_equal(fresh.count, state.count)
        real = slice(0, domain.n_bits)  # the extra last slot only absorbs the padding of short clauses
        np.testing.assert_allclose(fresh.on_gain[real], state.on_gain[real], atol=1e-9)
        np.testing.assert_allclose(fresh.off_loss[real], state.off_loss[real], atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_batch_moves_touch_disjoint_clauses_and_their_gains_add_up(seed):
    rng = make_rng(seed)
    domain = Domain.binary(300)
    workload = random_queries(domain, 3, 20_000, rng)
    distribution = QueryDistribution(len(workload), eta=1.0)
    distribution.log_weight = rng.normal(0.0, 1.0, size=len(workload))
    problem = problem_from_samples(workload, distribution.sample(400, rng))
    state = _State(problem)
    state.set_codes((rng.random(len(domain)) < 0.3).astype(np.int64))
    gain = state.gains()
    moves = state.batch(gain)
    assert len(moves) > 1
    clause_sets = [set(state._clauses_of(np.array([b])).tolist()) for b in moves]
    for first, second in itertools.combinations(clause_sets, 2):
        assert not first & second
    before = _exact(problem, state.codes)
    state.apply(moves)
    assert _exact(problem, state.codes) - before == pytest.approx(gain[moves].sum(), abs=1e-9)


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_local_search_returns_a_valid_record_with_its_exact_objective(seed, batch):
    rng = make_rng(seed)
    domain = _mixed_domain(rng)
    problem = _problem(domain, seed, samples=80)
    optimum, _ = brute_force_best(problem)
    start = (rng.random(len(domain)) * domain.sizes).astype(np.int64)
    result = local_search(problem, [start], rng, max_restarts=50, time_limit=None, batch=batch)
    np.testing.assert_array_equal(domain.decode_records(domain.encode_records(result.codes[None, :]))[0],
                                  result.codes)
    assert result.objective == _exact(problem, result.codes)
    assert result.objective <= optimum


def test_local_search_always_finishes_its_first_start():
    rng = make_rng(3)
    domain = _mixed_domain(rng)
    problem = _problem(domain, 3)
    start = np.zeros(len(domain), dtype=np.int64)
    result = local_search(problem, [start], rng, max_restarts=1000, time_limit=1e-12)
    assert np.isfinite(result.objective)
    assert result.objective == _exact(problem, result.codes)
    assert result.restarts == 0 and result.hit_time_limit


def test_local_search_without_time_limit_is_reproducible():
    rng = make_rng(4)
    domain = _mixed_domain(rng)
    problem = _problem(domain, 4, samples=100)
    start = np.zeros(len(domain), dtype=np.int64)
    first = local_search(problem, [start], make_rng(9), max_restarts=40, time_limit=None)
    second = local_search(problem, [start], make_rng(9), max_restarts=40, time_limit=None)
    np.testing.assert_array_equal(first.codes, second.codes)
    assert (first.objective, first.steps, first.restarts) == (second.objective, second.steps, second.restarts)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("seed", range(4))
def test_every_encoding_reaches_the_brute_force_optimum(encoding, seed):
    rng = make_rng(seed)
    domain = _mixed_domain(rng)
    problem = _problem(domain, seed, samples=60, linear=seed % 2 == 1)
    optimum, _ = brute_force_best(problem)
    hint = (rng.random(len(domain)) * domain.sizes).astype(np.int64) if seed % 2 == 0 else None
    result = solve_cpsat(problem, OracleConfig(num_workers=1, time_limit=10.0), hint=hint, seed=1, encoding=encoding)
    assert result.status == "OPTIMAL"
    assert result.objective == pytest.approx(optimum, abs=1e-6)
    assert result.solver_objective == pytest.approx(optimum, abs=1e-6)
    assert result.objective == _exact(problem, result.codes)


def test_unknown_encoding_is_refused():
    problem = _problem(Domain.categorical({"a": 2, "b": 3}), 0)
    with pytest.raises(ValueError, match="encoding"):
        solve_cpsat(problem, OracleConfig(num_workers=1), hint=None, seed=0, encoding="cnf")
