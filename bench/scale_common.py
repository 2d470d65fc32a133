"""Helpers shared by the scale benchmarks (machine description, plots, DualQuery runs with phase timings)."""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np

from dq_engine.data.answers import answer_records, error_summary, uniform_answers
from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload
from dq_engine.evaluation.baselines import zeros_answers
from dq_engine.mechanisms.dualquery import DualQueryConfig, RoundLoop
from dq_engine.privacy.grant import PrivacyGrant
from dq_engine.privacy.rng import make_rng

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""

PACKAGES = ("numpy", "scipy", "pandas", "ortools", "opendp", "duckdb", "great_expectations", "prefect",
            "pyinstrument", "matplotlib")


BENCHMARK_EPSILON = 1e4
"""A benchmark's stated budget: it runs on public data sets and measures the mechanisms' own costs, far below."""


def benchmark_grant(purpose: str = "benchmark on a public data set") -> PrivacyGrant:
    """The engine grant a benchmark spends its runs on (``dq_engine.privacy.grant``; tight accounting)."""
    return PrivacyGrant(epsilon=BENCHMARK_EPSILON, delta=1e-3, purpose=purpose)


def study_grant(plan, *, run_id: str = "bench-run"):
    """A ledger-charged grant of a registry ``plan`` (``dqrelease.ledger.grants.grant_for_study``).

    The charge goes to a throw-away ledger in a temporary folder with a :data:`BENCHMARK_EPSILON` cap.
    """
    import tempfile

    from dqrelease.ledger import Ledger
    from dqrelease.ledger.grants import grant_for_study

    folder = Path(tempfile.mkdtemp(prefix="dqrelease-study-"))
    ledger = Ledger(folder / "ledger.duckdb")
    ledger.ensure_cap("study", epsilon=BENCHMARK_EPSILON, delta=0.5)
    return grant_for_study(plan, ledger=ledger, dataset_id="study", run_id=run_id)


def machine() -> dict:
    """Cores, memory, Python and package versions, load average (recorded in every result file)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cores": os.cpu_count(), "memory_gb": round(pages / 2**30, 1), "python": platform.python_version(),
            "platform": platform.platform(), "packages": versions, "load_average_start": os.getloadavg()}


def public_text(text: str) -> str:
    """``text`` with this machine's paths made portable, for result files committed to the repo.

    The repository's root becomes ``.`` and the shared data directory ``$DQRELEASE_DATA``
    (``dqrelease.inputs.data_home``), so a recorded command or config names no folder of the machine it ran on.
    """
    from dqrelease.inputs.data_home import shared_data_dir

    data = shared_data_dir()
    if data is not None:
        text = text.replace(str(data), "$DQRELEASE_DATA")
    return text.replace(str(ROOT), ".")


def peak_rss_gb() -> float:
    """Peak resident set size of this process so far (Linux ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def save_plot(path: Path, draw: Callable, *, size: tuple[float, float] = (7.0, 4.0)) -> None:
    """Draw with ``draw(figure)`` on a matplotlib Figure (no pyplot state) and save it as a PNG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size)
    draw(figure)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def run_dualquery_timed(data: Dataset, workload: Workload, true_answers: np.ndarray, config: DualQueryConfig,
                        *, seed: int) -> tuple[np.ndarray, dict]:
    """DualQuery (Algorithm 2) through ``RoundLoop`` with every phase timed.

    The loop is the one of :func:`dq_engine.mechanisms.dualquery.dualquery` (sample ``s`` queries from ``Q^t``, then
    :meth:`RoundLoop.play`), so the records are those ``dualquery`` returns for the same generator. Returns
    the records' codes and the summed phase times: sampling, oracle (best-response call), MW update
    (evaluate the record on every query + weight update), and the rest of each round (merging the samples
    into clauses, free attributes, error tracking).
    """
    rng = make_rng(seed)
    began = time.perf_counter()
    loop = RoundLoop(data, workload, config, rng, true_answers, grant=benchmark_grant(), mechanism="dualquery")
    setup = time.perf_counter() - began
    for t in range(1, config.rounds + 1):
        t0 = time.perf_counter()
        drawn = loop.distribution.sample(config.samples, rng)
        loop.play(t, drawn, sample_seconds=time.perf_counter() - t0)
    diagnostics = loop.diagnostics
    oracle = np.array([d.oracle_seconds for d in diagnostics])
    phases = {
        "setup": setup,
        "sampling": float(sum(d.sample_seconds for d in diagnostics)),
        "oracle": float(oracle.sum()),
        "mw_update": float(sum(d.update_seconds for d in diagnostics)),
        "other": float(sum(d.round_seconds - d.oracle_seconds - d.update_seconds for d in diagnostics)),
    }
    phases["total"] = float(sum(phases.values()))
    objective_gap = [
        max(0.0, (d.bound - d.objective) / max(1.0, abs(d.bound))) for d in diagnostics if d.bound is not None
    ]
    oracle_stats = {
        "median_seconds": float(np.median(oracle)), "p95_seconds": float(np.percentile(oracle, 95)),
        "max_seconds": float(oracle.max()),
        "local_search_seconds": float(sum(d.local_seconds for d in diagnostics)),
        "cpsat_seconds": float(sum(d.solver_seconds for d in diagnostics)),
        "cpsat_calls": sum(d.status not in ("NOT_RUN", "SKIPPED_DENSE") for d in diagnostics),
        "sources": {s: sum(d.source == s for d in diagnostics) for s in sorted({d.source for d in diagnostics})},
        "statuses": {s: sum(d.status == s for d in diagnostics) for s in sorted({d.status for d in diagnostics})},
        "rounds_with_bound": len(objective_gap),
        "median_gap": float(np.median(objective_gap)) if objective_gap else None,
        "max_gap": float(np.max(objective_gap)) if objective_gap else None,
        "mean_distinct_clauses": float(np.mean([d.distinct for d in diagnostics])),
    }
    return loop.rows(), {"phases": phases, "oracle": oracle_stats}


def errors_against_baselines(workload: Workload, true_answers: np.ndarray, records: np.ndarray) -> dict:
    """Max / mean / RMSE error of the records' answers and of the zeros and uniform baselines."""
    synthetic = answer_records(workload, workload.domain.encode_records(records))
    return {"dualquery": error_summary(true_answers, synthetic),
            "zeros": error_summary(true_answers, zeros_answers(workload)),
            "uniform": error_summary(true_answers, uniform_answers(workload))}


def cpsat_calls(oracle: dict) -> int:
    """Rounds in which CP-SAT actually ran (not skipped as dense, not switched off)."""
    return sum(count for status, count in oracle["statuses"].items() if status not in ("NOT_RUN", "SKIPPED_DENSE"))


def save_report(report: dict, out: Path, *, write_csv: Callable, plot: Callable) -> None:
    """Stamp the end-of-run load average, then write the report as JSON beside its CSV table and PNG plot."""
    report["machine"]["load_average_end"] = os.getloadavg()
    out.write_text(json.dumps(report, indent=1, default=float))
    write_csv(report["rows"], out.with_suffix(".csv"))
    plot(report["rows"], out.with_suffix(".png"))
