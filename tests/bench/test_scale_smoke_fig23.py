"""The Figure 2 / Figure 3 benchmarks and the KDD99 pipeline benchmark run end to end with ``--smoke``.

Not timing tests: tiny sizes that keep the scripts from rotting, checking that every result file is written
and that the reported numbers are consistent with the run's parameters.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DATA = ("adult_pgm/adult.csv", "adult_pgm/adult-domain.json", "kddcup99_dualquery/kdd99.clean.gz",
               "kddcup99_dualquery/kdd99.schema")
"""Shared data files of bench/engine_data.py (Figures 2-3, the profiles)."""
KDD_10PCT = "kddcup99_10pct/kddcup.data_10_percent.gz"
"""The shared KDD Cup 99 file that bench/kdd99_pipeline.py releases."""


@pytest.fixture
def engine_data(require_shared_data: Callable[[str], Path]) -> None:
    for relative in ENGINE_DATA:
        require_shared_data(relative)


def _run(script: str, *arguments: str, timeout: float = 180) -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--smoke", *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


@pytest.mark.usefixtures("engine_data")
def test_fig3_smoke_reports_every_size_with_phase_split_and_both_epsilons(tmp_path):
    out = tmp_path / "fig3.json"
    _run("fig3_queries.py", "--out", str(out))
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [row["queries"] for row in rows] == [2_000, 5_000]
    for row in rows:
        assert not row.get("failed")
        assert row["rounds"] == 5
        assert set(row["epsilon"]) == {"paper", "tight"}
        assert row["epsilon"]["tight"] < row["epsilon"]["paper"]
        phases = row["phases"]
        parts = phases["setup"] + phases["sampling"] + phases["oracle"] + phases["mw_update"] + phases["other"]
        assert phases["total"] == pytest.approx(parts)
        assert 0 <= row["errors"]["dualquery"]["max_error"] <= 1
        assert row["oracle"]["p95_seconds"] >= row["oracle"]["median_seconds"]
    with (tmp_path / "fig3.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 2
    assert (tmp_path / "fig3.png").stat().st_size > 0


@pytest.mark.usefixtures("engine_data")
def test_fig2_smoke_runs_both_accountings_and_tight_gets_more_rounds(tmp_path):
    out = tmp_path / "fig2.json"
    _run("fig2_accuracy.py", "--out", str(out))
    report = json.loads(out.read_text())
    assert set(report["datasets"]) == {"adult", "kdd99"}
    for dataset in ("adult", "kdd99"):
        runs = {row["accounting"]: row for row in report["rows"] if row["dataset"] == dataset}
        assert set(runs) == {"paper", "tight"}
        assert runs["tight"]["rounds"] > runs["paper"]["rounds"]
        for mode, row in runs.items():
            assert row["epsilon"][mode] <= row["target_epsilon"]
    with (tmp_path / "fig2.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 4
    assert (tmp_path / "fig2.png").stat().st_size > 0


def test_kdd99_pipeline_smoke_releases_through_dqrelease_and_parses_task_times(tmp_path, require_shared_data):
    require_shared_data(KDD_10PCT)
    out = tmp_path / "kdd99.json"
    _run("kdd99_pipeline.py", "--out", str(out), "--work", str(tmp_path / "work"), "--timeout", "400", timeout=450)
    result = json.loads(out.read_text())
    run = result["run"]
    assert run["returncode"] == 0
    tasks = {task["task"] for task in run["tasks"]}
    assert {"synthesize", "publish"} <= tasks
    assert run["peak_rss_main_gb"] > 0
    assert result["error_report"]["parameters"]["samples"] == 100
    assert (tmp_path / "kdd99.png").stat().st_size > 0


@pytest.mark.usefixtures("engine_data")
def test_profile_smoke_times_every_hot_path_and_writes_profiler_listings(tmp_path):
    out = tmp_path / "profiles.json"
    _run("profile_hot_paths.py", "--out", str(out))
    report = json.loads(out.read_text())
    expected = {"workload", "answers_true", "evaluate_record", "answers_records_170", "sample", "update",
                "cpsat_build_kdd99", "cpsat_build_adult", "dualquery_rounds_per_round"}
    assert expected <= set(report["seconds"])
    assert all(value >= 0 for value in report["seconds"].values())
    if report["profiler"] is None:  # pyinstrument comes with the optional "bench" extra
        return
    listings = {path.stem for path in (tmp_path / "profiles").glob("*.txt")}
    assert {"answers_true", "evaluate_record", "sample", "update", "cpsat_build_kdd99", "dualquery_rounds"} <= listings
