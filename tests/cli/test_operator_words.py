"""What an operator reads: whole help texts with one naming convention, and the budget commands' words and numbers."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.cli.app import HelpConventions
from dqrelease.cli.budget import DEFAULT_LEDGER
from dqrelease.errors import ExitCode
from dqrelease.inputs.config import load_config
from dqrelease.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^[A-Z][A-Z_]*$")
"""A value's name in help: upper case (CONFIG, MANIFEST, PATH, PORT)."""


# ---------------------------------------------------------------------- help
def _commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command and group under ``group`` with its path of names (the root's path is empty)."""
    found = [(path, group)]
    for name, command in getattr(group, "commands", {}).items():
        found += _commands(command, (*path, name))
    return found


COMMANDS = _commands(typer.main.get_command(app))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def _first_sentence(text: str) -> str:
    return " ".join(text.split("\n\n")[0].split()).split(". ")[0].rstrip(".")


def test_the_cli_has_the_commands_this_test_walks():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"run", "plan", "verify", "serve", "budget show", "budget set-cap", "server start"} <= names


@pytest.mark.parametrize(("path", "command"), [c for c in COMMANDS if hasattr(c[1], "commands")],
                         ids=lambda value: " ".join(value) or "dqrelease" if isinstance(value, tuple) else None)
def test_command_lists_show_every_first_sentence_whole(path: tuple[str, ...], command: click.Command):
    text = _help(path)
    listing = " ".join(text.split("Commands:")[1].split("\n\n")[0].split())
    assert "..." not in listing, listing
    for sub in command.commands.values():
        assert _first_sentence(sub.help) in listing, (sub.name, listing)


@pytest.mark.parametrize(("path", "command"), [c for c in COMMANDS if not hasattr(c[1], "commands")],
                         ids=lambda value: " ".join(value) if isinstance(value, tuple) else None)
def test_every_command_names_its_values_in_upper_case(path: tuple[str, ...], command: click.Command):
    assert isinstance(command, HelpConventions), f"give @...command(cls=HelpConventions) to {' '.join(path)}"
    text = _help(path)
    usage = text.split("\n")[0]
    pieces = usage.split(" ".join(path), 1)[1].split()
    assert pieces[0] == "[OPTIONS]", usage
    for piece in pieces[1:]:
        assert NAME.match(piece.strip("[]")), usage
    assert not re.search(r"[{}]|<[a-z]+>", text), text  # typer's {CONFIG}, config <path>, --port <int>
    for param in command.params:
        if getattr(param, "is_flag", False):  # typer's options are not click.Option
            continue
        assert param.metavar is not None and NAME.match(param.metavar), (param.name, param.metavar)
        shown = param.metavar if param.param_type_name == "argument" else f"{param.opts[0]} {param.metavar}"
        assert shown in text, (shown, text)


# ---------------------------------------------------------------------- budget show and set-cap
def test_the_default_ledger_is_the_one_the_examples_use():
    for config in sorted((ROOT / "examples").glob("*/release*.toml")):
        assert load_config(config).ledger.path == ROOT / DEFAULT_LEDGER, config


@pytest.fixture()
def example_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder laid out as the repository after the README's run: its default ledger with a charge; cwd there."""
    ledger = Ledger(tmp_path / DEFAULT_LEDGER)
    ledger.set_cap("uci-adult", epsilon=10, delta=1e-6)
    ledger.charge("uci-adult", epsilon=0.9973052900622135, delta=1e-9, rho=None, mode="tight",
                  mechanism="dualquery", config_hash="c0ffee", run_id="run-1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_budget_show_without_flags_reads_the_default_ledger(example_folder: Path):
    result = CliRunner().invoke(app, ["budget", "show"])
    assert result.exit_code == ExitCode.OK, result.output
    assert f"ledger {DEFAULT_LEDGER}" in result.output
    assert "uci-adult" in result.output and "0.997305" in result.output and "1e-6" in result.output
    assert "/" not in result.output.replace(str(DEFAULT_LEDGER), "")  # decimals, no fractions


def test_budget_show_json_has_decimals_and_the_exact_fraction_apart(example_folder: Path):
    result = CliRunner().invoke(app, ["budget", "show", "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    assert '"delta": 1e-06' in result.output  # the cap's δ as people write it
    [budget] = json.loads(result.output)
    assert budget["cap"]["delta"] == 1e-6 and budget["spent"]["epsilon"] == 0.9973052900622135
    assert Fraction(budget["cap"]["exact"]["delta"]) == Fraction(1e-6)  # the ledger's exact value, under 'exact'


def test_budget_show_without_flags_and_without_the_default_ledger_says_so_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["budget", "show"])
    assert result.exit_code == ExitCode.INVALID_CONFIG
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert f"no ledger at {DEFAULT_LEDGER}" in lines[0] and "give --ledger PATH, or --config CONFIG" in lines[0]
    assert not (tmp_path / DEFAULT_LEDGER).exists()


def test_budget_show_of_a_missing_ledger_creates_nothing(tmp_path: Path):
    missing = tmp_path / "typo" / "ledger.duckdb"
    result = CliRunner().invoke(app, ["budget", "show", "--ledger", str(missing)])
    assert result.exit_code == ExitCode.INVALID_CONFIG
    assert f"no ledger at {missing}; check the path" in result.output
    assert not missing.parent.exists()


def test_set_cap_below_what_was_spent_is_refused_naming_spent_the_cap_and_the_fix(example_folder: Path):
    result = CliRunner().invoke(app, ["budget", "set-cap", "uci-adult", "--epsilon", "0.005", "--delta", "1e-6"])
    assert result.exit_code == ExitCode.INVALID_CONFIG
    line = " ".join(result.output.split())
    assert ("cap refused for dataset 'uci-adult': the requested cap (epsilon=0.005) is below what its 1 charge(s) "
            "already spent (epsilon=0.9973052900622135)") in line
    assert "give at least --epsilon 0.9973052900622135" in line
    assert Ledger(example_folder / DEFAULT_LEDGER).cap("uci-adult").epsilon == 10
    shown = CliRunner().invoke(app, ["budget", "show"])
    assert "-0." not in shown.output  # no negative remaining budget


def test_budget_show_of_a_misspelt_dataset_suggests_the_known_one(example_folder: Path):
    result = CliRunner().invoke(app, ["budget", "show", "uci-adlt"])
    assert result.exit_code == ExitCode.OK, result.output
    assert "has no cap or charge for dataset 'uci-adlt'; did you mean 'uci-adult'?" in result.output
