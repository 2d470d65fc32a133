"""bench/scale_rows.py: the tables it builds, the configs it writes, and its smoke run end to end.

Not timing tests: the smoke run releases Adult at 20,000 and 40,000 rows through ``dqrelease run`` (about a minute
on a quiet machine) and checks that every stage of every size has a time and a peak RSS, and that a size the
pipeline refuses is recorded with its exit code and error line instead of stopping the benchmark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
KDD_10PCT = "kddcup99_10pct/kddcup.data_10_percent.gz"
"""The shared KDD Cup 99 file that examples/kdd99/release.toml reads."""

sys.path.insert(0, str(ROOT / "bench"))

import scale_rows  # noqa: E402


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Prefect home for the module's benchmark runs (its database is created once)."""
    return tmp_path_factory.mktemp("prefect-home")


def _run(tmp_path: Path, prefect_home: Path, *extra: str) -> dict:
    out = tmp_path / "scale_rows.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_rows.py"), "--smoke", "--out", str(out), "--work",
         str(tmp_path / "work"), "--prefect-home", str(prefect_home), "--timeout", "600", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(out.read_text())


def _require_table(name: str, require_shared_data: Callable[[str], Path]) -> None:
    if name == "kdd99":
        require_shared_data(KDD_10PCT)


def test_smoke_run_reports_time_and_memory_for_every_stage_of_every_size(tmp_path, prefect_home):
    report = _run(tmp_path, prefect_home)
    assert report["smoke"] is True
    assert report["epsilon"] == 1.0
    assert "load_average_end" in report["machine"]
    records = report["records"]
    assert [(r["table"], r["rows"]) for r in records] == [("adult", 20_000), ("adult", 40_000)]
    for record in records:
        assert record["returncode"] == 0, record.get("error")
        assert record["error"] is None
        assert record["copies"] * record["base_rows"] + record["resampled"] == record["rows"]
        assert {"cores", "memory_gb", "load_average_start", "load_average_end"} <= set(record["machine"])
        names = [stage["stage"] for stage in record["stages"]]
        assert names[0] == "startup" and names[-1] == "shutdown"
        assert {"ingest", "validate-raw", "answer-partition", "synthesize", "publish"} <= set(names)
        for stage in record["stages"]:
            assert stage["seconds"] >= 0, stage
            assert 0 < stage["peak_rss_gb"] <= record["peak_rss_tree_gb"], stage
        assert sum(stage["seconds"] for stage in record["stages"]) == pytest.approx(record["wall_seconds"], rel=0.02)
        assert record["peak_rss_main_gb"] <= record["peak_rss_tree_gb"]
        assert "$WORK/table.parquet" in record["config"]
        assert (record["plan"]["rounds"], record["plan"]["fit_rounds"]) == (3, 2)  # the smoke settings
        assert record["plan"]["memory_forecast_gb"] > 0
    growth = (tmp_path / "scale_rows.md").read_text()
    assert "| stage | 20k | 40k | 40k / 20k |" in growth
    assert "| synthesize |" in growth and "| **total** |" in growth
    assert (tmp_path / "scale_rows.png").stat().st_size > 0


def test_a_size_the_pipeline_refuses_is_recorded_with_its_exit_code_and_error(tmp_path, prefect_home):
    earlier = [{"table": "adult", "rows": rows, "returncode": 1, "error": f"error: earlier run of {rows}"}
               for rows in (20_000, 30_000)]
    (tmp_path / "scale_rows.json").write_text(json.dumps({"records": earlier}))
    report = _run(tmp_path, prefect_home, "--rows", "20000", "--memory-limit-gib", "0.001", "--append")
    kept, record = report["records"]  # --append keeps the other size and replaces the one measured again
    assert kept == earlier[1]
    assert (record["rows"], record["returncode"]) == (20_000, 2)
    assert record["error"].startswith("error: ") and "memory" in record["error"]
    assert record["stages"] == []
    growth = (tmp_path / "scale_rows.md").read_text()
    assert "- 20k: exit 2: error: " in growth and "- 30k: exit 1: error: earlier run of 30000" in growth


def test_built_table_holds_whole_copies_of_the_base_table_plus_distinct_base_rows(tmp_path):
    # Adult only: KDD99 goes through the same code with its own [source] options, and its 494,021-row base takes
    # about 30 s per build on a loaded machine (the config test below covers its example)
    example, base_rows, copies = scale_rows.TABLES["adult"], 48_842, 2
    rows = copies * base_rows + 2_316
    built = scale_rows.build_table(example, rows, tmp_path / "table.parquet")
    assert (built.base_rows, built.copies, built.resampled) == (base_rows, copies, 2_316)
    again = scale_rows.build_table(example, rows, tmp_path / "again.parquet")
    base = scale_rows.build_table(example, base_rows, tmp_path / "base.parquet")
    con = duckdb.connect()

    def count(query: str) -> int:
        return con.execute(f"select count(*) from ({query})").fetchone()[0]

    table, same, whole = (f"from read_parquet('{each.path}')" for each in (built, again, base))
    copied = " union all ".join([whole] * copies)
    assert count(table) == rows
    assert count(f"{table} except all {same}") == 0  # the same rows for the same size: the order's seed is public
    assert count(f"{copied} except all {table}") == 0  # every base row in each copy
    assert count(f"{table} except all ({copied} union all {whole})") == 0  # the rest: base rows, each at most once


@pytest.mark.parametrize("name", ["adult", "kdd99"])
def test_written_config_releases_the_parquet_table_at_epsilon_one(
    tmp_path, name: str, require_shared_data: Callable[[str], Path]
):
    from dqrelease.inputs.config import load_config

    _require_table(name, require_shared_data)
    table = tmp_path / "table.parquet"
    path = scale_rows.write_config(scale_rows.TABLES[name], tmp_path, table=table, rows=5_000_000, smoke=False,
                                   memory_limit_gib=3.5)
    config = load_config(path)
    example = load_config(scale_rows.TABLES[name])
    assert (config.source.format, config.source.paths) == ("parquet", [table])
    assert (config.privacy.n, config.privacy.epsilon) == (5_000_000, 1.0)
    assert config.privacy.delta == example.privacy.delta
    assert config.workload == example.workload and config.mechanism == example.mechanism
    assert config.schema_file == example.schema_file
    assert config.run.seed_mode == "secure" and config.run.memory_limit_gib == 3.5
    assert config.ledger.path == tmp_path / "ledger.duckdb" and config.output.directory == tmp_path / "out"
