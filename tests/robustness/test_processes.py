"""Abuse corpus across the process boundary: what an operator's terminal shows for each kind of refusal.

The other modules run the CLI in-process, where the stderr checked is what the CLI itself prints. Here one case
per exit code (and per place a refusal can come from: before Prefect starts, inside the flow, inside a task,
in ``verify``) runs as a real ``dqrelease`` process with Prefect's user defaults, all at once
(``fork_runs.py``), and its *whole* stderr must be the one line: no Prefect log lines or tracebacks, no
warnings of third-party libraries at exit. A successful run is included: no traceback, no warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.robustness.abuse_harness import (
    Workspace,
    base_config,
    base_schema,
    expect_refusal,
    expect_release,
    ledger_state,
    make_workspace,
    run_cli,
    stderr_lines,
    toml_text,
)
from tests.robustness.processes import Job, process_environment, run_at_once
from tests.robustness.test_data import corrupt_parquet

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]


def _config(ws: Workspace, change: Callable[[dict[str, Any]], None]) -> None:
    config = base_config()
    change(config)
    ws.config.write_text(toml_text(config))


def _epsilon_inf(ws: Workspace) -> tuple[str, ...]:
    _config(ws, lambda c: c["privacy"].update(epsilon=float("inf")))
    return ("run", str(ws.config), "--seeded-test-or-audit")


def _unwritable_output(ws: Workspace) -> tuple[str, ...]:
    _config(ws, lambda c: c["output"].update(directory="/proc/dqrelease-out"))
    return ("run", str(ws.config), "--seeded-test-or-audit")


def _out_of_range(ws: Workspace) -> tuple[str, ...]:
    schema = base_schema()
    schema["columns"][1]["out_of_range"] = "error"
    ws.schema.write_text(toml_text(schema))
    return ("run", str(ws.config), "--seeded-test-or-audit")


def _corrupt_parquet(ws: Workspace) -> tuple[str, ...]:
    corrupt_parquet(ws)
    return ("run", str(ws.config), "--seeded-test-or-audit")


def _no_cap(ws: Workspace) -> tuple[str, ...]:
    _config(ws, lambda c: [c["ledger"].pop(k) for k in ("initial_cap_epsilon", "initial_cap_delta")])
    return ("run", str(ws.config), "--seeded-test-or-audit")


def _corrupt_ledger(ws: Workspace) -> tuple[str, ...]:
    ws.ledger.write_bytes(b"not a ledger " * 1000)
    return ("run", str(ws.config), "--seeded-test-or-audit")


def _published(ws: Workspace, *, seeded: bool = True) -> Path:
    if not seeded:
        _config(ws, lambda c: c.update(run={"seed_mode": "secure"}))
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    assert outcome.exit_code == 0, outcome.stderr
    [release] = ws.releases()
    return ws.out / "internal" / release.name / "manifest.json"


def _tampered_output(ws: Workspace) -> tuple[str, ...]:
    manifest = _published(ws)
    csv = ws.out / "releases" / manifest.parent.name / "synthetic.csv"
    csv.write_bytes(csv.read_bytes().replace(b"\n", b"\r\n", 1))
    return ("verify", str(manifest))


def _changed_data(ws: Workspace) -> tuple[str, ...]:
    manifest = _published(ws)
    ws.data.write_text(ws.data.read_text().replace("north", "south", 1))
    return ("verify", str(manifest))


def _success(ws: Workspace) -> tuple[str, ...]:
    return ("run", str(ws.config), "--quiet", "--seeded-test-or-audit")


@dataclass(frozen=True)
class Case:
    setup: Callable[[Workspace], tuple[str, ...]]
    code: int
    problem: str
    fix: str


CASES = {
    "config-epsilon-inf": Case(_epsilon_inf, 2, r"privacy\.epsilon", r"finite|less than"),
    "flow-output-unwritable": Case(_unwritable_output, 2, r"dqrelease-out", r"output\.directory"),
    "task-out-of-range": Case(_out_of_range, 3, r"'income'", r"fix the data or the schema"),
    "task-corrupt-parquet": Case(_corrupt_parquet, 3, r"parquet", r"check"),
    "ledger-no-cap": Case(_no_cap, 4, r"no budget cap", r"set-cap"),
    "ledger-corrupt": Case(_corrupt_ledger, 1, r"ledger\.duckdb", r"check|restore|backup"),
    "verify-tampered-output": Case(_tampered_output, 5, r"csv", r"does not match"),
    "verify-changed-data": Case(_changed_data, 6, r"data\.csv", r"differ|changed|restore"),
    "release-succeeds": Case(_success, 0, r"", r""),
}


@dataclass
class Prepared:
    ws: Workspace
    ledger_before: Any
    outputs_before: list[Path]


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> dict[str, tuple[Prepared, Any]]:
    prepared, jobs = {}, []
    for name, case in CASES.items():
        ws = make_workspace(tmp_path_factory.mktemp(name) / "ws")
        args = case.setup(ws)
        prepared[name] = Prepared(ws=ws, ledger_before=ledger_state(ws.ledger), outputs_before=ws.output_files())
        jobs.append(Job(ws=ws, args=args, name="process", env=process_environment(ws)))
    outcomes = run_at_once(jobs, tmp_path_factory.mktemp("launcher"))
    return {name: (prepared[name], outcome) for name, outcome in zip(CASES, outcomes, strict=True)}


@pytest.mark.parametrize("name", list(CASES))
def test_a_real_process_refuses_or_releases_as_the_operator_needs(processes, name: str):
    """Exit code, the refusal as stderr's first line, nothing published, ledger unchanged, no leak, no traceback."""
    prepared, outcome = processes[name]
    case = CASES[name]
    if case.code == 0:
        expect_release(prepared.ws, outcome, ledger_before=prepared.ledger_before)
        assert not re.search(r"\w+Warning:|nanobind", outcome.stderr), outcome.stderr
        assert json.loads((prepared.ws.releases()[-1] / "release.json").read_text())
        return
    expect_refusal(
        prepared.ws, outcome, code=case.code, problem=case.problem, fix=case.fix,
        ledger_before=prepared.ledger_before,
        outputs_before=prepared.outputs_before if prepared.outputs_before else None,
        one_line=False,
    )


@pytest.mark.parametrize("name", [name for name in CASES if CASES[name].code])
def test_a_real_process_prints_exactly_one_line_for_a_refusal(processes, name: str):
    # also after a refusal inside the flow, when Prefect's event queue drains at exit (dqrelease/cli/release.py
    # PREFECT_SERVICE_LOGGERS: its "Still processing items" warning used to be a second line)
    _, outcome = processes[name]
    assert len(stderr_lines(outcome.stderr)) == 1, outcome.stderr
