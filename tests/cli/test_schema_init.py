"""``dqrelease schema init``: a schema skeleton from the source's header, never from its values.

Each source plants a distinctive value in its data rows; the skeleton must not contain it. The skeleton is refused by
``plan`` (naming the columns) until its lists are filled.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.errors import ConfigInvalidError, ExitCode
from dqrelease.inputs.schema import load_schema

PLANTED = ("QZXV-9731-planted", "48213.77")
"""Values of the data rows that must never reach the skeleton."""

HEADER = ("age", "work class", "zip")

CONFIG = """\
name = "scaffold-test"
schema_file = "schema.toml"

[source]
{source}

[privacy]
n = 1000
epsilon = 1.0
delta = 1e-9

[workload]
kind = "all_kway"
k = 1

[ledger]
path = "ledger.duckdb"
dataset_id = "scaffold-test"
initial_cap_epsilon = 10.0
initial_cap_delta = 1e-6

[output]
directory = "out"
"""


def _config(folder: Path, source: str) -> Path:
    path = folder / "release.toml"
    path.write_text(CONFIG.format(source=source))
    return path


def _csv_source(folder: Path, *, delimiter: str = ",") -> Path:
    rows = [delimiter.join(HEADER), delimiter.join(["37", PLANTED[0], PLANTED[1]]), delimiter.join(["52", "x", "y"])]
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    return _config(folder, f'format = "csv"\npaths = ["data.csv"]\ndelimiter = "{delimiter}"')


def _parquet_source(folder: Path) -> Path:
    con = duckdb.connect()
    con.execute(
        "copy (select 37 as age, $1 as \"work class\", $2::double as zip) to '" + str(folder / "data.parquet") + "'",
        [PLANTED[0], PLANTED[1]],
    )
    con.close()
    return _config(folder, 'format = "parquet"\npaths = ["data.parquet"]')


def _duckdb_source(folder: Path) -> Path:
    con = duckdb.connect(str(folder / "source.duckdb"))
    con.execute("create table people (age integer, \"work class\" varchar, zip double)")
    con.execute("insert into people values (37, $1, $2)", [PLANTED[0], float(PLANTED[1])])
    con.close()
    return _config(folder, 'format = "duckdb"\ndatabase = "source.duckdb"\ntable = "people"')


def _init(*args: str):
    return CliRunner().invoke(app, ["schema", "init", *args])


def _column_types(skeleton: dict) -> list[tuple[str, str, list]]:
    return [(c["name"], c["type"], c["values"]) for c in skeleton["columns"]]


@pytest.mark.parametrize("delimiter", [",", ";"])
def test_schema_init_writes_every_csv_header_column_with_a_type_to_confirm(tmp_path: Path, delimiter: str):
    config = _csv_source(tmp_path, delimiter=delimiter)
    result = _init(str(config))
    assert result.exit_code == ExitCode.OK, result.output
    text = (tmp_path / "schema.toml").read_text()
    assert _column_types(tomllib.loads(text)) == [(name, "categorical", []) for name in HEADER]
    assert len(re.findall(r'^type = "categorical"  # confirm', text, flags=re.MULTILINE)) == len(HEADER)
    assert f"{len(HEADER)} columns" in result.stdout


def test_schema_init_reads_the_parquet_schema_with_stored_types_as_comments(tmp_path: Path):
    result = _init(str(_parquet_source(tmp_path)))
    assert result.exit_code == ExitCode.OK, result.output
    text = (tmp_path / "schema.toml").read_text()
    assert _column_types(tomllib.loads(text)) == [(name, "categorical", []) for name in HEADER]
    assert 'name = "zip"  # stored as DOUBLE in the source' in text


def test_schema_init_reads_a_duckdb_tables_columns(tmp_path: Path):
    result = _init(str(_duckdb_source(tmp_path)))
    assert result.exit_code == ExitCode.OK, result.output
    skeleton = tomllib.loads((tmp_path / "schema.toml").read_text())
    assert [c["name"] for c in skeleton["columns"]] == list(HEADER)


@pytest.mark.parametrize("make_source", [_csv_source, _parquet_source, _duckdb_source])
def test_no_value_of_the_data_appears_in_the_skeleton_or_the_output(tmp_path: Path, make_source):
    result = _init(str(make_source(tmp_path)))
    assert result.exit_code == ExitCode.OK, result.output
    written = (tmp_path / "schema.toml").read_text() + result.output
    for value in (*PLANTED, "9731", "48213"):
        assert value not in written


def test_schema_init_refuses_to_overwrite_a_file_unless_forced(tmp_path: Path):
    config = _csv_source(tmp_path)
    (tmp_path / "schema.toml").write_text("# my filled-in schema\n")
    refused = _init(str(config))
    assert refused.exit_code == ExitCode.INVALID_CONFIG
    assert refused.stderr.splitlines() == [
        f"error: {tmp_path / 'schema.toml'} already exists; give --force to overwrite it, or --output PATH to write "
        "the skeleton elsewhere"
    ]
    assert (tmp_path / "schema.toml").read_text() == "# my filled-in schema\n"
    assert _init(str(config), "--force").exit_code == ExitCode.OK
    assert "schema init" in (tmp_path / "schema.toml").read_text()


def test_schema_init_writes_to_output_and_needs_only_schema_file_and_source(tmp_path: Path):
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    config = tmp_path / "partial.toml"
    config.write_text('schema_file = "schema.toml"\n[source]\nformat = "csv"\npaths = ["data.csv"]\n')
    result = _init(str(config), "--output", str(tmp_path / "draft.toml"))
    assert result.exit_code == ExitCode.OK, result.output
    assert [c["name"] for c in tomllib.loads((tmp_path / "draft.toml").read_text())["columns"]] == ["a", "b"]
    assert not (tmp_path / "schema.toml").exists()


def test_a_header_less_csv_without_column_names_is_refused_before_reading(tmp_path: Path):
    (tmp_path / "data.csv").write_text(f"37,{PLANTED[0]}\n")
    config = _config(tmp_path, 'format = "csv"\npaths = ["data.csv"]\nheader = false')
    result = _init(str(config))
    assert result.exit_code == ExitCode.INVALID_CONFIG
    assert "give source.column_names" in result.stderr
    assert PLANTED[0] not in result.output
    named = _config(tmp_path, 'format = "csv"\npaths = ["data.csv"]\nheader = false\ncolumn_names = ["age", "w"]')
    assert _init(str(named)).exit_code == ExitCode.OK
    assert [c["name"] for c in tomllib.loads((tmp_path / "schema.toml").read_text())["columns"]] == ["age", "w"]


def test_plan_refuses_the_unfilled_skeleton_naming_its_columns(tmp_path: Path):
    config = _csv_source(tmp_path)
    assert _init(str(config)).exit_code == ExitCode.OK
    result = CliRunner().invoke(app, ["plan", str(config)])
    assert result.exit_code == ExitCode.INVALID_CONFIG
    [line] = result.stderr.splitlines()
    assert "columns 'age', 'work class', 'zip' still have an empty value list or edge list" in line
    assert "docs/schema.md, 'Public value sets and bucket edges'" in line


def test_run_refuses_the_unfilled_skeleton_before_reading_or_charging(tmp_path: Path):
    config = _csv_source(tmp_path)
    assert _init(str(config)).exit_code == ExitCode.OK
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "run", str(config)], capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert result.returncode == ExitCode.INVALID_CONFIG, result.stderr
    [line] = result.stderr.splitlines()
    assert "still have an empty value list or edge list" in line
    assert not (tmp_path / "ledger.duckdb").exists() and not (tmp_path / "out").exists()


def test_a_partly_filled_skeleton_is_refused_naming_the_column_left(tmp_path: Path):
    config = _csv_source(tmp_path)
    assert _init(str(config)).exit_code == ExitCode.OK
    path = tmp_path / "schema.toml"
    _fill(path, keep_empty="zip")
    with pytest.raises(ConfigInvalidError, match=re.escape("column 'zip' still has an empty value list")):
        load_schema(path)


def test_a_filled_in_skeleton_loads(tmp_path: Path):
    config = _csv_source(tmp_path)
    assert _init(str(config)).exit_code == ExitCode.OK
    path = tmp_path / "schema.toml"
    _fill(path)
    schema = load_schema(path)
    assert [(c.name, c.type) for c in schema.columns] == [
        ("age", "integer"), ("work class", "categorical"), ("zip", "categorical")
    ]


def _fill(path: Path, *, keep_empty: str | None = None) -> None:
    """Fill the skeleton as an operator would from a codebook: age becomes an integer with edges."""
    blocks = path.read_text().split("\n[[columns]]\n")
    filled = [blocks[0]]
    for block in blocks[1:]:
        name = tomllib.loads(block)["name"]
        if name == keep_empty:
            pass
        elif name == "age":
            block = block.replace('type = "categorical"', 'type = "integer"').replace(
                "values = []", "edges = [0, 18, 65, 120]"
            )
        else:
            block = block.replace("values = []", 'values = ["A", "B", "?"]')
        filled.append(block)
    path.write_text("\n[[columns]]\n".join(filled))
