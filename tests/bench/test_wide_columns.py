"""bench/wide_columns.py: its generated table, the configs of plan's fixes, and its smoke run end to end.

Not timing tests: the smoke run releases a 30-column, 2,000-row binary table through ``dqrelease run`` once per fix
that ``plan`` names under a 0.1 GiB memory limit (about 1.5 minutes on a quiet machine); a second run with a cap of
a few seconds checks that a capped run is recorded as capped and not as a result.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(ROOT))

from bench import wide_columns  # noqa: E402


def _smoke(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "wide_columns.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "wide_columns.py"), "--smoke", "--widths", "30", "--out", str(out),
         "--work", str(tmp_path / "work"), "--prefect-home", str(tmp_path / "prefect-home"), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(out.read_text())


def test_smoke_run_releases_each_fix_plan_names_with_its_forecast_and_measured_peak(tmp_path: Path):
    report = _smoke(tmp_path)

    assert report["smoke"] is True and report["complete"] is True
    [record] = report["records"]
    assert (record["columns"], record["rows"]) == (30, 2_000)
    assert record["table"]["dependent_columns"] == 8  # columns 1, 5, ..., 29 and record["table"]["parquet_mb"] > 0
    plan = record["default_plan"]
    assert (plan["returncode"], plan["accepted"]) == (2, False)
    assert plan["error"].startswith("error: memory: the forecast of dualquery with its table fit")
    keys = [fix["key"] for fix in plan["fixes"]]
    assert {"mechanism.fit.particles", "mechanism.fit.enabled"} <= set(keys)
    assert "run.memory_limit_gib" not in keys  # no forecast on this machine: not run
    runs = record["runs"]
    assert [run["variant"] for run in runs] == [  # cheapest forecast first
        f"{fix['key']} = {fix['value']}" for fix in sorted(plan["fixes"], key=lambda f: wide_columns.shown_size(
            f["forecast"]))]
    for run in runs:
        assert run["status"] == "released" and run["returncode"] == 0 and run["error"] is None, run.get("log_tail")
        assert run["plan"]["accepted"] and run["plan"]["memory_line"].startswith("about ")
        forecast = run["forecast"]["memory_forecast_gb"]
        assert forecast == pytest.approx(sum(run["forecast"]["memory_forecast_parts_gb"].values()), abs=1e-3)
        assert 0 < run["startup_rss_gb"] <= run["peak_rss_tree_gb"]
        assert run["forecast_over_measured"] == pytest.approx(forecast / run["peak_rss_tree_gb"], abs=0.01)
        assert "load average" in run["uptime_before"] and "load average" in run["uptime_after"]
        stages = [stage["stage"] for stage in run["stages"]]
        assert stages[0] == "startup" and {"synthesize", "publish"} <= set(stages)
        assert "$WORK/table.parquet" in run["config"] and str(tmp_path) not in json.dumps(run)
    fitted = next(run for run in runs if run["variant"].startswith("mechanism.fit.particles"))
    assert "[mechanism.fit]\nrounds = 2\nparticles = " in fitted["config"]  # the smoke's fit key kept, one key added
    text = (tmp_path / "wide_columns.md").read_text()
    assert "## 30 binary columns, 2,000 rows" in text
    assert "| `mechanism.fit.enabled = false` | accepted |" in text


def test_a_run_over_the_cap_is_recorded_as_capped_without_a_ratio(tmp_path: Path):
    report = _smoke(tmp_path, "--cap-minutes", "0.05", "--skip", "particles", "--skip", "independent")

    runs = {run["variant"]: run for run in report["records"][0]["runs"]}
    capped = runs["mechanism.fit.enabled = false"]
    assert capped["status"] == "capped" and capped["error"].startswith("timed out after 3 s")
    assert capped["forecast_over_measured"] is None and capped["forecast_over_above_startup"] is None
    assert runs["mechanism.name = 'independent'"]["status"] == "skipped"
    assert "capped: timed out after 3 s" in (tmp_path / "wide_columns.md").read_text()


def test_generated_table_has_the_seeded_marginals_and_the_planted_pairs(tmp_path: Path):
    path = tmp_path / "table.parquet"
    described = wide_columns.write_table(path, columns=12, rows=20_000)
    again = tmp_path / "again.parquet"
    wide_columns.write_table(again, columns=12, rows=20_000)

    table = pq.read_table(path).to_pandas()
    assert table.equals(pq.read_table(again).to_pandas())  # public seed: the same table every time
    assert list(table.columns) == [f"item{j}" for j in range(12)] and len(table) == 20_000
    assert set(table.stack().unique()) == {0, 1}
    assert described["dependent_columns"] == 3  # columns 1, 5, 9
    share = table.mean()
    assert ((share > wide_columns.P_LOW - 0.02) & (share < wide_columns.P_HIGH + 0.02)).all()
    agreement = {j: (table[f"item{j}"] == table[f"item{j - 1}"]).mean() for j in range(1, 12)}
    correlation = table.corr()
    for j in range(1, 12):
        if j % wide_columns.COPY_EVERY == 1:  # a noisy copy: repeats the column before in about 80 % of rows
            assert agreement[j] > wide_columns.COPY_PROBABILITY
            assert correlation.iloc[j, j - 1] > 0.6
        else:
            assert abs(correlation.iloc[j, j - 1]) < 0.05


@pytest.mark.parametrize(("fix", "expected"), [
    (None, ("rounds = 3", "rounds = 2")),
    ({"key": "mechanism.name", "value": "'auto'"}, ("name = 'auto'", "")),
    ({"key": "mechanism.fit.enabled", "value": "false"}, ("rounds = 3", "rounds = 2\nenabled = false")),
    ({"key": "mechanism.fit.rounds", "value": "5"}, ("rounds = 3", "rounds = 5")),
])
def test_a_fix_changes_the_config_as_plan_forecast_it(fix: dict | None, expected: tuple[str, str]):
    assert wide_columns.changed_sections(fix, mechanism="rounds = 3", fit="rounds = 2") == expected


def test_a_fix_of_another_key_stops_the_benchmark_with_where_to_add_it():
    with pytest.raises(SystemExit, match="cannot apply; add it there"):
        wide_columns.changed_sections({"key": "workload.k", "value": "2"}, mechanism="", fit="")


def test_plan_sizes_are_read_in_binary_units():
    assert wide_columns.shown_size("40 MiB") == 40 * 2**20
    assert wide_columns.shown_size("16.7 GiB") == pytest.approx(16.7 * 2**30)
    assert wide_columns.shown_size("1,234 TiB") == 1234 * 2**40


def test_a_stop_time_after_midnight_is_the_next_day():
    from bench.wide_columns import seconds_until

    late = time.struct_time((2026, 11, 28, 23, 40, 0, 5, 332, 0))
    assert seconds_until("00:30", now=late) == 50 * 60  # tomorrow's 00:30, not a time 23 hours ago
    assert seconds_until("23:30", now=late) == 0  # ten minutes ago: passed
    assert seconds_until("23:50", now=late) == 10 * 60
    assert seconds_until(None, now=late) == math.inf
