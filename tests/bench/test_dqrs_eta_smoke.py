"""bench/dqrs_eta.py end to end at smoke sizes (not a timing test): one line per run, the η it was given, a table.

Needs the shipped Adult only (examples/adult/data).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_one_line_per_run_and_the_table(tmp_path):
    out = tmp_path / "dqrs_eta.jsonl"
    command = [sys.executable, str(ROOT / "bench" / "dqrs_eta.py"), "--smoke", "--fit", "off", "--etas", "0.1",
               "--epsilons", "1", "--seeds", "0", "--out", str(out)]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["mechanism"], row["eta"]) for row in rows] == [("dualquery", 0.1), ("dqrs", 0.1), ("dualquery", 1.0)]
    assert all(row["status"] == "ok" and json.loads(row["parameters"])["eta"] == row["eta"] for row in rows)
    assert all(row["rounds"] == 3 for row in rows)  # the smoke keys' T
    table = out.with_suffix(".md").read_text()
    assert table.count("| adult | off | 1 |") == 3
    subprocess.run([*command, "--report"], check=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert len(out.read_text().splitlines()) == 3  # --report runs nothing; a rerun would skip the three
