"""The mechanisms benchmark runs end to end at smoke sizes and writes its CSV and plot (needs the shared Adult)."""

from __future__ import annotations

import csv
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_mechanisms_benchmark_smoke_run_writes_a_row_per_mechanism_and_a_plot(tmp_path, require_shared_data):
    for relative in ("adult_pgm/adult.csv", "adult_pgm/adult-domain.json"):
        require_shared_data(relative)
    out = tmp_path / "mechanisms.csv"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mechanisms.py"), "--smoke", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    mechanisms = {row["mechanism"] for row in rows}
    assert {"zeros", "uniform", "fem", "sepfem", "mwem", "mwem-particles", "randomized_response"} <= mechanisms
    assert {"dualquery", "dqrs"} <= mechanisms
    for row in rows:
        assert row["status"] in ("ok", "refused"), row
        if row["tight_epsilon"]:
            assert float(row["tight_epsilon"]) <= float(row["epsilon"])  # never over the target
    assert out.with_suffix(".png").stat().st_size > 10_000
