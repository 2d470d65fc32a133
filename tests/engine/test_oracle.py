"""The best-response oracle reaches the brute-force optimum on small domains (objective values, not records).

Problems are built exactly as DualQuery builds them: signed queries sampled from a multiplicative-weights
distribution with random log-weights (so duplicates and query/negation pairs occur), merged into weighted
clauses by ``problem_from_samples``. Domains have at most 14 bits, so brute force enumerates every record.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dq_engine import Domain, OracleConfig, make_rng
from dq_engine.data.workload import Workload, marginal_queries
from dq_engine.errors import UniverseTooLargeError
from dq_engine.oracle import BestResponseProblem, best_response, brute_force_best, problem_from_samples
from dq_engine.privacy.mw import QueryDistribution, SampledQueries

SEEDS = range(6)


def _workload(domain: Domain) -> Workload:
    """Every 1-, 2- and 3-way marginal query of the domain."""
    sets = [s for k in (1, 2, 3) for s in itertools.combinations(range(len(domain)), k)]
    return marginal_queries(domain, sets)


def _sampled_problem(
    domain: Domain, seed: int, samples: int = 60
) -> tuple[Workload, SampledQueries, BestResponseProblem]:
    workload = _workload(domain)
    rng = make_rng(seed)
    distribution = QueryDistribution(len(workload), eta=1.0)
    distribution.log_weight = rng.normal(0.0, 1.5, size=len(workload))
    sampled = distribution.sample(samples, rng)
    return workload, sampled, problem_from_samples(workload, sampled)


def _assert_valid_record(domain: Domain, codes: np.ndarray) -> None:
    assert codes.shape == (len(domain),)
    assert np.all((codes >= 0) & (codes < domain.sizes))
    bits = domain.encode_records(codes[None, :])
    np.testing.assert_array_equal(domain.decode_records(bits)[0], codes)  # one value per block


def _satisfied_samples(workload: Workload, sampled: SampledQueries, domain: Domain, codes: np.ndarray) -> int:
    """Direct count of sampled signed queries (with multiplicity) a record satisfies."""
    values = workload.evaluate_record(domain.encode_records(codes[None, :])[0])[sampled.index]
    return int(np.where(sampled.negated, ~values, values).sum())


@pytest.fixture(params=["categorical", "binary", "mixed"])
def small_domain(request, categorical_domain, binary_domain, mixed_domain) -> Domain:
    return {"categorical": categorical_domain, "binary": binary_domain, "mixed": mixed_domain}[request.param]


@pytest.mark.parametrize("seed", SEEDS)
def test_problem_objective_counts_satisfied_sampled_queries(small_domain, seed):
    workload, sampled, problem = _sampled_problem(small_domain, seed)
    assert problem.n_clauses < len(sampled)  # duplicates were merged into weights
    assert problem.clause_weight.sum() == len(sampled)
    rng = make_rng(100 + seed)
    for _ in range(5):
        codes = (rng.random(len(small_domain)) * small_domain.sizes).astype(np.int64)
        bits = small_domain.encode_records(codes[None, :])[0]
        assert problem.objective(bits) == _satisfied_samples(workload, sampled, small_domain, codes)


@pytest.mark.parametrize("samples", [15, 200])
@pytest.mark.parametrize("kind", ["cpsat", "portfolio"])
@pytest.mark.parametrize("seed", SEEDS)
def test_exact_oracles_reach_the_brute_force_optimum(small_domain, kind, seed, samples):
    _, _, problem = _sampled_problem(small_domain, seed, samples)
    optimum, _ = brute_force_best(problem)
    config = OracleConfig(kind=kind, num_workers=1, time_limit=10.0)
    response = best_response(problem, config, make_rng(seed))
    assert response.objective == optimum
    assert response.source in ({"cpsat", "local"} if kind == "portfolio" else {"cpsat"})
    assert response.status == "OPTIMAL"
    assert response.bound == pytest.approx(optimum)
    _assert_valid_record(small_domain, response.codes)
    bits = small_domain.encode_records(response.codes[None, :])[0]
    assert problem.objective(bits) == response.objective


@pytest.mark.parametrize("seed", SEEDS)
def test_local_search_returns_a_valid_record_never_above_the_optimum(small_domain, seed):
    _, _, problem = _sampled_problem(small_domain, seed)
    optimum, _ = brute_force_best(problem)
    response = best_response(problem, OracleConfig(kind="local", deterministic=True), make_rng(seed))
    assert response.source == "local" and response.status == "NOT_RUN"
    assert response.objective <= optimum
    _assert_valid_record(small_domain, response.codes)
    bits = small_domain.encode_records(response.codes[None, :])[0]
    assert problem.objective(bits) == response.objective


def test_cpsat_on_an_empty_problem_falls_back_to_a_valid_record(categorical_domain):
    workload = _workload(categorical_domain)
    problem = problem_from_samples(workload, SampledQueries(np.array([], dtype=np.int64), np.array([], dtype=bool)))
    assert problem.n_clauses == 0
    response = best_response(problem, OracleConfig(kind="cpsat", num_workers=1), make_rng(0))
    assert response.source == "fallback"
    assert response.status == "NOT_RUN"
    assert response.objective == 0.0
    _assert_valid_record(categorical_domain, response.codes)


def test_fallback_prefers_the_previous_record(categorical_domain):
    workload = _workload(categorical_domain)
    problem = problem_from_samples(workload, SampledQueries(np.array([], dtype=np.int64), np.array([], dtype=bool)))
    previous = np.array([2, 0, 3, 1])
    response = best_response(problem, OracleConfig(kind="cpsat", num_workers=1), make_rng(0), previous=previous)
    assert response.source == "fallback"
    np.testing.assert_array_equal(response.codes, previous)


def test_brute_force_refuses_a_universe_too_large_to_enumerate():
    domain = Domain.binary(17)
    problem = BestResponseProblem(
        domain=domain, clause_bits=np.array([[0, 1]]), clause_negated=np.array([False]), clause_weight=np.array([1])
    )
    with pytest.raises(UniverseTooLargeError, match="brute force needs <= 65536 records"):
        brute_force_best(problem)
