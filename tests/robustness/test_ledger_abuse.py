"""Abuse corpus, the budget ledger: cap spent, cap met exactly, no cap, corrupt file, read-only file, a file held
by another process, a directory, a newer schema version, absurd caps.

A refused charge exits 4 and writes nothing; a ledger that cannot be used exits 1 with one line naming the file
and what to do, and is never overwritten; nothing is published in either case.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest

from dqrelease.ledger import Ledger
from tests.robustness.abuse_harness import (
    Workspace,
    base_config,
    charges,
    expect_refusal,
    expect_release,
    ledger_state,
    run_cli,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _without_initial_cap(ws: Workspace) -> None:
    config = base_config()
    del config["ledger"]["initial_cap_epsilon"], config["ledger"]["initial_cap_delta"]
    ws.config.write_text(toml_text(config))


def _spend(ws: Workspace, *, cap: float, spent: float) -> None:
    ledger = Ledger(ws.ledger)
    ledger.set_cap("abuse", epsilon=cap, delta=1e-4)
    if spent:
        ledger.charge("abuse", epsilon=spent, delta=0, rho=None, mode="tight", mechanism="mwem",
                      config_hash="0" * 64, run_id="an-earlier-release", note="earlier release")


def test_cap_spent_refuses_with_exit_4(ws: Workspace):
    _without_initial_cap(ws)
    _spend(ws, cap=1.5, spent=1.0)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=4, problem=r"budget refused.*'abuse'", fix=r"set-cap", ledger_before=before)


def test_cap_met_exactly_is_accepted_then_the_next_run_is_refused(ws: Workspace):
    _without_initial_cap(ws)
    _spend(ws, cap=2.0, spent=1.0)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_release(ws, outcome, ledger_before=before)
    [budget] = Ledger(ws.ledger).budgets("abuse")
    # the plan is calibrated onto epsilon = 1 from below (float costs, rounded up as charged): the cap is met to
    # within 2^-50, never exceeded
    assert 0 <= budget.remaining.epsilon < Fraction(1, 2**50)

    published = ws.releases()
    config = tomllib.loads(ws.config.read_text())
    config["run"]["seed"] += 1  # a seed is charged once per dataset: the next test run draws a new one
    ws.config.write_text(toml_text(config))
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    assert outcome.exit_code == 4, outcome.stderr
    assert ws.releases() == published
    assert ledger_state(ws.ledger) == before
    assert len(outcome.stderr.strip().splitlines()) == 1 and "set-cap" in outcome.stderr


def test_no_cap_refuses_with_exit_4(ws: Workspace):
    _without_initial_cap(ws)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=4, problem=r"no budget cap", fix=r"set-cap|initial_cap", ledger_before=before)
    assert charges(ws.ledger) == []


def test_corrupt_ledger_is_refused_and_never_overwritten(ws: Workspace):
    ws.ledger.write_bytes(b"not a ledger " * 1000)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=1, problem=r"ledger.*ledger\.duckdb", fix=r"check|restore|backup",
                   ledger_before=before)
    assert ws.ledger.read_bytes() == b"not a ledger " * 1000


def test_budget_show_on_a_corrupt_ledger_is_one_line(ws: Workspace):
    ws.ledger.write_bytes(b"\x00garbage" * 500)
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "budget", "show", "--ledger", str(ws.ledger))
    expect_refusal(ws, outcome, code=1, problem=r"ledger.*ledger\.duckdb", fix=r"check|restore|backup",
                   ledger_before=before)


def test_ledger_path_that_is_a_directory_is_refused(ws: Workspace):
    ws.ledger.mkdir()
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=1, problem=r"ledger.*ledger\.duckdb", fix=r"ledger\.path",
                   ledger_before=ledger_state(ws.ledger))
    assert ws.ledger.is_dir() and not any(ws.ledger.iterdir())


def test_ledger_of_a_newer_dqrelease_is_refused(ws: Workspace):
    Ledger(ws.ledger).set_cap("abuse", epsilon=10, delta=1e-4)
    with duckdb.connect(str(ws.ledger)) as con:
        (table,) = [r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()
                    if "version" in r[0]]
        columns = [r[0] for r in con.execute(f'describe "{table}"').fetchall()]  # table name from the catalog
        con.execute(f'insert into "{table}" ({columns[0]}, {columns[1]}) values (99, now())')
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=1, problem=r"schema version 99", fix=r"upgrade dqrelease", ledger_before=before)


@contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """chmod 0444, and for root (whom permissions do not bind) the immutable attribute too."""
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    immutable = os.geteuid() == 0
    if immutable:
        chattr = shutil.which("chattr")
        made = chattr and subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode == 0
        if not made:
            path.chmod(0o644)
            pytest.skip("running as root without chattr +i on this filesystem: a read-only file cannot be made")
    try:
        yield
    finally:
        if immutable:
            subprocess.run([shutil.which("chattr"), "-i", str(path)], check=True)
        path.chmod(0o644)


def test_read_only_ledger_refuses_the_charge_cleanly(ws: Workspace):
    Ledger(ws.ledger).set_cap("abuse", epsilon=10, delta=1e-4)
    before = ledger_state(ws.ledger)
    with _read_only(ws.ledger):
        outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    expect_refusal(ws, outcome, code=1, problem=r"ledger.*ledger\.duckdb", fix=r"check|permission|writable",
                   ledger_before=before)


def test_budget_show_reads_a_read_only_ledger(ws: Workspace):
    Ledger(ws.ledger).set_cap("abuse", epsilon=10, delta=1e-4)
    with _read_only(ws.ledger):
        outcome = run_cli(ws, "budget", "show", "--ledger", str(ws.ledger))
    assert outcome.exit_code == 0, outcome.stderr
    assert "abuse" in outcome.stdout


HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[3]))
"""


@contextmanager
def _held_by_another_process(ws: Workspace, seconds: float) -> Iterator[subprocess.Popen]:
    ready = ws.root / "holder.ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(ws.ledger), str(ready), str(seconds)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert holder.poll() is None and time.monotonic() < deadline, "the holder process did not start"
            time.sleep(0.05)
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_ledger_held_briefly_by_another_process_is_waited_for(ws: Workspace):
    Ledger(ws.ledger).set_cap("abuse", epsilon=10, delta=1e-4)
    before = ledger_state(ws.ledger)
    with _held_by_another_process(ws, seconds=4) as holder:
        outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
        assert holder.poll() is not None or outcome.exit_code == 0
    expect_release(ws, outcome, ledger_before=before)


def test_ledger_held_past_the_lock_timeout_is_refused_with_its_holder(ws: Workspace):
    config = base_config()
    config["ledger"]["lock_timeout"] = 5  # ledger.lock_timeout: the run waits 5 s, not the default 120 s
    ws.config.write_text(toml_text(config))
    Ledger(ws.ledger).set_cap("abuse", epsilon=10, delta=1e-4)
    before = ledger_state(ws.ledger)
    with _held_by_another_process(ws, seconds=120) as holder:
        began = time.monotonic()
        outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
        waited = time.monotonic() - began
        pid = holder.pid
    expect_refusal(ws, outcome, code=1, problem=rf"locked by another process \(PID {pid}\).*waited 5 s",
                   fix=r"retry", ledger_before=before)
    assert waited < 100, waited  # the config's 5 s, not the default's 120 s (the holder lets go after 120 s)


@pytest.mark.parametrize(("options", "problem"), [
    pytest.param(["--epsilon", "inf", "--delta", "1e-5"], r"epsilon", id="set-cap-epsilon-inf"),
    pytest.param(["--epsilon", "-1", "--delta", "1e-5"], r"epsilon", id="set-cap-epsilon-negative"),
    pytest.param(["--epsilon", "1", "--delta", "1.5"], r"delta", id="set-cap-delta-above-one"),
])
def test_absurd_cap_is_refused(ws: Workspace, options: list[str], problem: str):
    before = ledger_state(ws.ledger)
    outcome = run_cli(ws, "budget", "set-cap", "abuse", *options, "--ledger", str(ws.ledger))
    expect_refusal(ws, outcome, code=2, problem=problem, fix=r"finite|>= ?0|< ?1|must", ledger_before=before)
