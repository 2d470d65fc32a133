"""Shared fixtures of the constraint tests: a tiny census-like domain, its rules and a seeded table keeping them.

The table (age bucket, marital status, weeks worked, a binary flag, a free attribute) is drawn so that children
(age code 0) are never married, work no weeks and never have the flag, while adults vary freely: an unconstrained
synthesizer, which mixes the two groups, publishes records breaking the rules.
"""

from __future__ import annotations

import numpy as np
import pytest

from dq_engine import Dataset, Domain, make_rng
from dq_engine.data.constraints import Constraints
from dq_engine.data.domain import Attribute

CHILD, NEVER_MARRIED, NO_WEEKS = 0, 0, 0


@pytest.fixture(scope="session")
def census_domain() -> Domain:
    """age (4 buckets, 0 = child), marital (3), weeks (3 buckets, 0 = none), flag (binary), region (3)."""
    return Domain((
        Attribute(name="age", size=4), Attribute(name="marital", size=3), Attribute(name="weeks", size=3),
        Attribute(name="flag", size=2, binary=True), Attribute(name="region", size=3),
    ))


@pytest.fixture(scope="session")
def census_rules(census_domain: Domain) -> Constraints:
    """Children are never married, work no weeks and never have the flag."""
    return Constraints(domain=census_domain, combinations=(
        ("children are never married", ((0, (CHILD,)), (1, (1, 2)))),
        ("children do not work", ((0, (CHILD,)), (2, (1, 2)))),
        ("children have no flag", ((0, (CHILD,)), (3, (1,)))),
    ))


@pytest.fixture(scope="session")
def census_codes() -> np.ndarray:
    """600 seeded records keeping the rules (30 % children)."""
    rng = make_rng(5)
    n = 600
    age = rng.choice(4, n, p=[0.3, 0.2, 0.3, 0.2])
    child = age == CHILD
    marital = np.where(child, NEVER_MARRIED, rng.choice(3, n))
    weeks = np.where(child, NO_WEEKS, rng.choice(3, n, p=[0.1, 0.3, 0.6]))
    flag = np.where(child, 0, rng.integers(0, 2, n))
    region = rng.choice(3, n)
    return np.stack([age, marital, weeks, flag, region], axis=1)


@pytest.fixture(scope="session")
def census_data(census_domain: Domain, census_codes: np.ndarray) -> Dataset:
    """The seeded table as a dataset."""
    return Dataset.from_codes(census_domain, census_codes)


def all_records(domain: Domain) -> np.ndarray:
    """Every record of a small domain, shape (prod(sizes), m)."""
    grids = np.meshgrid(*[np.arange(s) for s in domain.sizes], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)
