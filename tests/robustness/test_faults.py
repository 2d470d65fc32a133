"""Abuse corpus, faults: ``kill -9`` of a release's whole process group while it ingests, while its mechanism
runs and while it publishes.

Each run is a real ``dqrelease run`` process in its own session, held at the stage by the test-only pause point
(``dqrelease.runtime.pause_points``; ``DQRELEASE_TEST_PAUSE_AT``) and killed there with ``os.killpg(pgid, SIGKILL)``:
no ``finally`` block, no cleanup runs. The three runs are started at once (one workspace each). Afterwards:

* no half-published release: ``releases/`` is empty (the kill came before the release's rename);
* the ledger opens, reads and adds up: a run killed before its charge is not charged, a run killed after
  its mechanism started stays charged (charges are never refunded);
* the next run of the same config works, publishes one complete release, and cleans up after the dead run
  (its staging folder with the working database holding the raw table, and internal files it had moved);
* nothing the dead run or the next run left anywhere holds a canary.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from dqrelease.ledger import Ledger
from tests.robustness.abuse_harness import (
    Workspace,
    assert_no_leaks,
    charges,
    expect_release,
    ledger_state,
    make_workspace,
    run_cli,
    toml_text,
)
from tests.robustness.processes import Running, process_environment, start, wait_for_file

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

STAGES = ("ingest", "mechanism", "publish")


@dataclass
class Killed:
    ws: Workspace
    run: Running
    stage: str
    staging_before_kill: list[str]


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> dict[str, Killed]:
    """The three runs, started together, each killed at its stage."""
    runs: dict[str, tuple[Workspace, Running, Path]] = {}
    for stage in STAGES:
        ws = make_workspace(tmp_path_factory.mktemp(f"kill-{stage}") / "ws")
        pause = ws.root / "pause"
        pause.mkdir()
        env = process_environment(ws, DQRELEASE_TEST_PAUSE_AT=stage, DQRELEASE_TEST_PAUSE_DIR=str(pause))
        runs[stage] = (ws, start(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit", env=env), pause)
    result = {}
    try:
        for stage, (ws, running, pause) in runs.items():
            wait_for_file(pause / f"{stage}-{running.process.pid}.ready", [running])
            staging = sorted(p.name for p in (ws.out / ".staging").iterdir())
            running.kill_group()
            result[stage] = Killed(ws=ws, run=running, stage=stage, staging_before_kill=staging)
    finally:
        for _, running, _ in runs.values():
            if running.process.poll() is None:
                running.kill_group()
    return result


@pytest.mark.parametrize("stage", STAGES)
def test_a_killed_run_publishes_nothing_and_leaves_a_readable_ledger(killed: dict[str, Killed], stage: str):
    dead = killed[stage]
    ws = dead.ws
    assert dead.run.process.returncode == -9
    assert ws.releases() == [], "a release was (half-)published by a run killed before its commit point"
    assert any(name.endswith(".lock") for name in dead.staging_before_kill), "the run held no lock"
    budgets = Ledger(ws.ledger, lock_timeout=5).budgets("abuse")  # opens and reads: the file is intact
    if stage == "ingest":  # killed before its charge (and before the run first created the dataset's cap)
        assert [len(b.charges) for b in budgets] in ([], [0])
    else:  # killed after its charge: a started mechanism stays charged
        [budget] = budgets
        assert len(budget.charges) == 1
        assert budget.spent.epsilon <= budget.cap.epsilon
        assert budget.remaining.epsilon == budget.cap.epsilon - sum(c.epsilon for c in budget.charges)
    assert_no_leaks(ws, dead.run.outcome(), files=False)  # its output and Prefect records; files: the next test


@pytest.mark.parametrize("stage", STAGES)
def test_the_next_run_works_and_cleans_up_after_the_killed_one(killed: dict[str, Killed], stage: str):
    dead = killed[stage]
    ws = dead.ws
    dead_run_id = next(name.removesuffix(".lock") for name in dead.staging_before_kill if name.endswith(".lock"))
    config = tomllib.loads(ws.config.read_text())
    config["run"]["seed"] += 1  # the killed run's charge (if any) used up its seed for this dataset
    ws.config.write_text(toml_text(config))
    before = ledger_state(ws.ledger)
    charged_before = len(charges(ws.ledger))
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", "--seeded-test-or-audit")
    release = expect_release(ws, outcome, ledger_before=before)  # also: no staging left, no canary anywhere
    assert [p.name for p in ws.releases()] == [release.name]
    assert sorted(p.name for p in (ws.out / "internal").iterdir()) == [release.name], (
        "internal files of the killed run were left behind"
    )
    assert not (ws.out / ".staging" / dead_run_id).exists()
    assert len(charges(ws.ledger)) == charged_before + 1  # the killed run's charge (if any) stays
