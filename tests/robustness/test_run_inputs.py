"""Abuse corpus, what a run needs besides its config: the output folder, the working database, the ledger file,
the Dask scheduler, a ``serve`` schedule, and what a run that failed after its charge says.

Each broken input is refused before the data is read (so before any charge) with one line that names it and the
fix; a failure after the charge says that the charge stays. A release's INTERNAL files are owner-only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

import pytest

from dqrelease.ledger import Ledger
from tests.robustness.abuse_harness import (
    Workspace,
    base_config,
    expect_refusal,
    expect_release,
    ledger_state,
    run_cli,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _configure(ws: Workspace, section: str, key: str, value: object) -> None:
    config = base_config()
    config[section][key] = value
    ws.config.write_text(toml_text(config))


def _earlier_charge(ws: Workspace) -> None:
    ledger = Ledger(ws.ledger)
    ledger.set_cap("abuse", epsilon=10, delta=1e-4)
    ledger.charge("abuse", epsilon=1, delta=0, rho=None, mode="tight", mechanism="mwem", config_hash="0" * 64,
                  run_id="an-earlier-release", note="earlier release")


def _not_a_database(ws: Workspace) -> str:
    (ws.root / "work.duckdb").write_text("not a database\n" * 100)
    return "work.duckdb"


def _a_folder(ws: Workspace) -> str:
    (ws.root / "work").mkdir()
    return "work"


PLACE_CASES = [
    pytest.param("output", "directory", lambda ws: "data.csv", r"output directory .*data\.csv.*is a file",
                 r"set output\.directory to a writable folder", id="output-directory-is-a-file"),
    pytest.param("output", "directory", lambda ws: "/proc/version/dqrelease-out", r"/proc/version is a file",
                 r"set output\.directory to a writable folder", id="output-directory-under-a-system-file"),
    pytest.param("run", "database", _a_folder, r"run\.database .*work is a directory",
                 r"set run\.database to a DuckDB file", id="working-database-is-a-folder"),
    pytest.param("run", "database", _not_a_database, r"run\.database .*work\.duckdb cannot be used",
                 r"set run\.database to a DuckDB file", id="working-database-is-not-duckdb"),
]


@pytest.mark.parametrize(("section", "key", "place", "problem", "fix"), PLACE_CASES)
def test_unusable_place_of_the_run_is_named_before_the_data_is_read(
    ws: Workspace, section: str, key: str, place: Callable[[Workspace], str], problem: str, fix: str
):
    _configure(ws, section, key, place(ws))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=2, problem=problem, fix=fix, ledger_before=before)


def test_truncated_ledger_is_named_before_the_data_is_read(ws: Workspace):
    _earlier_charge(ws)
    with open(ws.ledger, "r+b") as handle:
        handle.truncate(os.path.getsize(ws.ledger) // 2)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=1, problem=r"ledger .*ledger\.duckdb cannot be read.*damaged",
                   fix=r"restore it from a backup or fix ledger\.path", ledger_before=before)


def test_unreachable_dask_scheduler_is_refused_before_the_charge(ws: Workspace):
    _earlier_charge(ws)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit", "--dask", "tcp://127.0.0.1:9")
    expect_refusal(ws, outcome, code=2, problem=r"Dask scheduler tcp://127\.0\.0\.1:9 did not answer within 5 s",
                   fix=r"start the scheduler or fix the address.*nothing was read or charged", ledger_before=before)


def test_serve_with_a_bad_cron_is_named_before_prefect_starts(ws: Workspace):
    outcome = run_cli(ws, "serve", str(ws.config), "--cron", "every monday")
    expect_refusal(ws, outcome, code=2, problem=r"--cron 'every monday' is not a valid cron schedule",
                   fix=r"five fields.*0 6 1 \* \*", ledger_before={})
    assert not ws.ledger.exists()


def test_failure_after_the_charge_says_the_charge_stays(ws: Workspace, monkeypatch: pytest.MonkeyPatch):
    """A fault after the ledger committed (here: answering the workload) keeps the charge, and the line says so."""
    from dqrelease.flows import release as release_flow

    def lost_disk(*args: object, **kwargs: object) -> None:
        raise OSError("disk vanished")

    monkeypatch.setattr(release_flow, "answer_partition", lost_disk)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=1, problem=r"internal error: OSError",
                   fix=r"after its charge of epsilon = 1 was committed; charges are never refunded",
                   ledger_before=before, charged=1)


def test_internal_files_are_owner_only_and_published_files_keep_their_modes(ws: Workspace):
    _configure(ws, "run", "database", "work.duckdb")  # kept after the run, so its mode can be checked
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    release = expect_release(ws, outcome, ledger_before=before)
    internal = ws.out / "internal" / release.name
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    names = sorted(path.name for path in internal.iterdir())
    assert {"error_report.json", "error_report.md", "error_report.html", "manifest.json", "seed"} <= set(names)
    assert {name: oct(mode(internal / name)) for name in names} == {name: oct(0o600) for name in names}
    assert mode(internal) == 0o700
    assert mode(ws.root / "work.duckdb") == 0o600
    assert not (ws.root / "work.duckdb.wal").exists()
    umask = os.umask(0)
    os.umask(umask)
    published = {path.name: oct(mode(path)) for path in release.iterdir()}
    assert published == {name: oct(0o666 & ~umask) for name in published}


def test_cli_gives_prefect_client_retries_enough_for_16_concurrent_releases(monkeypatch: pytest.MonkeyPatch):
    """Prefect's 5 retries of a 503 from a busy SQLite server ran out with 16 releases at once (an API error, the flow
    run left Pending; bench/prefect_api_contention.py); the CLI sets 8 unless the user set their own."""
    from dqrelease.cli.app import _prefect_environment

    monkeypatch.delenv("PREFECT_CLIENT_MAX_RETRIES", raising=False)
    _prefect_environment()
    assert int(os.environ["PREFECT_CLIENT_MAX_RETRIES"]) >= 8
    monkeypatch.setenv("PREFECT_CLIENT_MAX_RETRIES", "3")
    _prefect_environment()
    assert os.environ["PREFECT_CLIENT_MAX_RETRIES"] == "3"


def test_budget_show_of_a_truncated_ledger_names_it(ws: Workspace):
    _earlier_charge(ws)
    with open(ws.ledger, "r+b") as handle:
        handle.truncate(os.path.getsize(ws.ledger) // 2)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "budget", "show", "--ledger", str(ws.ledger))
    expect_refusal(ws, outcome, code=1, problem=r"ledger .*ledger\.duckdb cannot be read.*damaged",
                   fix=r"restore it from a backup or fix ledger\.path", ledger_before=before)
