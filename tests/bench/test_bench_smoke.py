"""Every bench script runs end to end with ``--smoke`` (tiny sizes) and writes its result files.

These are not timing tests: they only keep the bench scripts from rotting. Each run takes a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH_DATA = ("adult_pgm/adult.csv", "adult_pgm/adult-domain.json", "kddcup99_dualquery/kdd99.clean.gz",
              "kddcup99_dualquery/kdd99.schema")
"""Shared data files the engine and oracle benchmarks read (bench/engine_data.py)."""


@pytest.fixture(autouse=True)
def _bench_data(require_shared_data: Callable[[str], Path]) -> None:
    for relative in BENCH_DATA:
        require_shared_data(relative)


def _run(script: str, out: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--smoke", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_engine_bench_smoke_writes_every_part(tmp_path):
    out = tmp_path / "engine.json"
    _run("engine.py", out)
    report = json.loads(out.read_text())
    assert report["smoke"] is True
    assert {"a_mw_round", "b_answers", "c_oracle", "d_dualquery_adult"} <= set(report)
    assert report["b_answers"]["max_abs_difference_vs_direct_count"] == 0.0
    assert report["a_mw_round"]["per_round"]["round"]["repeats"] == 5
    assert all(row["objective"] >= 0 for row in report["c_oracle"]["rows"])
    errors = report["d_dualquery_adult"]["error"]
    assert set(errors) == {"dualquery", "zeros", "uniform"}


def test_oracle_study_smoke_writes_rows_summary_and_plots(tmp_path):
    out = tmp_path / "oracle_study.json"
    _run("oracle_encodings.py", out)
    summary = json.loads(out.read_text())
    experiments = {entry["experiment"] for entry in summary["configs"]}
    assert {"encoding", "workers", "hint", "presolve", "cpsat_time", "local_time", "portfolio", "determinism",
            "reference"} <= experiments
    assert all(entry["runs"] >= 1 for entry in summary["configs"])
    assert (tmp_path / "oracle_study.csv").exists()
    assert (tmp_path / "oracle_study_time_quality.png").exists()
    assert (tmp_path / "oracle_study_cpsat_settings.png").exists()
