"""Profile DualQuery's hot paths on KDD Cup 99 with 2,000,000 random 3-way queries (pyinstrument).

Each hot path is timed (median of repeats, ``time.perf_counter``) and profiled once with pyinstrument
(``pip install -e ".[bench]"``); the flat self-time listing of every profile is written to
``<out dir>/profiles/<part>.txt`` and the timings to the JSON file:

* ``workload``: ``random_queries`` building the 2 M-query workload;
* ``answers_true``: query evaluation on the true data (``answer_workload``, 494,021 rows);
* ``evaluate_record``: query evaluation on one synthetic record (``Workload.evaluate_record``, every round);
* ``answers_records``: query evaluation on the T = 170 released records (``answer_records``, error report);
* ``sample`` / ``update``: drawing s = 1750 queries from ``Q^t`` (cumulative sum + ``searchsorted``) and
  the MW weight update, after 20 rounds of updates from real records;
* ``cpsat_build``: building the CP-SAT model (indicator encoding, complete hint) for a round's sampled
  clauses (s = 1750), and the same on Adult (s = 1000); the solve itself is capped at 0.05 s;
* ``dualquery_rounds``: 20 whole DualQuery rounds (η = 1.2, s = 1750, default oracle), to see the shares.

Usage::

    .venv/bin/python bench/profile_hot_paths.py --out bench/results/profiles.json

``--smoke``: 20,000 queries on the first 20,000 rows, 3 rounds (tests/bench/test_scale_smoke_fig23.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

try:  # optional: pip install -e ".[bench]"; without it only the timings are written
    from pyinstrument import Profiler
except ImportError:  # pragma: no cover - depends on the environment
    Profiler = None

sys.path.insert(0, str(Path(__file__).parent))

from engine_data import WORKLOAD_SEED, load_adult, load_kdd99
from scale_common import benchmark_grant, machine, peak_rss_gb, public_text

from dq_engine.data.answers import answer_records, answer_workload
from dq_engine.data.workload import random_queries
from dq_engine.mechanisms.dualquery import DualQueryConfig, RoundLoop
from dq_engine.oracle import OracleConfig, problem_from_samples
from dq_engine.oracle.cpsat import solve_cpsat
from dq_engine.privacy.mw import QueryDistribution
from dq_engine.privacy.rng import make_rng

ETA, SAMPLES = 1.2, 1750


def timed(function: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median wall seconds of ``repeats`` calls and the last call's result."""
    seconds, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), result


def profiled(name: str, function: Callable[[], object], directory: Path, *, calls: int = 1) -> None:
    """Profile ``calls`` calls of ``function`` and write pyinstrument's flat self-time listing and tree.

    Without pyinstrument the calls still run (later steps use their side effects, e.g. the rounds played).
    """
    if Profiler is None:
        for _ in range(calls):
            function()
        return
    profiler = Profiler(interval=0.0005)
    profiler.start()
    for _ in range(calls):
        function()
    profiler.stop()
    text = profiler.output_text(unicode=True, color=False, flat=True)
    tree = profiler.output_text(unicode=True, color=False, show_all=False)
    (directory / f"{name}.txt").write_text(public_text(f"# flat (self time)\n{text}\n# tree\n{tree}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/profiles.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    args = parser.parse_args()
    queries, rows, rounds, repeats = (20_000, 20_000, 3, 2) if args.smoke else (2_000_000, None, 20, 5)
    directory = args.out.parent / "profiles"
    directory.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(), "smoke": args.smoke,
              "profiler": "pyinstrument" if Profiler is not None else None, "queries": queries, "eta": ETA,
              "samples": SAMPLES, "seconds": {}}
    seconds = report["seconds"]

    data = load_kdd99(rows)
    build = lambda: random_queries(data.domain, 3, queries, make_rng(WORKLOAD_SEED))  # noqa: E731
    seconds["workload"], workload = timed(build, 1)
    profiled("workload", build, directory)
    seconds["answers_true"], truth = timed(lambda: answer_workload(data, workload), 3)
    profiled("answers_true", lambda: answer_workload(data, workload), directory)

    # a short real run supplies records and a trained distribution
    config = DualQueryConfig(eta=ETA, samples=SAMPLES, rounds=rounds, delta=1e-3, free_policy="zero",
                             track_error=False)
    rng = make_rng(0)
    loop = RoundLoop(data, workload, config, rng, truth, grant=benchmark_grant(), mechanism="dualquery")
    step = iter(range(1, rounds + 1))
    profiled("dualquery_rounds", lambda: loop.play(next(step), loop.distribution.sample(SAMPLES, rng)), directory,
             calls=rounds)
    seconds["dualquery_rounds_per_round"] = float(np.mean([d.round_seconds for d in loop.diagnostics]))
    seconds["dualquery_rounds_oracle_per_round"] = float(np.mean([d.oracle_seconds for d in loop.diagnostics]))

    bits = data.domain.encode_records(np.stack(loop.records))
    seconds["evaluate_record"], _ = timed(lambda: workload.evaluate_record(bits[-1]), repeats * 4)
    profiled("evaluate_record", lambda: workload.evaluate_record(bits[-1]), directory, calls=repeats * 4)
    many = np.repeat(bits, max(1, 170 // len(bits)), axis=0)[:170]
    seconds["answers_records_170"], _ = timed(lambda: answer_records(workload, many), 1)
    profiled("answers_records", lambda: answer_records(workload, many), directory)

    distribution = QueryDistribution(len(workload), eta=ETA)
    for record in bits:
        distribution.update(truth - workload.evaluate_record(record))
    payoff = truth - workload.evaluate_record(bits[-1])
    seconds["sample"], drawn = timed(lambda: distribution.sample(SAMPLES, rng), repeats * 8)
    profiled("sample", lambda: distribution.sample(SAMPLES, rng), directory, calls=repeats * 8)
    seconds["update"], _ = timed(lambda: distribution.update(payoff), repeats * 8)
    profiled("update", lambda: distribution.update(payoff), directory, calls=repeats * 8)

    capped = OracleConfig(time_limit=0.05)
    problem = problem_from_samples(workload, drawn)
    seconds["problem_from_samples"], _ = timed(lambda: problem_from_samples(workload, drawn), repeats)
    results = [solve_cpsat(problem, capped, hint=loop.records[-1], seed=1) for _ in range(repeats)]
    seconds["cpsat_build_kdd99"] = statistics.median(r.build_seconds for r in results)
    report["cpsat_kdd99_clauses"] = problem.n_clauses
    profiled("cpsat_build_kdd99", lambda: solve_cpsat(problem, capped, hint=loop.records[-1], seed=1), directory,
             calls=repeats)

    adult = load_adult()
    adult_workload = random_queries(adult.domain, 3, min(queries, 500_000), make_rng(WORKLOAD_SEED))
    adult_distribution = QueryDistribution(len(adult_workload), eta=2.0)
    adult_drawn = adult_distribution.sample(1000, rng)
    adult_problem = problem_from_samples(adult_workload, adult_drawn)
    adult_results = [solve_cpsat(adult_problem, capped, hint=None, seed=1) for _ in range(repeats)]
    seconds["cpsat_build_adult"] = statistics.median(r.build_seconds for r in adult_results)
    report["cpsat_adult_clauses"] = adult_problem.n_clauses
    profiled("cpsat_build_adult", lambda: solve_cpsat(adult_problem, capped, hint=None, seed=1), directory,
             calls=repeats)

    report["peak_rss_gb"] = peak_rss_gb()
    report["machine"]["load_average_end"] = os.getloadavg()
    args.out.write_text(json.dumps(report, indent=1, default=float))
    for name, value in seconds.items():
        print(f"{name:<36} {1000 * value:10.2f} ms")


if __name__ == "__main__":
    main()
