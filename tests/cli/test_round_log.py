"""What the run log and the progress bar say about a round (dqrelease.runtime.progress.describe_round)."""

from __future__ import annotations

import numpy as np

from dq_engine import Dataset, Domain, make_rng, random_marginals
from dq_engine.fit.mwem import MWEMConfig, calibrate_mwem, mwem
from dqrelease.runtime.progress import describe_round
from tests.budgets import grant_for_tests


def test_mwem_particle_rounds_are_described_as_measurements_not_as_an_oracle_that_did_not_run():
    domain = Domain.categorical({"a": 3, "b": 4, "c": 2, "d": 5})
    rng = make_rng(0)
    data = Dataset.from_codes(domain, np.column_stack([rng.integers(0, a.size, 300) for a in domain.attributes]))
    workload = random_marginals(domain, 2, 4, make_rng(1))
    budget = calibrate_mwem(epsilon=1.0, delta=1e-9, rounds=3, mode="tight", measure_noise="gaussian",
                            support_share=0.1)
    config = MWEMConfig(rounds=3, measure_noise="gaussian", measure="marginal", support="sampled",
                        support_size=500, support_moves=1, delta=1e-9, **budget)
    rounds = []
    mwem(data, workload, config, grant=grant_for_tests(), rng=make_rng(2),
         progress=lambda diagnostics: rounds.append(diagnostics.public()))

    lines = [describe_round(public) for public in rounds]
    assert len(lines) == 3
    for public, line in zip(rounds, lines, strict=True):
        marginal = int(public["extra"]["marginal"])
        assert line == f"measured marginal {marginal} ({public['distinct']:,} cells)"
        assert "NOT_RUN" not in line and "oracle" not in line


def test_oracle_rounds_name_the_source_and_the_solver_status_only_when_the_solver_ran():
    assert describe_round({"source": "cpsat", "status": "OPTIMAL"}) == "oracle cpsat (OPTIMAL)"
    assert describe_round({"source": "fallback", "status": "UNKNOWN"}) == "oracle fallback (UNKNOWN)"
    assert describe_round({"source": "local", "status": "NOT_RUN"}) == "oracle local"
