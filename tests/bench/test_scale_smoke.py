"""The scale benchmarks (Figure 4, BMS-WebView, smartnoise-synth comparison) run end to end with ``--smoke``.

Not timing tests: they keep the scripts from rotting. Each run takes seconds on tiny sizes. The real
smartnoise-synth run needs the separate ``.venv-smartnoise`` and minutes even on the smoke slice, so it only runs
when ``DQRELEASE_BENCH_SMARTNOISE=1``; the always-run test points the script at a missing interpreter and
checks that the smartnoise rows say ``unavailable`` while DualQuery's row is complete.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BMS1 = "bms_webview/BMS-WebView-1.dat"
"""The shared BMS-WebView-1 basket file (bench/bms_webview.py)."""
ADULT = ("adult_pgm/adult.csv", "adult_pgm/adult-domain.json")
"""The shared Adult files that bench/smartnoise_compare.py reads (through bench/mechanisms.py)."""
SMARTNOISE_PYTHON = ROOT / ".venv-smartnoise" / "bin" / "python"


def _run(script: str, out: Path, *extra: str, timeout: float = 300) -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--smoke", "--out", str(out), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_fig4_smoke_reports_errors_times_and_memory_per_size(tmp_path):
    out = tmp_path / "fig4.json"
    _run("fig4_attributes.py", out)
    report = json.loads(out.read_text())
    assert report["smoke"] is True
    assert [row["attributes"] for row in report["rows"]] == [50, 300]
    for row in report["rows"]:
        assert not row.get("failed"), row.get("stderr")
        assert set(row["errors"]) == {"dualquery", "zeros", "uniform"}
        assert 0 <= row["errors"]["dualquery"]["mean_error"] <= row["errors"]["dualquery"]["max_error"] <= 1
        assert row["epsilon"]["tight"] <= 1.0
        assert row["oracle"]["median_seconds"] <= row["oracle"]["p95_seconds"]
        assert row["peak_rss_gb"] > 0
    assert len(list(csv.DictReader((tmp_path / "fig4.csv").open()))) == 2
    assert (tmp_path / "fig4.png").stat().st_size > 0


def test_fig4_smoke_with_the_target_settings_publishes_k_rows_per_round(tmp_path):
    out = tmp_path / "fig4_target.json"
    _run("fig4_attributes.py", out, "--samples", "20", "--free-policy", "dp-marginal-gaussian",
         "--free-fraction", "0.3", "--rows-per-round", "4")
    report = json.loads(out.read_text())
    assert (report["rows_per_round"], report["free_policy"]) == (4, "dp-marginal-gaussian")
    for row in report["rows"]:
        assert not row.get("failed"), row.get("stderr")
        assert row["samples"] == 20
        assert row["published_rows"] == 4 * row["rounds"]
        assert row["free_sigma"] > 0
        assert row["epsilon"]["tight"] <= 1.0


def test_bms_smoke_reads_baskets_as_sparse_bits_and_reports_baselines(tmp_path, require_shared_data):
    require_shared_data(BMS1)
    out = tmp_path / "bms.json"
    _run("bms_webview.py", out)
    report = json.loads(out.read_text())
    (row,) = report["rows"]
    assert not row.get("failed"), row.get("stderr")
    assert row["dataset"] == "bms1"
    assert row["n"] == 3_000
    assert row["queries"] == 2_000
    assert row["errors"]["uniform"]["mean_error"] > 0
    assert row["oracle"]["median_seconds"] <= row["oracle"]["p95_seconds"]
    assert (tmp_path / "bms.csv").exists()
    assert (tmp_path / "bms.png").stat().st_size > 0


def test_bms_baskets_match_the_documented_shape(require_shared_data: Callable[[str], Path]):
    require_shared_data(BMS1)
    sys.path.insert(0, str(ROOT / "bench"))
    from bms_webview import load_bms

    data, universe = load_bms("bms1")
    assert (data.n, len(data.domain)) == (59_602, 497)  # SOURCE.md
    assert data.bits.nnz == 149_639
    assert universe[0] == 10_292 and universe[-1] == 60_978


def test_smartnoise_compare_smoke_without_smartnoise_marks_it_unavailable(tmp_path, require_shared_data):
    for relative in ADULT:
        require_shared_data(relative)
    out = tmp_path / "smartnoise.json"
    _run("smartnoise_compare.py", out, "--smartnoise-python", str(tmp_path / "missing" / "python"))
    report = json.loads(out.read_text())
    status = {row["mechanism"]: row["status"] for row in report["rows"]}
    assert status == {"dualquery": "ok", "mst": "unavailable", "aim": "unavailable"}
    (dualquery,) = [row for row in report["rows"] if row["mechanism"] == "dualquery"]
    assert 0 < dualquery["max_error"] <= 1
    assert dualquery["tight_epsilon"] <= 1.0
    assert all(ratio["max_error_ratio"] is None for ratio in report["ratios"])
    assert (tmp_path / "smartnoise.png").stat().st_size > 0


@pytest.mark.skipif(
    os.environ.get("DQRELEASE_BENCH_SMARTNOISE") != "1" or not SMARTNOISE_PYTHON.exists(),
    reason="set DQRELEASE_BENCH_SMARTNOISE=1 with .venv-smartnoise installed (minutes)",
)
def test_smartnoise_compare_smoke_runs_mst_and_aim(tmp_path, require_shared_data):
    for relative in ADULT:
        require_shared_data(relative)
    out = tmp_path / "smartnoise.json"
    _run("smartnoise_compare.py", out, timeout=1200)
    report = json.loads(out.read_text())
    assert {row["mechanism"]: row["status"] for row in report["rows"]} == {"dualquery": "ok", "mst": "ok", "aim": "ok"}
    assert all(ratio["time_ratio"] > 0 for ratio in report["ratios"])
