"""Abuse corpus, concurrency: 16 releases of one config at once on one ledger whose cap admits only 5.

Sixteen real ``dqrelease run`` processes (forked by ``fork_runs.py`` so they start together) share the config, the
output folder and the ledger, which has no cap yet: the config's initial cap (ε = 5.5) is created by whichever run
gets there first. Each run is held after its ingest (test-only pause point) until all 16 are there, then all
are released at the same moment, so their cap creations and charges collide. Each charges ε = 1 (a hair more
after rounding up), so exactly 5 fit. Then:

* the cap is never exceeded and exactly 5 charges exist, one per published release;
* exactly 5 runs exit 0 and publish one complete release each; the other 11 exit 4 and publish nothing;
* each refused run prints one line naming the refusal and the fix;
* nothing is left in ``.staging/`` and no canary appears anywhere (16 processes' output, files, Prefect).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import pytest

from dqrelease.ledger import Ledger
from tests.robustness.abuse_harness import (
    TRACEBACK,
    Outcome,
    Workspace,
    assert_complete_release,
    assert_no_leaks,
    assert_no_staging_left,
    base_config,
    make_workspace,
    stderr_lines,
    toml_text,
)
from tests.robustness.processes import Job, process_environment, run_at_once

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

RUNS = 16
CAP = 5.5
ADMITTED = 5


@dataclass
class Load:
    ws: Workspace
    outcomes: list[Outcome]
    seconds: float


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> Load:
    ws = make_workspace(tmp_path_factory.mktemp("concurrency") / "ws")
    config = base_config()
    config["ledger"]["initial_cap_epsilon"] = CAP
    config["run"] = {"seed_mode": "secure"}  # one seed would be charged once: the race here is for the budget
    ws.config.write_text(toml_text(config))
    pause = ws.root / "pause"
    pause.mkdir()
    env = process_environment(ws, DQRELEASE_TEST_PAUSE_AT="ingest", DQRELEASE_TEST_PAUSE_DIR=str(pause))
    jobs = [Job(ws=ws, args=("run", str(ws.config), "--quiet"), name=f"run{i:02d}", env=env) for i in range(RUNS)]

    def release_all_at_once() -> None:
        deadline = time.monotonic() + 600
        while len(list(pause.glob("ingest-*.ready"))) < RUNS:
            assert time.monotonic() < deadline, "not every run reached its ingest"
            time.sleep(0.2)
        (pause / "go").touch()

    started = time.monotonic()
    outcomes = run_at_once(jobs, ws.root / "jobs", while_running=release_all_at_once)
    return Load(ws=ws, outcomes=outcomes, seconds=time.monotonic() - started)


def test_the_cap_is_never_exceeded(load: Load):
    [budget] = Ledger(load.ws.ledger, lock_timeout=30).budgets("abuse")
    assert budget.cap.epsilon == Fraction(CAP)
    assert budget.spent.epsilon <= budget.cap.epsilon
    assert len(budget.charges) == ADMITTED
    assert len({charge.run_id for charge in budget.charges}) == ADMITTED


def test_admitted_runs_publish_and_refused_runs_exit_4_with_nothing(load: Load):
    codes = sorted(outcome.exit_code for outcome in load.outcomes)
    unexpected = [o for o in load.outcomes if o.exit_code not in (0, 4)]
    assert not unexpected, "\n".join(f"exit {o.exit_code}:\n{o.stderr}\n{o.stdout}" for o in unexpected)
    assert codes == [0] * ADMITTED + [4] * (RUNS - ADMITTED), [o.stderr[-400:] for o in load.outcomes if o.exit_code]
    releases = load.ws.releases()
    charged = {charge.run_id for charge in Ledger(load.ws.ledger, lock_timeout=30).budgets("abuse")[0].charges}
    assert {release.name for release in releases} == charged
    for release in releases:
        assert_complete_release(load.ws, release)
    assert sorted(p.name for p in (load.ws.out / "internal").iterdir()) == sorted(r.name for r in releases)
    assert_no_staging_left(load.ws)


def test_refused_runs_name_the_refusal_and_the_fix_without_a_traceback(load: Load):
    for outcome in load.outcomes:
        if outcome.exit_code == 4:
            lines = stderr_lines(outcome.stderr)
            assert "budget refused" in lines[0] and "set-cap" in lines[0], lines[0]
            assert not TRACEBACK.search(outcome.stderr + outcome.stdout)


def test_refused_runs_print_exactly_one_line(load: Load):
    assert all(len(stderr_lines(o.stderr)) == 1 for o in load.outcomes if o.exit_code == 4), [
        o.stderr for o in load.outcomes if o.exit_code == 4 and len(stderr_lines(o.stderr)) != 1
    ]


def test_no_canary_leaks_under_load(load: Load):
    for outcome in load.outcomes:
        assert_no_leaks(load.ws, outcome, prefect=False, files=False)
    assert_no_leaks(load.ws, Outcome(exit_code=0, stdout="", stderr="", started=load.outcomes[0].started))

