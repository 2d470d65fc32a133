"""Abuse corpus, the private table: empty files, header only, BOM, CRLF, ragged rows, bad encodings, truncated
gzip, corrupt Parquet, out-of-domain values, nulls, text in numbers, wrong delimiters, undeclared basket items.

A table that cannot be used is refused with exit 3 (its files were read, nothing was charged), with one line that
names the column or the file format and the fix, and never a value, a line of the file or a count taken from it.
A table that is merely unusual (BOM, CRLF, gzip, Parquet, an undeclared column full of canaries, a column name
that looks like SQL, a private n) is released, and its canaries appear nowhere.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.robustness.abuse_harness import (
    CANARY_NUMBER,
    CANARY_OUT_OF_DOMAIN,
    CANARY_TEXT,
    COLUMNS,
    PRIVATE_COUNT,
    ROWS,
    Workspace,
    base_config,
    base_rows,
    base_schema,
    charges,
    csv_text,
    expect_refusal,
    expect_release,
    ledger_state,
    run_cli,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")

Setup = Callable[[Workspace], None]


def _source(ws: Workspace, name: str, content: bytes, **source: Any) -> None:
    """Write ``content`` as the source file ``name`` and point the config at it."""
    (ws.root / name).write_bytes(content)
    config = base_config()
    config["source"] = {"format": "csv", "paths": [name], **source}
    ws.config.write_text(toml_text(config))


def _rows(change: Callable[[int, dict[str, str]], None], rows: int = ROWS) -> bytes:
    table = base_rows(rows)
    for i, row in enumerate(table):
        change(i, row)
    return csv_text(table).encode()


def _config(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        for dotted, value in changes.items():
            section, key = dotted.split("__")
            config[section][key] = value

    return change


def _parquet_bytes(rows: list[dict[str, str]]) -> bytes:
    table = pa.table({
        "city": [r["city"] for r in rows],
        "income": pa.array([int(r["income"]) for r in rows], pa.int64()),
        "flag": pa.array([int(r["flag"]) for r in rows], pa.int8()),
        "ssn": [r["ssn"] for r in rows],
    })
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


# ---------------------------------------------------------------------- refusals
def empty_file(ws: Workspace) -> None:
    _source(ws, "data.csv", b"")


def header_only(ws: Workspace) -> None:
    _source(ws, "data.csv", (",".join(COLUMNS) + "\n").encode())


def ragged_row_extra_field(ws: Workspace) -> None:
    text = csv_text(base_rows()).splitlines()
    text[7] += f",{CANARY_OUT_OF_DOMAIN},{CANARY_NUMBER}"
    _source(ws, "data.csv", ("\n".join(text) + "\n").encode())


def ragged_row_missing_field(ws: Workspace) -> None:
    text = csv_text(base_rows()).splitlines()
    text[9] = f"{CANARY_OUT_OF_DOMAIN},{CANARY_NUMBER}"
    _source(ws, "data.csv", ("\n".join(text) + "\n").encode())


def bad_encoding(ws: Workspace) -> None:
    lines = csv_text(base_rows()).encode().splitlines()
    lines[5] = f"m\xe9tro-{CANARY_OUT_OF_DOMAIN},{CANARY_NUMBER},1,x".encode("latin-1")
    _source(ws, "data.csv", b"\n".join(lines) + b"\n")


def truncated_gzip(ws: Workspace) -> None:
    whole = _gzip_bytes(csv_text(base_rows(400)).encode())
    _source(ws, "data.csv.gz", whole[: len(whole) // 2], gzip=True)


def corrupt_parquet(ws: Workspace) -> None:
    whole = _parquet_bytes(base_rows())
    broken = whole[:4] + bytes(b ^ 0x5A for b in whole[4:-8]) + whole[-8:]
    _source(ws, "data.parquet", broken)
    config = base_config()
    config["source"] = {"format": "parquet", "paths": ["data.parquet"]}
    ws.config.write_text(toml_text(config))


def truncated_parquet(ws: Workspace) -> None:
    whole = _parquet_bytes(base_rows())
    (ws.root / "data.parquet").write_bytes(whole[: len(whole) // 2])
    config = base_config()
    config["source"] = {"format": "parquet", "paths": ["data.parquet"]}
    ws.config.write_text(toml_text(config))


def binary_junk(ws: Workspace) -> None:
    _source(ws, "data.csv", bytes(range(256)) * 40 + CANARY_OUT_OF_DOMAIN.encode())


def wrong_delimiter(ws: Workspace) -> None:
    _source(ws, "data.csv", csv_text(base_rows()).replace(",", ";").encode())


def out_of_domain_values(ws: Workspace) -> None:
    """PRIVATE_COUNT records hold an undeclared city: neither the value nor how many may be printed."""
    rows = PRIVATE_COUNT + 13

    def change(i: int, row: dict[str, str]) -> None:
        if i < PRIVATE_COUNT:
            row["city"] = CANARY_OUT_OF_DOMAIN

    _source(ws, "data.csv", _rows(change, rows))
    config = base_config(rows)
    ws.config.write_text(toml_text(config))


def out_of_range_number(ws: Workspace) -> None:
    schema = base_schema()
    schema["columns"][1]["out_of_range"] = "error"
    ws.schema.write_text(toml_text(schema))


def nulls_in_a_required_column(ws: Workspace) -> None:
    def change(i: int, row: dict[str, str]) -> None:
        if i % 7 == 3:
            row["city"] = ""

    _source(ws, "data.csv", _rows(change))


def text_in_a_number_column(ws: Workspace) -> None:
    def change(i: int, row: dict[str, str]) -> None:
        if i == 11:
            row["income"] = CANARY_TEXT

    _source(ws, "data.csv", _rows(change))


def declared_column_missing(ws: Workspace) -> None:
    _source(ws, "data.csv", csv_text(base_rows(), ("city", "income", "ssn")).encode())


def duplicate_header(ws: Workspace) -> None:
    rows = base_rows()
    text = "city,city,income,flag,ssn\n" + "".join(
        f"{r['city']},{CANARY_OUT_OF_DOMAIN},{r['income']},{r['flag']},{r['ssn']}\n" for r in rows
    )
    _source(ws, "data.csv", text.encode())


def row_count_differs_from_n(ws: Workspace) -> None:
    """The table has PRIVATE_COUNT records, the config declares 48: the true count must not be printed."""
    _source(ws, "data.csv", csv_text(base_rows(PRIVATE_COUNT)).encode())


def undeclared_basket_items(ws: Workspace) -> None:
    """PRIVATE_COUNT baskets hold an undeclared item: neither the item nor how many may be printed."""
    ws.schema.write_text(toml_text({"columns": [{"name": f"item{i}", "type": "binary"} for i in range(4)]}))
    baskets = [f"item3 {CANARY_OUT_OF_DOMAIN}"] * PRIVATE_COUNT + ["item0 item1", "item2"] * 10
    (ws.root / "baskets.txt").write_text("\n".join(baskets) + "\n")
    config = base_config(len(baskets))
    config["source"] = {"format": "transactions", "paths": ["baskets.txt"]}
    config["workload"] = {"kind": "all_kway", "k": 1}
    ws.config.write_text(toml_text(config))


def corrupt_duckdb_source(ws: Workspace) -> None:
    (ws.root / "source.duckdb").write_bytes(b"\0" * 8 + b"DUCK" + bytes(range(256)) * 64)
    config = base_config()
    config["source"] = {"format": "duckdb", "database": "source.duckdb", "table": "people"}
    ws.config.write_text(toml_text(config))


READ_FAILURE = r"could not be read|cannot be read|not a valid|corrupt|unreadable"
FORMAT_FIX = r"check|fix|re-?export|replace"

REFUSALS = [
    pytest.param(empty_file, r"data\.csv is empty", r"export the table again", id="empty-file"),
    pytest.param(header_only, r"row.count|no records|privacy\.n", r"privacy\.n|fix", id="header-only"),
    pytest.param(ragged_row_extra_field, READ_FAILURE, FORMAT_FIX, id="ragged-row-extra-field"),
    pytest.param(ragged_row_missing_field, READ_FAILURE, FORMAT_FIX, id="ragged-row-missing-field"),
    pytest.param(bad_encoding, READ_FAILURE + r"|UTF-8|encoding", FORMAT_FIX + r"|UTF-8", id="bad-encoding"),
    pytest.param(truncated_gzip, READ_FAILURE + r"|gzip", FORMAT_FIX, id="truncated-gzip"),
    pytest.param(corrupt_parquet, r"could not be read as parquet", r"complete Parquet file", id="corrupt-parquet"),
    pytest.param(truncated_parquet, r"could not be read as parquet", r"complete Parquet file",
                 id="truncated-parquet"),
    pytest.param(binary_junk, READ_FAILURE + r"|no column", FORMAT_FIX, id="binary-junk-as-csv"),
    pytest.param(wrong_delimiter, r"delimiter is likely wrong", r"set source.delimiter", id="wrong-delimiter"),
    pytest.param(out_of_domain_values, r"'city'", r"fix the data or the schema", id="out-of-domain-values"),
    pytest.param(out_of_range_number, r"'income'", r"fix the data or the schema|clip", id="out-of-range-number"),
    pytest.param(nulls_in_a_required_column, r"'city'", r"fix the data or the schema|nullable|missing",
                 id="nulls-in-a-required-column"),
    pytest.param(text_in_a_number_column, r"'income'", r"fix the data or the schema", id="text-in-a-number-column"),
    pytest.param(declared_column_missing, r"no column 'flag'", r"fix the schema", id="declared-column-missing"),
    pytest.param(duplicate_header, r"'city' more than once", r"rename or remove", id="duplicate-header"),
    pytest.param(row_count_differs_from_n, r"row count", r"fix privacy\.n", id="row-count-differs-from-n"),
    pytest.param(undeclared_basket_items, r"basket items|'item'", r"declare the item|fix the data or the schema",
                 id="undeclared-basket-items"),
    pytest.param(corrupt_duckdb_source, r"could not be read as duckdb", r"source\.database is a DuckDB database",
                 id="corrupt-duckdb-source"),
]


@pytest.mark.parametrize(("setup", "problem", "fix"), REFUSALS)
def test_unusable_table_is_refused_without_charge_or_leak(ws: Workspace, setup: Setup, problem: str, fix: str):
    setup(ws)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=3, problem=problem, fix=fix, ledger_before=before)
    assert charges(ws.ledger) == []


def source_is_a_directory(ws: Workspace) -> None:
    (ws.root / "folder.csv").mkdir()
    config = base_config()
    config["source"]["paths"] = ["folder.csv"]
    ws.config.write_text(toml_text(config))


def glob_matches_nothing(ws: Workspace) -> None:
    config = base_config()
    config["source"]["paths"] = ["exports/*.csv"]
    ws.config.write_text(toml_text(config))


@pytest.mark.parametrize(("setup", "problem", "fix"), [
    pytest.param(source_is_a_directory, r"folder\.csv.*directory", r"source\.paths", id="source-is-a-directory"),
    pytest.param(glob_matches_nothing, r"no file matches source path .*exports/\*\.csv", r"source\.paths",
                 id="glob-matches-nothing"),
])
def test_missing_source_files_are_a_config_error(ws: Workspace, setup: Setup, problem: str, fix: str):
    setup(ws)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=problem, fix=fix, ledger_before=before)


# ---------------------------------------------------------------------- unusual but valid tables
def utf8_bom(ws: Workspace) -> None:
    _source(ws, "data.csv", b"\xef\xbb\xbf" + csv_text(base_rows()).encode())


def crlf_line_ends(ws: Workspace) -> None:
    _source(ws, "data.csv", csv_text(base_rows(), newline="\r\n").encode())


def gzip_csv(ws: Workspace) -> None:
    _source(ws, "data.csv.gz", _gzip_bytes(csv_text(base_rows()).encode()))


def parquet_source(ws: Workspace) -> None:
    (ws.root / "data.parquet").write_bytes(_parquet_bytes(base_rows()))
    config = base_config()
    config["source"] = {"format": "parquet", "paths": ["data.parquet"]}
    ws.config.write_text(toml_text(config))


def sql_like_column_name(ws: Workspace) -> None:
    """A declared column whose name is SQL: names are bound as values, never spliced into SQL text."""
    name = "city'); drop table raw; --"
    schema = base_schema()
    schema["columns"][0]["name"] = name
    ws.schema.write_text(toml_text(schema))
    rows = base_rows()
    text = csv_text([{**r, name: r["city"]} for r in rows], (name, "income", "flag", "ssn"))
    _source(ws, "data.csv", text.encode())


def nulls_with_a_declared_missing_value(ws: Workspace) -> None:
    schema = base_schema()
    schema["columns"][0].update(values=["north", "south", "east", "unknown"], missing="unknown", nullable=True)
    ws.schema.write_text(toml_text(schema))

    def change(i: int, row: dict[str, str]) -> None:
        if i % 6 == 1:
            row["city"] = "NA"

    _source(ws, "data.csv", _rows(change), null_strings=["NA"])


RELEASES = [
    pytest.param(None, id="plain-csv-with-canaries"),
    pytest.param(utf8_bom, id="utf8-bom"),
    pytest.param(crlf_line_ends, id="crlf-line-ends"),
    pytest.param(gzip_csv, id="gzip-csv"),
    pytest.param(parquet_source, id="parquet"),
    pytest.param(sql_like_column_name, id="sql-like-column-name"),
    pytest.param(nulls_with_a_declared_missing_value, id="nulls-with-a-declared-missing-value"),
]


@pytest.mark.parametrize("setup", RELEASES)
def test_unusual_valid_table_is_released_without_leaking_its_canaries(ws: Workspace, setup: Setup | None):
    if setup is not None:
        setup(ws)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_release(ws, outcome, ledger_before=before)
    [charge] = charges(ws.ledger)
    assert charge["epsilon"] == pytest.approx(1.0)


def test_private_n_is_never_printed(ws: Workspace):
    """n = "noisy" (add/remove neighbours): the table's PRIVATE_COUNT records are a private count."""
    ws.write(rows=base_rows(PRIVATE_COUNT))
    config = base_config()
    config["privacy"] = {"neighbouring": "add-remove", "n": "noisy", "n_epsilon": 0.2, "epsilon": 1.0,
                         "delta": 1e-6}
    config["mechanism"] = {"name": "dualquery", "eta": 1.0, "samples": 20, "oracle": {"kind": "local"}}
    config["output"]["rows"] = 200
    ws.config.write_text(toml_text(config))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_release(ws, outcome, ledger_before=before, charged=2)
