"""bench/fidelity_speed.py runs end to end with ``--smoke`` and writes its result (not a timing test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_fidelity_speed_smoke_times_every_stage_of_both_mechanisms(tmp_path):
    out = tmp_path / "fidelity_speed.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fidelity_speed.py"), "--smoke", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["smoke"] is True and result["columns"] == 6
    assert [run["mechanism"] for run in result["runs"]] == ["mwem-particles", "dualquery"]
    for run in result["runs"]:
        assert set(run["seconds"]) == {"mechanism", "fidelity", "report_numbers", "report_files"}
        assert all(seconds > 0 for seconds in run["seconds"].values())
        assert 0 <= run["headline"] <= 1
