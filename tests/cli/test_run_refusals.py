"""Refusals inside a run (validation failure, budget refused) as a shell sees them: one line and the code.

A refusal raised inside the Prefect flow used to print Prefect's two tracebacks and, at exit, DuckDB's
"nanobind: leaked ..." warnings before the one useful line. Besides that line, stderr holds only the run's plain
progress lines (:mod:`dqrelease.cli.live`; a budget refused before the data is read comes before any of them). The
run is a fresh ``python -m dqrelease.cli`` process talking to the session's Prefect test server
(``PREFECT_API_URL``), releasing the Adult slice of ``tests/adult_slice.py`` (the release-flow tests' config with a
lower cap or an undeclared value).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dqrelease.cli.live import PLAIN_PREFIX
from dqrelease.errors import ExitCode
from tests.adult_slice import UNDECLARED_WORKCLASS, release_config, write_slice

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _workspace(tmp_path: Path, *, cap: float, bad_value: bool) -> Path:
    write_slice(tmp_path, undeclared_value=bad_value)
    config = tmp_path / "release.toml"
    # secure: a refusal prints its one line and no seeded-release warning
    config.write_text(release_config(cap=f"initial_cap_epsilon = {cap}\ninitial_cap_delta = 1e-5",
                                     run='seed_mode = "secure"'))
    return config


@pytest.mark.parametrize(
    ("cap", "bad_value", "code", "words"),
    [
        (0.5, False, ExitCode.BUDGET_REFUSED, "budget refused"),
        (5.0, True, ExitCode.VALIDATION_FAILED, "workclass"),
    ],
    ids=["budget-refused", "validation-failed"],
)
def test_a_refusal_inside_a_run_is_one_line_on_stderr_and_its_exit_code(
    tmp_path: Path, cap: float, bad_value: bool, code: ExitCode, words: str
):
    from prefect.settings import PREFECT_API_URL

    config = _workspace(tmp_path, cap=cap, bad_value=bad_value)
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "COLUMNS": "40"}
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "run", str(config)], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=300, check=False,
    )
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    progress = [line for line in lines if re.match(PLAIN_PREFIX, line)]
    # no traceback, no Prefect log, no "nanobind: leaked" warning
    [line] = [line for line in lines if not re.match(PLAIN_PREFIX, line)]
    assert line == lines[-1]
    assert line.startswith("error: ") and words in line
    assert UNDECLARED_WORKCLASS not in result.stderr
    if code == ExitCode.BUDGET_REFUSED:  # n is public: refused before the run starts, so before any progress
        assert progress == []
    else:
        assert re.sub(PLAIN_PREFIX, "", progress[-1]) == "validate: stopped"


def test_debug_shows_the_traceback_of_a_refusal(tmp_path: Path):
    from prefect.settings import PREFECT_API_URL

    config = _workspace(tmp_path, cap=0.5, bad_value=False)
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "--debug", "run", str(config)], capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=300, check=False,
    )
    assert result.returncode == ExitCode.BUDGET_REFUSED
    assert "Traceback" in result.stderr and "BudgetRefusedError" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: budget refused")
