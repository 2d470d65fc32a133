"""Abuse corpus, release config: wrong types and ranges, unknown keys, missing sections, unusable paths, names
that try SQL, binary and oversized files. Every case is refused with exit 2 before the data is read (the ledger
file is never created), with one line that names the key and the fix, and nothing written under ``out/``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from tests.robustness.abuse_harness import (
    Workspace,
    all_of,
    base_config,
    expect_refusal,
    ledger_state,
    run_cli,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")

Change = Callable[[dict[str, Any], Workspace], None]


def _set(section: str | None, key: str, value: Any) -> Change:
    def change(config: dict[str, Any], ws: Workspace) -> None:
        (config if section is None else config.setdefault(section, {}))[key] = value

    return change


def _drop(*sections: str) -> Change:
    def change(config: dict[str, Any], ws: Workspace) -> None:
        for section in sections:
            del config[section]

    return change


def _several(*changes: Change) -> Change:
    def change(config: dict[str, Any], ws: Workspace) -> None:
        for one in changes:
            one(config, ws)

    return change


def _duckdb_source(table: str) -> Change:
    def change(config: dict[str, Any], ws: Workspace) -> None:
        config["source"] = {"format": "duckdb", "database": "source.duckdb", "table": table}

    return change


CONFIG_CASES = [
    # ------------------------------------------------------------------ types and ranges
    pytest.param(_set("privacy", "epsilon", math.inf), r"privacy\.epsilon", r"finite|at most|<=|less than",
                 id="epsilon-inf"),
    pytest.param(_set("privacy", "epsilon", 1e9), r"privacy\.epsilon", r"at most|<=|less than|lower",
                 id="epsilon-1e9"),
    pytest.param(_set("privacy", "epsilon", -1.0), r"privacy\.epsilon", r"greater than 0|> ?0|positive",
                 id="epsilon-negative"),
    pytest.param(_set("privacy", "epsilon", "one"), r"privacy\.epsilon", r"number", id="epsilon-not-a-number"),
    pytest.param(_set("privacy", "delta", 1.0), r"privacy\.delta", r"less than 1|< ?1", id="delta-one"),
    pytest.param(_set("privacy", "delta", math.nan), r"privacy\.delta", r"finite|number|less than|greater than",
                 id="delta-nan"),
    pytest.param(_set("privacy", "n", 0), r"privacy\.n", r"positive", id="n-zero"),
    pytest.param(_set("privacy", "n", 48.5), r"privacy\.n", r"integer|whole|noisy", id="n-fractional"),
    pytest.param(_set("mechanism", "rounds", 10**12), r"mechanism\.rounds", r"less than or equal|at most|<=",
                 id="rounds-absurd"),
    pytest.param(_set("output", "rows", 10**13), r"output\.rows", r"less than or equal|at most|<=",
                 id="output-rows-absurd"),
    pytest.param(_set("workload", "k", 9), r"workload\.k", r"less than or equal|at most|<=", id="workload-k-9"),
    pytest.param(_set("output", "formats", ["xlsx"]), r"output\.formats", r"parquet", id="output-format-unknown"),
    # ------------------------------------------------------------------ wrong TOML types: refused, never coerced
    pytest.param(_set("privacy", "n", "1000"), r"privacy\.n must be an integer or 'noisy', not a string",
                 r"whole number without quotes", id="n-as-string"),
    pytest.param(_set("privacy", "n", 1000.0), r"privacy\.n must be an integer", r"whole number", id="n-as-float"),
    pytest.param(_set("privacy", "epsilon", True), r"privacy\.epsilon must be a number, not true/false",
                 r"write a number", id="epsilon-as-bool"),
    pytest.param(_set("privacy", "epsilon", "1.0"), r"privacy\.epsilon must be a number, not a string",
                 r"without quotes", id="epsilon-as-string"),
    pytest.param(_set("mechanism", "rounds", 3.0), r"mechanism\.rounds must be an integer, not a decimal",
                 r"whole number", id="rounds-as-float"),
    pytest.param(_set("run", "seed", "4242"), r"run\.seed must be an integer, not a string", r"without quotes",
                 id="seed-as-string"),
    pytest.param(_set("source", "header", "true"), r"source\.header must be true or false, not a string",
                 r"without quotes", id="header-as-string"),
    pytest.param(_set(None, "schema_file", 3), r"schema_file must be a quoted path", r"put the path in quotes",
                 id="schema-file-as-number"),
    # ------------------------------------------------------------------ keys and sections
    pytest.param(_set(None, "epsilonn", 1.0), r"epsilonn", r"remove it|spelling", id="unknown-top-level-key"),
    pytest.param(_set("privacy", "epslion", 1.0), r"privacy\.epslion", r"remove it|spelling",
                 id="unknown-key-in-section"),
    pytest.param(_set("mechanism", "eta", 1.0), r"mechanism\.eta", r"remove it", id="key-of-another-mechanism"),
    pytest.param(_set("mechanism", "name", "magic"), r"mechanism", r"mwem|dualquery", id="unknown-mechanism"),
    pytest.param(_drop("privacy", "ledger"), all_of(r"\[privacy\]", r"\[ledger\]", r"required"),
                 r"add them \(docs/config\.md\)", id="missing-sections-both-named"),
    pytest.param(
        _several(_set("privacy", "epsilon", -1.0), _set("output", "formats", ["xlsx"]),
                 _set("ledger", "dataset_id", ""), _set("workload", "k", 9)),
        all_of(r"privacy\.epsilon", r"output\.formats", r"ledger\.dataset_id", r"workload\.k"), r"4 problems",
        id="every-error-listed",
    ),
    pytest.param(_several(_set("run", "seed_mode", "secure")), r"run\.seed|seed", r"seed_mode",
                 id="seed-without-seeded-mode"),
    # ------------------------------------------------------------------ names that try SQL
    pytest.param(_set(None, "name", "x'; drop table ledger_charges; --"), r"\bname\b", r"pattern|letters",
                 id="release-name-sql"),
    pytest.param(_set("ledger", "dataset_id", "abuse; drop table ledger_charges"), r"ledger\.dataset_id",
                 r"pattern|letters", id="dataset-id-sql"),
    pytest.param(_duckdb_source("t; drop table raw"), r"source", r"plain identifier", id="source-table-sql"),
    pytest.param(_set(None, "name", "abuse\u0000x"), r"\bname\b", r"pattern|letters", id="release-name-nul"),
    # ------------------------------------------------------------------ paths outside the project
    pytest.param(_set(None, "schema_file", "../../../../../../etc/hostname"), r"hostname", r"TOML|fix",
                 id="schema-path-outside-not-toml"),
    pytest.param(_set(None, "schema_file", "/nonexistent/schema.toml"), r"schema\.toml.*not found",
                 r"check the path", id="schema-path-missing"),
    pytest.param(_set("output", "directory", "/proc/dqrelease-out"), r"dqrelease-out",
                 r"output\.directory", id="output-directory-unwritable"),
    pytest.param(_set("source", "paths", ["/nonexistent/data.csv"]), r"data\.csv.*does not exist",
                 r"source\.paths", id="source-path-missing"),
]


@pytest.mark.parametrize(("change", "problem", "fix"), CONFIG_CASES)
def test_invalid_config_is_refused_before_the_data_is_read(ws: Workspace, change: Change, problem: str, fix: str):
    config = base_config()
    change(config, ws)
    ws.config.write_text(toml_text(config))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=problem, fix=fix, ledger_before=before)
    assert not ws.ledger.exists(), "the ledger was created for a config that was refused"


RAW_CASES = [
    pytest.param(bytes(range(256)) * 8, r"not UTF-8", r"save it as a UTF-8", id="binary-file"),
    pytest.param(b'name = "x"\n[privacy\nn = 3', r"not valid TOML", r"fix the syntax", id="toml-syntax"),
    pytest.param(b"", all_of(r"\bname\b", r"schema_file", r"source", r"privacy", r"ledger", r"output", r"required"),
                 r"add them \(docs/config\.md\)", id="empty-file-lists-every-required-key"),
    pytest.param(b"# padding\n" * 1_000_000, r"larger than the 8 MB limit",
                 r"give the release's config TOML file", id="oversized-file"),
    pytest.param(b"\xef\xbb\xbf" + toml_text({"name": 3}).encode(), all_of(r"\bname\b", r"string|str"),
                 r"required|string", id="bom-then-wrong-type"),
]


@pytest.mark.parametrize(("content", "problem", "fix"), RAW_CASES)
def test_unreadable_config_file_is_refused(ws: Workspace, content: bytes, problem: str, fix: str):
    ws.config.write_bytes(content)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=problem, fix=fix, ledger_before=before)
    assert not ws.ledger.exists()


def test_integer_for_a_float_key_stays_accepted(ws: Workspace):
    """TOML writes ``epsilon = 1`` as an integer: strict validation still takes it as the number 1.0."""
    from dqrelease.inputs.config import load_config

    config = base_config()
    config["privacy"]["epsilon"] = 1
    config["privacy"]["delta"] = 1e-6
    ws.config.write_text(toml_text(config))
    assert '"epsilon" = 1\n' in ws.config.read_text()
    loaded = load_config(ws.config)
    assert loaded.privacy.epsilon == 1.0 and isinstance(loaded.privacy.epsilon, float)


def test_config_path_that_is_a_directory_is_refused(ws: Workspace):
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.root), "--quiet")
    expect_refusal(ws, outcome, code=2, problem=r"is a directory", fix=r"give the TOML file", ledger_before=before)


def test_missing_config_file_is_refused(ws: Workspace):
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.root / "missing.toml"), "--quiet")
    expect_refusal(ws, outcome, code=2, problem=r"missing\.toml.*not found", fix=r"check the path",
                   ledger_before=before)


def test_plan_refuses_an_invalid_config_the_same_way(ws: Workspace):
    config = base_config()
    config["privacy"]["epsilon"] = math.inf
    ws.config.write_text(toml_text(config))
    outcome = run_cli(ws, "plan", str(ws.config))
    expect_refusal(ws, outcome, code=2, problem=r"privacy\.epsilon", fix=r"finite|at most|<=|less than",
                   ledger_before={})


def test_release_no_better_than_publishing_zeros_is_refused(ws: Workspace):
    """20 records at epsilon = 1: the utility forecast says MWEM cannot beat an all-zeros table."""
    from tests.robustness.abuse_harness import base_rows

    ws.write(config=base_config(20), rows=base_rows(20))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=r"low utility", fix=r"accept-low-utility|privacy\.epsilon",
                   ledger_before=before)
    assert not ws.ledger.exists()
