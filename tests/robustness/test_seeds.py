"""Abuse corpus, seeds: a seeded config run as if it were production, a seed used twice, a seeded config served.

A seeded release is reproducible by anyone holding its seed, and the same seed on changed data draws the same
noise (issue 27: Adult and Adult minus one record gave planning n of 48,639 and 48,638). ``dqrelease run`` refuses a
seeded config unless ``--seeded-test-or-audit`` says it is a test or an audit (exit 2, before anything is read), and
then prints one warning line; the ledger refuses a seed another run charged to the dataset, before the charge and
before the data is read (exit 2); ``dqrelease serve`` refuses seeded configs (exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from tests.robustness.abuse_harness import (
    Workspace,
    base_config,
    expect_refusal,
    expect_release,
    ledger_state,
    run_cli,
    stderr_lines,
    toml_text,
)

pytestmark = pytest.mark.usefixtures("prefect_harness")

FLAG = "--seeded-test-or-audit"


def _seed_rows(ws: Workspace) -> list[tuple]:
    """The ledger's recorded seed hashes (empty when there is no ledger yet)."""
    if not ws.ledger.is_file():
        return []
    with duckdb.connect(str(ws.ledger), read_only=True) as con:
        return sorted(con.execute("select * from ledger_seeds").fetchall())


def _reseed(ws: Workspace, seed: int, *, noisy: bool = False) -> None:
    """The standard config with ``seed``; ``noisy``: a private n (the noisy count charges first, as in test_data)."""
    config = base_config()
    config["run"]["seed"] = seed
    if noisy:
        config["privacy"] = {"neighbouring": "add-remove", "n": "noisy", "n_epsilon": 0.2, "epsilon": 1.0,
                             "delta": 1e-6}
        config["mechanism"] = {"name": "dualquery", "eta": 1.0, "samples": 20, "oracle": {"kind": "local"}}
        config["output"]["rows"] = 200
    ws.config.write_text(toml_text(config))


def test_a_seeded_config_without_the_flag_is_refused_before_anything_is_read(ws: Workspace, ingest_calls: list[str]):
    outcome = run_cli(ws, "run", str(ws.config), "--quiet")
    expect_refusal(ws, outcome, code=2, problem=r"'abuse' is seeded \(run\.seed_mode = 'seeded'\)",
                   fix=r"give --seeded-test-or-audit .*or set run\.seed_mode = 'secure'", ledger_before={})
    assert ingest_calls == []
    assert not ws.ledger.exists()  # nothing charged: the ledger was not even created


def test_a_seeded_test_run_publishes_with_one_warning_line_and_says_so_in_release_json(ws: Workspace):
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", FLAG)
    release = expect_release(ws, outcome, ledger_before={})
    [warning] = stderr_lines(outcome.stderr)
    assert warning.startswith("warning: this release is seeded for a test or an audit") and "production" in warning
    public = json.loads((release / "release.json").read_text())
    assert public["seeded"] is True
    assert public["seeding"].startswith("seeded for a test or an audit, not a production release")
    assert "4242" not in (release / "release.json").read_text()
    assert len(_seed_rows(ws)) == 1


def test_a_secure_run_has_no_warning_and_release_json_says_secure(ws: Workspace):
    config = base_config()
    config["run"] = {"seed_mode": "secure"}
    ws.config.write_text(toml_text(config))
    outcome = run_cli(ws, "run", str(ws.config), "--quiet")
    release = expect_release(ws, outcome, ledger_before={})
    assert stderr_lines(outcome.stderr) == []
    assert json.loads((release / "release.json").read_text())["seeding"].startswith("secure: fresh randomness")
    assert _seed_rows(ws) == []


@pytest.mark.parametrize("noisy", [False, True], ids=["declared-n", "noisy-n"])
def test_a_seed_used_again_on_the_dataset_is_refused_before_the_charge(
    ws: Workspace, ingest_calls: list[str], noisy: bool
):
    _reseed(ws, 4242, noisy=noisy)
    first = run_cli(ws, "run", str(ws.config), "--quiet", FLAG)
    expect_release(ws, first, ledger_before={}, charged=2 if noisy else 1)
    assert len(_seed_rows(ws)) == 1  # a noisy count and its release: two charges, one run, one seed

    # the same seed on changed data would draw the same noise: the difference of two releases is the data's
    ws.data.write_text(ws.data.read_text().replace("north", "south", 1))
    before, seeds, outputs, ingested = ledger_state(ws.ledger), _seed_rows(ws), ws.output_files(), len(ingest_calls)
    again = run_cli(ws, "run", str(ws.config), "--quiet", FLAG)
    expect_refusal(ws, again, code=2, problem=r"seed refused for dataset 'abuse': ledger .*ledger\.duckdb already",
                   fix=r"set a new run\.seed", ledger_before=before, outputs_before=outputs)
    assert _seed_rows(ws) == seeds and len(ingest_calls) == ingested
    assert "4242" not in again.stderr + again.stdout  # the seed is never named

    _reseed(ws, 4243, noisy=noisy)
    fresh = run_cli(ws, "run", str(ws.config), "--quiet", FLAG)
    expect_release(ws, fresh, ledger_before=before, charged=2 if noisy else 1)
    assert len(_seed_rows(ws)) == 2


def test_a_replay_is_no_reuse_of_its_seed(ws: Workspace):
    outcome = run_cli(ws, "run", str(ws.config), "--quiet", FLAG)
    release = expect_release(ws, outcome, ledger_before={})
    before, seeds = ledger_state(ws.ledger), _seed_rows(ws)
    verified = run_cli(ws, "verify", str(ws.out / "internal" / release.name / "manifest.json"))
    assert verified.exit_code == 0, verified.stderr
    assert ledger_state(ws.ledger) == before and _seed_rows(ws) == seeds


@pytest.mark.slow
def test_serve_refuses_a_seeded_config_in_one_line(ws: Workspace):
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    # a real process: a serve that accepted the config would block, and the timeout fails the case
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "serve", str(ws.config), "--cron", "0 6 1 * *"],
        capture_output=True, text=True, timeout=120, cwd=ws.root, env=env, check=False,
    )
    assert result.returncode == 2, result.stderr
    [line] = stderr_lines(result.stderr)
    assert "'abuse' is seeded" in line and "`dqrelease serve` schedules production releases only" in line
    assert "set run.seed_mode = 'secure'" in line
    assert not ws.ledger.exists() and ws.output_files() == []  # nothing read, nothing charged

