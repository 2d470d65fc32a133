"""Does the time of FEM's query selection depend on how many true answers are non-zero? (issue 27, "Timing").

4,000 queries (one complete 2-way marginal, 40 × 100 cells); the private data put ``n = 8,000`` records on
``A`` distinct cells, so ``A`` of the 4,000 true answers are non-zero (``A`` = 1,000, 1,040, 3,900). For each
``A``:

(a) **a FEM run** (engine ``fem``, T = 20 rounds by default, s = 4 samples, ε₀ = 0.003 as in Vietri et al. 2020's
    Table 3, deterministic oracle) with every ``SparseSignedSelector.select`` call timed, and the run's wall time;
(b) **the selector alone**: 5,000 draws against the estimates of one FEM round (the ``s`` records' cells), with
    the generator's calls counted (``integers`` calls per draw: the old zero-block rejection loop made one per
    iteration) and each draw timed.

Run it once per code version and label the result; the file keeps one entry per label::

    .venv/bin/python bench/fem_selector_timing.py --label after --out bench/results/fem_selector_timing.json
    PYTHONPATH=<checkout of trust-grant> .venv/bin/python bench/fem_selector_timing.py --label before ...
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from dq_engine import Dataset, Domain, make_rng
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import marginal_queries
from dq_engine.mechanisms.fem import FEMConfig, fem
from dq_engine.oracle import OracleConfig
from dq_engine.privacy import exponential_mechanism
from dq_engine.privacy.grant import PrivacyGrant

ACTIVE = (1_000, 1_040, 3_900)
N_RECORDS = 8_000
DOMAIN = Domain.categorical({"a": 40, "b": 100})


def _data(active: int, seed: int) -> Dataset:
    """``N_RECORDS`` records on exactly ``active`` distinct cells of the 40 × 100 marginal."""
    rng = make_rng(seed)
    cells = rng.choice(4_000, size=active, replace=False)
    chosen = np.concatenate([cells, rng.choice(cells, size=N_RECORDS - active)])
    return Dataset.from_codes(DOMAIN, np.column_stack([chosen // 100, chosen % 100]))


class _CountingGenerator:
    """A generator that counts its method calls (the selector only calls ``integers``)."""

    def __init__(self, generator: np.random.Generator) -> None:
        self._generator = generator
        self.calls = 0

    def __getattr__(self, name: str):
        method = getattr(self._generator, name)

        def call(*args, **kwargs):
            self.calls += 1
            return method(*args, **kwargs)

        return call


def _summary(seconds: list[float]) -> dict[str, float]:
    return {
        "draws": len(seconds),
        "mean_us": 1e6 * statistics.fmean(seconds),
        "median_us": 1e6 * statistics.median(seconds),
        "p95_us": 1e6 * float(np.percentile(seconds, 95)),
    }


def fem_run(active: int, *, rounds: int) -> dict[str, object]:
    """(a): one FEM run with every selection timed."""
    data = _data(active, seed=active)
    workload = marginal_queries(DOMAIN, [(0, 1)])
    timed: list[float] = []
    original = exponential_mechanism.SparseSignedSelector.select

    def select(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            timed.append(time.perf_counter() - began)

    exponential_mechanism.SparseSignedSelector.select = select
    try:
        config = FEMConfig(epsilon_0=0.003, noise_scale=2.0, samples=4, rounds=rounds, track_error=False,
                           oracle=OracleConfig(deterministic=True))
        grant = PrivacyGrant(epsilon=100.0, delta=1e-6, purpose="benchmark on synthetic data (bench/fem_selector)")
        began = time.perf_counter()
        fem(data, workload, config, grant=grant, rng=make_rng(1))
        run_seconds = time.perf_counter() - began
    finally:
        exponential_mechanism.SparseSignedSelector.select = original
    return {"run_seconds": run_seconds, "select": _summary(timed), "select_share": sum(timed) / run_seconds}


def selector_alone(active: int, *, draws: int) -> dict[str, object]:
    """(b): the selector against one round's sparse estimates, generator calls counted."""
    data = _data(active, seed=active)
    workload = marginal_queries(DOMAIN, [(0, 1)])
    from dq_engine.data.answers import answer_workload

    selector = exponential_mechanism.SparseSignedSelector(answer_workload(data, workload))
    records = make_rng(2).integers(0, [40, 100], size=(4, 2))  # one round's s = 4 synthetic records
    positions, values = MarginalIndex(workload).sparse_answers(records)
    rng = _CountingGenerator(make_rng(3))
    seconds, calls = [], []
    for _ in range(draws):
        before = rng.calls
        began = time.perf_counter()
        selector.select(positions, values, epsilon=0.003, n=data.n, rng=rng)
        seconds.append(time.perf_counter() - began)
        calls.append(rng.calls - before)
    return {"rng_calls_per_draw_mean": statistics.fmean(calls), "rng_calls_per_draw_max": max(calls),
            **_summary(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="which code this is (e.g. before, after)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/fem_selector_timing.json"))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--draws", type=int, default=5_000)
    arguments = parser.parse_args()
    result = {
        "machine": platform.platform(),
        "n_queries": 4_000,
        "n_records": N_RECORDS,
        "by_active": {
            str(active): {"fem_run": fem_run(active, rounds=arguments.rounds),
                          "selector": selector_alone(active, draws=arguments.draws)}
            for active in ACTIVE
        },
    }
    existing = json.loads(arguments.out.read_text()) if arguments.out.exists() else {}
    existing[arguments.label] = result
    arguments.out.write_text(json.dumps(existing, indent=2) + "\n")
    print(json.dumps({arguments.label: result}, indent=2))


if __name__ == "__main__":
    main()
