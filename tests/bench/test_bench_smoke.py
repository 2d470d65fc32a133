"""Every bench script runs end to end with ``--smoke`` (tiny sizes) and writes its result files.

These are not timing tests: they only keep the bench scripts from rotting. Each run takes a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("/work/shared/data")

pytestmark = pytest.mark.skipif(
    not (DATA / "adult_pgm" / "adult.csv").exists() or not (DATA / "kddcup99_dualquery" / "kdd99.clean.gz").exists(),
    reason="bench data sets are not available on this machine",
)


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
