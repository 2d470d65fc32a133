"""bench/seed_records.py end to end at smoke sizes (not a timing test): one line per run, the variant's keys, a table.

Needs the shipped Adult only (examples/adult/data).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_one_line_per_run_with_its_variant_and_the_table(tmp_path):
    out = tmp_path / "seed_records.jsonl"
    command = [sys.executable, str(ROOT / "bench" / "seed_records.py"), "--smoke", "--shares", "0.9",
               "--epsilons", "1", "--seeds", "0", "--out", str(out)]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["mechanism"], row["variant"]) for row in rows] == [
        ("mwem-particles", "registry"), ("independent", "registry"), ("dualquery", "default"),
        ("dualquery", "no-records"), ("dualquery", "share-0.9")]
    assert all(row["status"] == "ok" for row in rows)
    fits = {row["variant"]: json.loads(row["parameters"])["fit"] for row in rows if row["mechanism"] == "dualquery"}
    assert fits["default"]["seed_fraction"] == 0.5 and fits["no-records"]["seed_fraction"] == 0.0
    assert fits["no-records"]["measure_rho"] == fits["default"]["measure_rho"]  # the same budget split
    table = out.with_suffix(".md").read_text()
    assert table.count("| adult | 1 |") == 5
    independent = next(line for line in table.splitlines() if "| independent |" in line)
    assert independent.split("|")[10].strip().startswith("0 [0–0]")  # no pair is worse than itself
    subprocess.run([*command, "--report"], check=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert len(out.read_text().splitlines()) == 5  # --report runs nothing
