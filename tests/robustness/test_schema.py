"""Abuse corpus, schema file: empty and overlapping domains, huge domains, type mismatches, duplicate names,
bad edges. Each is refused with exit 2 before the data is read (no ledger file is created), with one line naming
the column and the fix.
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
    base_schema,
    expect_refusal,
    ledger_state,
    run_cli,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")

Change = Callable[[dict[str, Any]], None]


def _column(column_name: str, /, **keys: Any) -> Change:
    def change(schema: dict[str, Any]) -> None:
        [column] = [c for c in schema["columns"] if c["name"] == column_name]
        for key, value in keys.items():
            if value is None:
                column.pop(key, None)
            else:
                column[key] = value

    return change


def _add(**column: Any) -> Change:
    def change(schema: dict[str, Any]) -> None:
        schema["columns"].append(column)

    return change


def _replace(document: dict[str, Any]) -> Change:
    def change(schema: dict[str, Any]) -> None:
        schema.clear()
        schema.update(document)

    return change


def _wide_binary(count: int) -> Change:
    def change(schema: dict[str, Any]) -> None:
        schema["columns"] += [{"name": f"b{i:02d}", "type": "binary"} for i in range(count)]

    return change


SCHEMA_CASES = [
    # ------------------------------------------------------------------ empty or overlapping domains
    pytest.param(_column("city", values=[]), r"column 'city'.*empty value list", r"fill them with the public value",
                 id="empty-value-set"),
    pytest.param(_column("city", values=["north", "north", "east"]), r"city", r"distinct",
                 id="overlapping-values"),
    pytest.param(_column("city", aliases={"north": "south"}), r"city", r"remove them from aliases",
                 id="alias-shadows-a-value"),
    pytest.param(_column("income", edges=[0, 100, 100, 1000]), r"income", r"strictly increasing",
                 id="overlapping-buckets"),
    pytest.param(_column("income", edges=[1000, 100, 0]), r"income", r"strictly increasing",
                 id="decreasing-edges"),
    pytest.param(_column("income", edges=[0]), r"column 'income'.*edges", r"at least 2", id="single-edge"),
    pytest.param(_column("income", edges=[0, math.inf]), r"income", r"finite", id="infinite-edge"),
    pytest.param(_column("income", edges=[0, math.nan, 10]), r"income", r"finite", id="nan-edge"),
    pytest.param(_column("income", edges=[0, 10.5, 1000]), r"income", r"whole-number", id="fractional-integer-edge"),
    pytest.param(_replace({"columns": []}), r"columns", r"at least 1", id="no-columns"),
    # ------------------------------------------------------------------ type mismatches
    pytest.param(_column("income", edges=["low", "high"]), r"column 'income'.*edges", r"number",
                 id="edges-not-numbers"),
    pytest.param(_column("income", type="datetime"), r"income", r"categorical|integer|binary",
                 id="unknown-column-type"),
    pytest.param(_column("city", type="integer"), all_of(r"city", r"edges"), r"required|remove|known key",
                 id="categorical-declared-integer"),
    pytest.param(_column("flag", values=["0", "1"]), r"flag.*values", r"remove it|spelling",
                 id="key-of-another-type"),
    pytest.param(_replace({"columns": 3}), r"columns", r"list|array", id="columns-not-a-list"),
    # ------------------------------------------------------------------ names, keys, missing values
    pytest.param(_add(name="city", type="binary"), r"city", r"unique", id="duplicate-column-names"),
    pytest.param(_column("income", edges=None, edge=[0, 100]), all_of(r"column 'income'", r"edges", r"\bedge\b"),
                 r"required|remove it", id="typo-names-the-column-and-every-error"),
    pytest.param(_column("city", missing="west", nullable=True), r"city", r"must be one of values",
                 id="missing-value-not-declared"),
    pytest.param(_column("city", name=""), r"name", r"at least 1", id="empty-column-name"),
    # ------------------------------------------------------------------ huge domains
    pytest.param(_wide_binary(30), r"2\^3\d", r"mwem-particles|dualquery|coarsen", id="domain-too-large-for-mwem"),
]


@pytest.mark.parametrize(("change", "problem", "fix"), SCHEMA_CASES)
def test_invalid_schema_is_refused_before_the_data_is_read(ws: Workspace, change: Change, problem: str, fix: str):
    schema = base_schema()
    change(schema)
    ws.schema.write_text(toml_text(schema))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=problem, fix=fix, ledger_before=before)
    assert not ws.ledger.exists(), "the ledger was created for a schema that was refused"


def test_huge_domain_workload_is_refused_at_plan_time(ws: Workspace):
    """Five columns of 1,000 values each: the 5-way marginal alone has 10^15 cells."""
    schema = {"columns": [
        {"name": f"c{j}", "type": "categorical", "values": [f"v{i}" for i in range(1000)]} for j in range(5)
    ]}
    ws.schema.write_text(toml_text(schema))
    config = base_config()
    config["workload"] = {"kind": "all_kway", "k": 5}
    ws.config.write_text(toml_text(config))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=r"workload.*queries", fix=r"random_queries|fewer", ledger_before=before)
    assert not ws.ledger.exists()
