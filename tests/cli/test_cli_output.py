"""The CLI's output as an operator sees it: one-line refusals, unwrapped paths, the budget table, help, imports.

Commands that must not start a run are driven in a fresh interpreter (``python -m dqrelease.cli``), so what
they import and print is exactly what a user's shell gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.errors import ExitCode
from dqrelease.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
HEAVY = ("prefect", "great_expectations", "dask", "distributed")
"""Modules a refusal or a plan must not import (they cost seconds and are needed only by a run)."""


def _cli(*args: str, columns: int = 40, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``dqrelease ARGS`` in a new interpreter, stdout and stderr captured (not terminals)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", *args], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=120, check=False,
    )


def _config_with_plan_error(tmp_path: Path) -> Path:
    """The Adult example with a mechanism setting its plan refuses (rows_per_round > 1 with zero-filled free
    attributes), paths made absolute."""
    text = (ADULT / "release.toml").read_text()
    text = text.replace('schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    assert text.count('name = "dualquery"') == 1
    text = text.replace('name = "dualquery"', 'name = "dualquery"\nfree_policy = "zero"\nrows_per_round = 2')
    path = tmp_path / "release.toml"
    path.write_text(text)
    return path


def _heavy_modules_after(*args: str) -> tuple[int, list[str]]:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from dqrelease.cli import app\n"
        f"result = CliRunner().invoke(app, {list(args)!r})\n"
        f"print(result.exit_code, *[m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    code_text, *modules = done.stdout.split()
    return int(code_text), modules


# ---------------------------------------------------------------------- import boundary
def test_loading_and_planning_a_config_imports_no_prefect_gx_or_dask():
    exit_code, modules = _heavy_modules_after("plan", str(ADULT / "release.toml"))
    assert exit_code == ExitCode.OK
    assert modules == []


def test_a_run_refused_at_plan_time_imports_no_prefect_gx_or_dask(tmp_path: Path):
    exit_code, modules = _heavy_modules_after("run", str(_config_with_plan_error(tmp_path)))
    assert exit_code == ExitCode.INVALID_CONFIG
    assert modules == []


def test_a_run_whose_source_file_is_missing_is_refused_before_prefect(tmp_path: Path):
    text = (ADULT / "release.toml").read_text()
    config = tmp_path / "release.toml"  # its data/adult.data is not in tmp_path
    config.write_text(text.replace('schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"'))
    exit_code, modules = _heavy_modules_after("run", str(config))
    assert exit_code == ExitCode.INVALID_CONFIG
    assert modules == []


# ---------------------------------------------------------------------- refusals: one line on stderr
def test_a_missing_config_is_one_line_on_stderr_with_exit_code_2(tmp_path: Path):
    missing = tmp_path / "nowhere.toml"
    result = _cli("run", str(missing))
    assert result.returncode == ExitCode.INVALID_CONFIG
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {missing}: config file not found; check the path"]


def test_a_plan_error_of_run_is_one_line_on_stderr_with_exit_code_2(tmp_path: Path):
    result = _cli("run", str(_config_with_plan_error(tmp_path)))
    assert result.returncode == ExitCode.INVALID_CONFIG
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "rows_per_round" in line
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- paths are never wrapped
def test_long_paths_are_printed_whole_on_a_40_column_pipe(tmp_path: Path):
    deep = tmp_path / ("a-directory-name-longer-than-the-forty-columns-of-this-terminal" * 2) / "ledger.duckdb"
    Ledger(deep).spent("adult")  # an empty ledger (showing a missing one is refused, not created)
    shown = _cli("budget", "show", "--ledger", str(deep), columns=40)
    assert shown.returncode == ExitCode.OK, shown.stderr
    assert shown.stdout.splitlines() == [f"ledger {deep} has no cap or charge for any dataset"]

    missing = deep.parent / "release.toml"
    refused = _cli("plan", str(missing), columns=40)
    assert refused.returncode == ExitCode.INVALID_CONFIG
    assert refused.stderr.splitlines() == [f"error: {missing}: config file not found; check the path"]


# ---------------------------------------------------------------------- budget show
@pytest.fixture()
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.set_cap("adult", epsilon=1, delta=1e-6)
    for run, epsilon in (("run-1", 0.1), ("run-2", 0.2)):
        ledger.charge("adult", epsilon=epsilon, delta=1e-9, rho=None, mode="paper", mechanism="dualquery",
                      config_hash="c0ffee", run_id=run)
    ledger.set_cap("census", epsilon=2, delta=1e-5, rho=0.5)
    return ledger


def _rows(output: str) -> list[list[str]]:
    """The cells of a rich table's body rows (box-drawing borders removed)."""
    rows = []
    for line in output.splitlines():
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_budget_show_prints_cap_spent_and_remaining_as_plain_decimals(ledger: Ledger):
    result = CliRunner().invoke(app, ["budget", "show", "--ledger", str(ledger.path)])
    assert result.exit_code == ExitCode.OK, result.output
    assert _rows(result.output) == [
        # 0.1 + 0.2 are added exactly at their binary values; shown rounded to 6 significant digits
        ["adult", "2", "epsilon", "1", "0.3", "0.7"],
        ["", "", "delta", "1e-6", "2e-9", "9.98e-7"],
        ["census", "0", "epsilon", "2", "0", "2"],
        ["", "", "delta", "1e-5", "0", "1e-5"],
        ["", "", "rho", "0.5", "0", "0.5"],
    ]
    assert "/" not in result.output  # no exact fractions in the table


def test_budget_show_of_one_dataset_lists_its_charges(ledger: Ledger):
    result = CliRunner().invoke(app, ["budget", "show", "adult", "--ledger", str(ledger.path)])
    assert result.exit_code == ExitCode.OK, result.output
    charges = [row for row in _rows(result.output) if row[0] in ("1", "2")]
    assert [(row[0], row[2], row[5]) for row in charges] == [("1", "run-1", "0.1"), ("2", "run-2", "0.2")]


def test_budget_show_json_gives_machines_the_exact_amounts(ledger: Ledger):
    result = CliRunner().invoke(app, ["budget", "show", "--ledger", str(ledger.path), "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    rows = json.loads(result.output)
    assert rows == json.loads(json.dumps(ledger.show(), default=str))
    [adult] = [row for row in rows if row["dataset_id"] == "adult"]
    assert Fraction(adult["spent"]["exact"]["epsilon"]) == Fraction(0.1) + Fraction(0.2)
    assert len(adult["charges"]) == 2


# ---------------------------------------------------------------------- help
@pytest.mark.parametrize("command", [[], ["run"], ["budget", "show"], ["server", "start"]])
def test_help_shows_no_value_type_on_flags(command: list[str]):
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "--help" in result.output
    assert "<bool>" not in result.output
