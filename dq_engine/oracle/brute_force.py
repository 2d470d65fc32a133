"""Exhaustive best response over every valid record (tests and tiny domains only)."""

from __future__ import annotations

import itertools

import numpy as np

from dq_engine.errors import UniverseTooLargeError
from dq_engine.oracle.problem import BestResponseProblem

__all__ = ["brute_force_best"]

MAX_BRUTE_FORCE_RECORDS = 1 << 16


def brute_force_best(problem: BestResponseProblem) -> tuple[float, np.ndarray]:
    """Best objective value and one maximising record (value codes) by enumeration.

    With ``problem.constraints`` only feasible records are candidates.

    Raises:
        UniverseTooLargeError: If the domain has more than 65,536 records.
    """
    domain = problem.domain
    size = int(np.prod(domain.sizes))
    if size > MAX_BRUTE_FORCE_RECORDS:
        raise UniverseTooLargeError(f"brute force needs <= {MAX_BRUTE_FORCE_RECORDS} records, domain has {size}")
    codes = np.array(list(itertools.product(*[range(s) for s in domain.sizes])), dtype=np.int64)
    values = problem.objective(domain.encode_records(codes))
    if problem.constraints is not None:
        values = np.where(problem.constraints.feasible(codes), values, -np.inf)
    best = int(np.argmax(values))
    return float(values[best]), codes[best]
