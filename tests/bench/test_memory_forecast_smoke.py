"""``bench/memory_forecast.py --smoke`` runs end to end, and its forecast is within 2x of the measured peak.

Not a timing test: two tiny widths (8 and 12 binary columns, 2,000 particles), each in its own process, a few
seconds each. The peak is the process's resident size above its size after the imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_memory_forecast_smoke_is_within_twice_the_measured_peak(tmp_path: Path):
    out = tmp_path / "memory_forecast.jsonl"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "memory_forecast.py"), "--smoke", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["columns"] for row in rows] == [8, 12]
    for row in rows:
        assert row["smoke"] is True and row["measured_bytes"] > 0
        assert 0.5 <= row["forecast_bytes"] / row["measured_bytes"] <= 2.0, row
        assert set(row["forecast_parts"]) == {"particles", "oracle", "answers", "rows", "data"}
