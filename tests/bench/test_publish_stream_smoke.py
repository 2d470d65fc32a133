"""bench/publish_stream.py: one small stream end to end (not a timing test: the seconds are not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_stream_writes_every_format_and_records_its_hashes(tmp_path: Path):
    out = tmp_path / "publish_stream.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "publish_stream.py"), "--rows", "3000", "--records", "500",
                    "--repeats", "2", "--suite", "--out", str(out)], check=True, capture_output=True, timeout=300)
    record = json.loads(out.read_text())
    assert record["rows"] == 3000 and record["records"] == 500 and len(record["runs"]) == 2
    first, second = record["runs"]
    assert first["csv_sha256"] == first["duckdb_content_sha256"]  # the DuckDB table's content is the CSV text
    assert {key: value for key, value in first.items() if key.endswith("sha256")} == {
        key: value for key, value in second.items() if key.endswith("sha256")}
    assert record["suite"] and first["suite_failed"] is not None  # the published suite ran to its verdict
    assert record["wall_median_seconds"] > 0
