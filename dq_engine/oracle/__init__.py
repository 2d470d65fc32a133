"""Best-response oracles for the data player (CP-SAT, numpy local search, portfolio)."""

from dq_engine.oracle.brute_force import brute_force_best
from dq_engine.oracle.config import OracleConfig
from dq_engine.oracle.free_attributes import (
    FreeAttributeFiller,
    FreeNoise,
    FreePolicy,
    gaussian_one_way_marginals,
    noisy_one_way_marginals,
)
from dq_engine.oracle.oracle import BestResponse, best_response
from dq_engine.oracle.problem import BestResponseProblem, problem_from_samples

__all__ = [
    "BestResponse",
    "BestResponseProblem",
    "FreeAttributeFiller",
    "FreeNoise",
    "FreePolicy",
    "OracleConfig",
    "best_response",
    "brute_force_best",
    "gaussian_one_way_marginals",
    "noisy_one_way_marginals",
    "problem_from_samples",
]
