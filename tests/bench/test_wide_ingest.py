"""``bench/wide_ingest.py``: the smoke run measures both layouts and the forecast (300 columns of 2,000 rows)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_smoke_run_records_both_layouts_and_the_forecast(tmp_path: Path):
    out = tmp_path / "wide_ingest.json"
    subprocess.run([sys.executable, "bench/wide_ingest.py", "--smoke", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True, text=True)

    [record] = json.loads(out.read_text())["records"]
    assert record["columns"] == 300 and record["rows"] == 2_000
    assert sorted(run["layout"] for run in record["runs"]) == ["default", "release"]
    assert all(run["peak_gb"] >= run["imports_gb"] > 0 and run["seconds"] > 0 for run in record["runs"])
    assert record["forecast_ingest_gb"] == round((512 * 2**20 + 300 * 256 * 1024) / 2**30, 3)  # 300 columns are wide
    table = out.with_suffix(".md").read_text()
    assert "| 300 x 2,000 | default |" in table and "| 300 x 2,000 | release |" in table
