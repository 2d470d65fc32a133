"""Small shared fixtures of the engine tests: tiny public domains, seeded toy datasets, the Adult table."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dq_engine import Dataset, Domain, OracleConfig, make_rng
from dq_engine.data.domain import Attribute


@pytest.fixture
def categorical_domain() -> Domain:
    """Four categorical attributes of sizes 3, 3, 4, 4 (14 bits, 144 records)."""
    return Domain.categorical({"a": 3, "b": 3, "c": 4, "d": 4})


@pytest.fixture
def binary_domain() -> Domain:
    """Twelve natively binary attributes (12 bits, 4,096 records)."""
    return Domain.binary(12)


@pytest.fixture
def mixed_domain() -> Domain:
    """Two categorical attributes (sizes 3 and 4) and five binary ones (12 bits, 384 records)."""
    flags = [Attribute(name=f"flag{i}", size=2, binary=True) for i in range(5)]
    return Domain((Attribute(name="colour", size=3), Attribute(name="grade", size=4), *flags))


@pytest.fixture
def toy_data(categorical_domain: Domain) -> Dataset:
    """400 seeded random records over ``categorical_domain``, skewed so answers are not all alike."""
    rng = make_rng(11)
    columns = [rng.choice(size, size=400, p=np.arange(1, size + 1) / np.arange(1, size + 1).sum())
               for size in categorical_domain.sizes]
    return Dataset.from_codes(categorical_domain, np.stack(columns, axis=1))


@pytest.fixture
def deterministic_oracle() -> OracleConfig:
    """Reproducible oracle: CP-SAT on a deterministic time budget, one worker."""
    return OracleConfig(kind="portfolio", deterministic=True, num_workers=1, deterministic_time_limit=0.5)


@pytest.fixture(scope="session")
def adult_table(require_shared_data: Callable[[str], Path]) -> tuple[Domain, pd.DataFrame]:
    """The private-pgm Adult table (48,842 rows, 14 integer-coded columns) and its public domain (shared data)."""
    sizes = json.loads(require_shared_data("adult_pgm/adult-domain.json").read_text())
    frame = pd.read_csv(require_shared_data("adult_pgm/adult.csv"))
    return Domain.categorical(sizes), frame[list(sizes)]
