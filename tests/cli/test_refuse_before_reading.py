"""With ``n`` public, ``dqrelease run`` refuses a release the ledger cannot pay, or whose forecast misses its
accuracy targets, before the source is opened: nothing is read, nothing is charged.

The source here is the Adult slice with an undeclared value: had it been read, the run would have stopped at its
validation (exit 3) instead. The ``ingest_calls`` spy (``tests/conftest.py``) records every ingest of a private
table; the run is in this process, so the spy sees it.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.errors import ExitCode
from dqrelease.ledger import Ledger
from tests.adult_slice import release_config, write_slice

DATASET = "adult-slice"


def _workspace(tmp_path: Path, **overrides: str) -> Path:
    write_slice(tmp_path, undeclared_value=True)  # reading it would fail the validation (exit 3)
    config = tmp_path / "release.toml"
    config.write_text(release_config(run='seed_mode = "secure"', **overrides))
    return config


def _run(config: Path):
    return CliRunner().invoke(app, ["run", str(config)])


def test_a_release_the_ledger_cannot_pay_is_refused_before_the_source_is_read(tmp_path: Path, ingest_calls):
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.set_cap(DATASET, epsilon=1, delta=1e-5)
    ledger.charge(DATASET, epsilon=0.9, delta=1e-7, rho=None, mode="tight", mechanism="dualquery",
                  config_hash="c0ffee", run_id="earlier-run")
    config = _workspace(tmp_path, cap="")

    result = _run(config)

    assert result.exit_code == ExitCode.BUDGET_REFUSED, result.output
    [line] = result.output.splitlines()
    assert line.startswith(f"error: budget refused for dataset '{DATASET}' (epsilon exceeds the cap)")
    assert ingest_calls == []
    assert ledger.spent(DATASET).charges == 1  # nothing charged
    assert not (tmp_path / "out").exists()


def test_a_dataset_without_a_cap_is_refused_before_the_source_is_read(tmp_path: Path, ingest_calls):
    result = _run(_workspace(tmp_path, cap=""))  # no cap in the ledger, none in the config

    assert result.exit_code == ExitCode.BUDGET_REFUSED, result.output
    assert "has no budget cap" in result.output
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists()  # a check reads; it creates nothing


def test_a_release_within_the_configured_initial_cap_is_not_refused_by_the_check(tmp_path: Path, ingest_calls):
    from dqrelease.cli.app import _load
    from dqrelease.cli.release import _plan_public
    from dqrelease.ledger.budget_check import check_budget

    loaded, schema = _load(_workspace(tmp_path, cap="initial_cap_epsilon = 5.0\ninitial_cap_delta = 1e-5"))
    _, _, planned = _plan_public(loaded, schema)
    check_budget(loaded, planned)  # fits the cap the run would set: no refusal
    assert not (tmp_path / "ledger.duckdb").exists()


def test_a_release_missing_its_accuracy_target_is_refused_before_the_source_is_read(tmp_path: Path, ingest_calls):
    config = _workspace(tmp_path)
    config.write_text(config.read_text().replace("worst_one_way_cell = 1.0", "worst_one_way_cell = 0.0001"))

    result = _run(config)

    assert result.exit_code == ExitCode.INVALID_CONFIG, result.output
    [line] = result.output.splitlines()
    assert line.startswith("error: accuracy target missed")
    assert ingest_calls == []
    assert not (tmp_path / "ledger.duckdb").exists()
