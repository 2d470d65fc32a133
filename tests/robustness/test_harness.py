"""The corpus's own checks can fail: a planted canary is found wherever the scan looks, and not elsewhere."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.robustness.abuse_harness import (
    CANARY_COLUMN_VALUE,
    CANARY_NUMBER,
    PRIVATE_COUNT,
    Outcome,
    Workspace,
    assert_no_leaks,
    find_canaries,
    make_workspace,
    toml_text,
)


def _clean() -> Outcome:
    return Outcome(exit_code=0, stdout="published", stderr="", started=datetime.now(UTC))


@pytest.mark.parametrize(("text", "found"), [
    ("value 987654321 seen", ["987654321"]),
    ("987,654,321 rows", ["987654321"]),
    ("9.87654321e+08", ["987654321"]),
    ("987654321.0", ["987654321"]),
    ("id 19876543210 and 9876543210", []),
    ("(1237 rows)", ["1237"]),
    ("21:57:01.237 and 0.1237 and 12370 and ab1237cd", []),
    (f"a {CANARY_COLUMN_VALUE.lower()}-001 b", [CANARY_COLUMN_VALUE]),
])
def test_canaries_are_found_as_whole_tokens(text: str, found: list[str]):
    assert find_canaries(text) == found


def _parquet(ws: Workspace) -> None:
    path = ws.out / "releases" / "r" / "synthetic.parquet"
    path.parent.mkdir(parents=True)
    table = pa.table({"city": [CANARY_COLUMN_VALUE] * 50 + ["north"] * 50})
    pq.write_table(table, path, compression="zstd", use_dictionary=True)


def _duckdb(ws: Workspace) -> None:
    path = ws.out / "releases" / "r" / "synthetic.duckdb"
    path.parent.mkdir(parents=True)
    with duckdb.connect(str(path)) as con:
        con.execute("create table synthetic as select $v::bigint as income from range(2000)", {"v": CANARY_NUMBER})


def _staging_text(ws: Workspace) -> None:
    path = ws.out / ".staging" / "x" / "release" / "synthetic.csv"
    path.parent.mkdir(parents=True)
    path.write_text(f"city\n{CANARY_COLUMN_VALUE}\n")


def _temporary_file(ws: Workspace) -> None:
    (ws.tmp / "gx-docs").mkdir()
    (ws.tmp / "gx-docs" / "index.html").write_text(f"<td>{CANARY_NUMBER}</td>")


def _count_in_public_file(ws: Workspace) -> None:
    path = ws.out / "releases" / "r" / "release.json"
    path.parent.mkdir(parents=True)
    path.write_text(f'{{"rows_read": {PRIVATE_COUNT}}}')


@pytest.mark.parametrize("plant", [_parquet, _duckdb, _staging_text, _temporary_file, _count_in_public_file])
def test_a_planted_canary_fails_the_scan(tmp_path, plant):
    ws = make_workspace(tmp_path / "ws")
    ws.out.mkdir()
    assert_no_leaks(ws, _clean(), prefect=False)
    plant(ws)
    with pytest.raises(AssertionError, match="private values leaked"):
        assert_no_leaks(ws, _clean(), prefect=False)


def test_a_canary_in_stderr_or_a_log_record_fails_the_scan(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    for outcome in (
        Outcome(exit_code=3, stdout="", stderr=f"error: bad value {CANARY_NUMBER}", started=datetime.now(UTC)),
        Outcome(
            exit_code=3, stdout="", stderr="", started=datetime.now(UTC), records=[f"INFO x {CANARY_COLUMN_VALUE}"]
        ),
    ):
        with pytest.raises(AssertionError, match="private values leaked"):
            assert_no_leaks(ws, outcome, prefect=False)


def test_the_internal_report_may_hold_counts_but_not_values(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    report = ws.out / "internal" / "r" / "error_report.json"
    report.parent.mkdir(parents=True)
    report.write_text(f'{{"n": {PRIVATE_COUNT}}}')
    assert_no_leaks(ws, _clean(), prefect=False)
    report.write_text(f'{{"n": {PRIVATE_COUNT}, "max": {CANARY_NUMBER}}}')
    with pytest.raises(AssertionError, match="private values leaked"):
        assert_no_leaks(ws, _clean(), prefect=False)


def test_toml_writer_round_trips_the_standard_config(tmp_path):
    import tomllib

    from tests.robustness.abuse_harness import base_config

    config = base_config()
    config["mechanism"]["oracle"] = {"kind": "local"}
    config["privacy"]["epsilon"] = float("inf")
    assert tomllib.loads(toml_text(config)) == config
