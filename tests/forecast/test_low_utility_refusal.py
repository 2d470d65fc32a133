"""The German-credit case: a release forecast to be no better than zeros is refused, and its override.

The issue's case: 1,000 rows, 21 columns, epsilon = 1, DualQuery's raw records (eta = 1, s = 300: 7 rounds,
7 distinct records, worse than publishing zeros). ``dqrelease plan`` warns; ``dqrelease run`` refuses it with one
line on stderr and exit 2 before the data is read or anything is charged, naming a mechanism and an epsilon whose
forecast passes; ``--accept-low-utility`` publishes it. Each command is a fresh ``python -m dqrelease.cli``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dqrelease.errors import ExitCode
from dqrelease.ledger import Ledger
from tests.forecast.german_shape import ROWS, SIZES, write_workspace

RECOMMENDED = re.compile(r"mechanism\.name = '([a-z_-]+)' \(default keys\) with privacy\.epsilon = ([0-9.e+-]+)")


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600,
        check=False, env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def _unreadable_data() -> str:
    """A CSV that ingest or validation would refuse (exit 3): a value outside the schema in every row."""
    header = ",".join(f"c{j:02d}" for j in range(len(SIZES)))
    return header + "\n" + "\n".join(",".join(["not-a-value"] * len(SIZES)) for _ in range(ROWS)) + "\n"


def _charges(workspace: Path) -> int:
    path = workspace / "ledger.duckdb"
    if not path.exists():
        return 0
    shown = Ledger(path).show("german")
    return len(shown[0]["charges"]) if shown else 0


def test_plan_warns_and_shows_the_forecast_next_to_the_baselines(tmp_path: Path):
    config = write_workspace(tmp_path)
    result = _cli("plan", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # plan wraps its lines on word boundaries within 120 columns
    assert "dualquery (raw records)" in out and "zeros" in out and "uniform" in out
    assert ">= 0.5" in out and "calibrated" in out and "bound" in out  # zeros' public bound: 1/2 (binary columns)
    assert "warning: low utility: " in out and "publishing zeros (>= 0.5)" in out and "--accept-low-utility" in out
    assert RECOMMENDED.search(out)


def test_run_refuses_before_reading_the_data_or_charging(tmp_path: Path):
    # the data cannot even be read: a run that got as far as ingest would stop with exit 3 instead
    config = write_workspace(tmp_path, data=_unreadable_data())
    result = _cli("run", str(config), "--seeded-test-or-audit", cwd=tmp_path)
    assert result.returncode == ExitCode.INVALID_CONFIG, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: low utility: the forecast of dualquery (raw records) at epsilon = 1")
    assert "is no better than publishing zeros (>= 0.5)" in line and "--accept-low-utility" in line
    assert RECOMMENDED.search(line), line
    assert _charges(tmp_path) == 0
    assert not (tmp_path / "out" / "releases").exists() or not any((tmp_path / "out" / "releases").iterdir())


def test_the_recommended_mechanism_and_epsilon_pass_the_forecast(tmp_path: Path):
    config = write_workspace(tmp_path)
    refused = _cli("run", str(config), "--seeded-test-or-audit", cwd=tmp_path)
    name, epsilon = RECOMMENDED.search(refused.stderr).groups()
    advised = tmp_path / "advised"
    advised.mkdir()
    write_workspace(advised, mechanism=f'name = "{name}"', epsilon=float(epsilon))
    result = _cli("plan", "release.toml", cwd=advised)
    assert result.returncode == 0, result.stderr
    assert "low utility" not in result.stdout


@pytest.mark.usefixtures("prefect_harness")
def test_accept_low_utility_publishes_the_refused_release(tmp_path: Path):
    from prefect.settings import PREFECT_API_URL

    config = write_workspace(tmp_path)
    result = _cli("run", str(config), "--accept-low-utility", "--quiet", "--seeded-test-or-audit", cwd=tmp_path,
                  env={"PREFECT_API_URL": PREFECT_API_URL.value()})
    assert result.returncode == 0, result.stderr
    assert "published" in result.stdout
    assert _charges(tmp_path) == 1
    [release] = (tmp_path / "out" / "releases").iterdir()
    assert any(release.iterdir())
