"""Fixtures of the mechanism tests: small slices of real Adult data and seeded workloads.

The Adult files are shared data (``dqrelease.inputs.data_home``); tests using these fixtures are skipped without them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dq_engine import Dataset, Domain, Workload, answer_workload, make_rng, random_marginals

ADULT_DOMAIN = "adult_pgm/adult-domain.json"
ADULT_CSV = "adult_pgm/adult.csv"
MCSHERRY_ADULT = "adult_dualquery/mcsherry-adult.txt"
"""Files of the shared data directory."""

SLICE = ("workclass", "education-num", "marital-status", "relationship", "race", "sex")
"""Six small Adult attributes: 9 x 16 x 7 x 6 x 5 x 2 = 60,480 records (brute force and MWEM fit)."""


@dataclass(frozen=True)
class Problem:
    """A private dataset, a workload over it and the workload's exact answers."""

    data: Dataset
    workload: Workload
    truth: np.ndarray


def adult_columns(names: tuple[str, ...], require_shared_data: Callable[[str], Path]) -> Dataset:
    """The private-pgm Adult table (48,842 rows) restricted to ``names``."""
    sizes = json.loads(require_shared_data(ADULT_DOMAIN).read_text())
    frame = pd.read_csv(require_shared_data(ADULT_CSV), usecols=list(names))
    domain = Domain.categorical({name: sizes[name] for name in names})
    return Dataset.from_codes(domain, frame[list(names)].to_numpy())


@pytest.fixture(scope="session")
def adult_slice(require_shared_data: Callable[[str], Path]) -> Problem:
    """Six Adult attributes, all 48,842 rows, 8 seeded random 3-way marginals (all their cells)."""
    data = adult_columns(SLICE, require_shared_data)
    workload = random_marginals(data.domain, 3, 8, make_rng(2024))
    return Problem(data, workload, answer_workload(data, workload))


@pytest.fixture(scope="session")
def adult_tiny(require_shared_data: Callable[[str], Path]) -> Problem:
    """Four small Adult attributes (7 x 6 x 5 x 2 = 420 records), all their 3-way marginals."""
    from dq_engine import all_kway_marginals

    data = adult_columns(("marital-status", "relationship", "race", "sex"), require_shared_data)
    workload = all_kway_marginals(data.domain, 3)
    return Problem(data, workload, answer_workload(data, workload))


@pytest.fixture(scope="session")
def mcsherry_adult_17(require_shared_data: Callable[[str], Path]) -> Dataset:
    """The MWEM paper's 27-bit Adult histogram (30,163 rows), its last 17 bits as 2-valued attributes.

    The bit subset is fixed in advance (the last 17 of 27), not chosen by looking at the data.
    """
    text = require_shared_data(MCSHERRY_ADULT).read_text()
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    bits = np.array([[int(c) for c in row[0]] for row in rows], dtype=np.int64)
    counts = np.array([int(row[1]) for row in rows], dtype=np.int64)
    codes = np.repeat(bits[:, 10:], counts, axis=0)
    domain = Domain.categorical({f"bit{i}": 2 for i in range(10, 27)})
    return Dataset.from_codes(domain, codes)
