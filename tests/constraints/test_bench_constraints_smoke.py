"""bench/constraints.py runs end to end with --smoke and writes its summary (not a timing test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_constraints_bench_smoke_reports_zero_violations_with_rules(tmp_path):
    out = tmp_path / "constraints.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "constraints.py"), "--smoke", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["smoke"] is True and set(report["summary"]) == {"dualquery", "mwem"}
    for summary in report["summary"].values():
        assert summary["violating_published_rows_with_rules"] == [0]
        assert summary["violating_published_rows_without_rules"][0] > 0
        assert summary["time_ratio_median"] > 0
