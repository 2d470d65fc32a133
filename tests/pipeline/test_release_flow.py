"""End-to-end release flow on a small slice of Adult, and its failure paths.

Every test shares one Prefect test server (session fixture) and drives the real CLI in-process, so exit
codes, messages, published files and the ledger state are all checked as a user would see them.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.errors import ExitCode
from dqrelease.ledger import Ledger
from tests.adult_slice import ADULT, SLICE_ROWS, UNDECLARED_WORKCLASS, release_config, write_slice
from tests.pipeline.test_public_manifest import leaked_paths

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    write_slice(tmp_path)
    (tmp_path / "release.toml").write_text(release_config())
    return tmp_path


def _run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _charges(workspace: Path) -> int:
    path = workspace / "ledger.duckdb"
    if not path.exists():
        return 0
    return len(Ledger(path).show("adult-slice")[0]["charges"]) if Ledger(path).show("adult-slice") else 0


def _published(workspace: Path) -> list[Path]:
    releases = workspace / "out" / "releases"
    return sorted(releases.iterdir()) if releases.exists() else []


def _no_staging_left(workspace: Path) -> bool:
    staging = workspace / "out" / ".staging"
    return not staging.exists() or not any(staging.iterdir())


# ---------------------------------------------------------------------- success path
def test_release_publishes_table_report_and_manifests_and_charges_once(workspace: Path):
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.OK, result.output
    [release] = _published(workspace)
    internal = workspace / "out" / "internal" / release.name

    frame = pd.read_parquet(release / "synthetic.parquet")
    assert len(frame) == 400
    assert list(frame.columns)[:3] == ["age", "workclass", "fnlwgt"]
    assert pd.read_csv(release / "synthetic.csv").shape == frame.shape
    with duckdb.connect(str(release / "synthetic.duckdb"), read_only=True) as con:
        assert con.execute("select count(*) from synthetic").fetchall()[0][0] == 400

    report_lines = (internal / "error_report.md").read_text().splitlines()
    assert "INTERNAL" in report_lines[0]
    report = json.loads((internal / "error_report.json").read_text())
    assert report["errors"]["synthetic"]["max_error"] <= report["errors"]["zeros"]["max_error"]
    assert "data:image/png;base64," in (internal / "error_report.html").read_text()
    # the report labels values as the published table writes them; with numeric_values = "uniform" (the slice's
    # config) a number is drawn inside its bucket, so the report keeps the bucket [40, 41) and says why
    assert report["value_labels"]["numeric_values"] == "uniform"
    labels = {column["column"]: set(column["values"]) for column in report["fidelity"]["columns"]}
    assert "[40, 41)" in labels["hours-per-week"] and "40" not in labels["hours-per-week"]
    assert set(frame["workclass"].dropna().unique()) <= labels["workclass"]
    assert "Numbers are labelled by their bucket" in "\n".join(report_lines)

    manifest = json.loads((internal / "manifest.json").read_text())
    public = json.loads((release / "release.json").read_text())
    assert "input_sha256" in manifest and "input_sha256" not in public
    assert "918273645" not in (internal / "manifest.json").read_text()
    assert "918273645" not in (release / "release.json").read_text()
    seed_file = Path(manifest["seed_file"])
    assert seed_file.read_text().strip() == "918273645"
    assert stat.S_IMODE(os.stat(seed_file).st_mode) == 0o600
    assert manifest["outputs"]["parquet"]["sha256"] == public["outputs"]["parquet"]["sha256"]
    machine_files = [path.name for path in workspace.iterdir() if path.is_file()]  # data, config, schema, ledger
    assert "ledger.duckdb" in machine_files
    assert leaked_paths(public, names=machine_files, folders=[workspace]) == []

    [entry] = Ledger(workspace / "ledger.duckdb").show("adult-slice")
    assert len(entry["charges"]) == 1
    charged = manifest["privacy"]["costs"]["tight"]["epsilon"]
    assert charged <= 1.0
    assert _no_staging_left(workspace)


def test_verify_reproduces_the_seeded_release_without_charging(workspace: Path):
    assert _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit").exit_code == ExitCode.OK
    [release] = _published(workspace)
    manifest = workspace / "out" / "internal" / release.name / "manifest.json"
    before = _charges(workspace)
    result = _run("verify", str(manifest))
    assert result.exit_code == ExitCode.OK, result.output
    assert "verified" in result.output
    assert _charges(workspace) == before


def test_release_runs_inside_another_prefect_flow(workspace: Path):
    from prefect import flow

    from dqrelease.flows.release import release

    @flow
    def monthly(config: str) -> str:
        return release(config, seeded_test_or_audit=True)["run_id"]

    run_id = monthly(str(workspace / "release.toml"))
    assert (workspace / "out" / "releases" / run_id / "synthetic.parquet").exists()


GAUSSIAN_ROWS = 'free_policy = "dp-marginal"\nfree_noise = "gaussian"\nfree_rho = 0.001\nrows_per_round = 4'


def test_gaussian_free_marginals_and_rows_per_round_are_planned_charged_and_reproducible(workspace: Path):
    (workspace / "release.toml").write_text(release_config(rounds=GAUSSIAN_ROWS))
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.OK, result.output
    [release] = _published(workspace)
    manifest_path = workspace / "out" / "internal" / release.name / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    parameters = manifest["privacy"]["parameters"]
    assert (parameters["rows_per_round"], parameters["free_noise"], parameters["free_rho"]) == (4, "gaussian", 0.001)
    assert any("Gaussian one-way marginals" in event["label"] for event in manifest["privacy"]["events"])
    assert manifest["privacy"]["costs"]["tight"]["epsilon"] <= 1.0
    frame = pd.read_parquet(release / "synthetic.parquet")
    assert len(frame) == 400 and frame["workclass"].notna().all()
    assert _run("verify", str(manifest_path)).exit_code == ExitCode.OK  # the same bytes again


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        ('free_policy = "zero"\nrows_per_round = 2', "rows_per_round > 1 needs free attributes drawn at random"),
        ('free_policy = "dp-marginal"\nfree_noise = "gaussian"', "needs free_rho > 0"),
    ],
)
def test_free_settings_that_do_not_fit_exit_2_before_any_charge(workspace: Path, mechanism: str, message: str):
    (workspace / "release.toml").write_text(release_config(rounds=mechanism))
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.INVALID_CONFIG
    assert message in " ".join(result.output.split())  # the console wraps long lines
    assert not (workspace / "out").exists()
    assert _charges(workspace) == 0


def test_plan_shows_cost_without_reading_the_data(workspace: Path):
    (workspace / "adult-slice.csv").unlink()
    result = _run("plan", str(workspace / "release.toml"))
    assert result.exit_code == ExitCode.OK, result.output
    assert "tight (charged)" in result.output
    assert not (workspace / "out").exists()


# ---------------------------------------------------------------------- failure paths
def test_unknown_config_key_exits_2_before_anything_happens(workspace: Path):
    (workspace / "release.toml").write_text(release_config(extra='colour = "blue"'))
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.INVALID_CONFIG
    assert "colour" in result.output
    assert not (workspace / "out").exists()
    assert _charges(workspace) == 0


def test_invalid_schema_exits_2(workspace: Path):
    schema = (ADULT / "schema.toml").read_text()
    broken = workspace / "schema.toml"
    broken.write_text(schema + '\n[[columns]]\nname = "age"\ntype = "categorical"\nvalues = ["x"]\n')
    text = release_config().replace(str(ADULT / "schema.toml"), str(broken))
    (workspace / "release.toml").write_text(text)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.INVALID_CONFIG
    assert "unique" in result.output
    assert _charges(workspace) == 0


def test_value_outside_schema_exits_3_without_charge_or_leak(workspace: Path):
    write_slice(workspace, undeclared_value=True)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.VALIDATION_FAILED, result.output
    assert "workclass" in result.output
    assert UNDECLARED_WORKCLASS not in result.output
    assert _published(workspace) == []
    assert _charges(workspace) == 0
    assert _no_staging_left(workspace)


def test_declared_n_must_match_the_source(workspace: Path):
    (workspace / "release.toml").write_text(release_config(n=str(SLICE_ROWS + 1)))
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.VALIDATION_FAILED
    assert "privacy.n" in result.output
    assert _charges(workspace) == 0


def test_budget_exceeded_exits_4_with_remaining_budget(workspace: Path):
    text = release_config(cap="initial_cap_epsilon = 0.5\ninitial_cap_delta = 1e-5")
    (workspace / "release.toml").write_text(text)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.BUDGET_REFUSED, result.output
    assert "remaining" in result.output.lower()
    assert _published(workspace) == []
    assert _charges(workspace) == 0
    assert _no_staging_left(workspace)


def test_missing_source_file_exits_2(workspace: Path):
    (workspace / "release.toml").write_text(release_config(source_paths='["nowhere.csv"]'))
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.INVALID_CONFIG, result.output
    assert "nowhere.csv" in result.output
    assert _charges(workspace) == 0


def test_solver_timeouts_fall_back_and_are_counted(workspace: Path):
    oracle = 'kind = "cpsat"\ntime_limit = 0.001\nnum_workers = 1\ndeterministic_time_limit = 0.0001'
    text = release_config(oracle=oracle, rounds="rounds = 4", samples="5000", epsilon="50.0",
                        cap="initial_cap_epsilon = 100.0\ninitial_cap_delta = 1e-5")
    (workspace / "release.toml").write_text(text)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.OK, result.output
    [release] = _published(workspace)
    report = json.loads((workspace / "out" / "internal" / release.name / "error_report.json").read_text())
    statuses = report["solver"]["status_counts"]
    assert sum(statuses.values()) == 4
    assert set(statuses) - {"OPTIMAL"}, "a 0.0001 deterministic-time limit must stop CP-SAT early at least once"
    assert _charges(workspace) == 1


def test_failure_after_the_charge_publishes_nothing_and_keeps_the_charge(workspace: Path, monkeypatch):
    import dqrelease.tasks.outputs

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(dqrelease.tasks.outputs, "write_outputs", explode)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.INTERNAL_ERROR
    assert _published(workspace) == []
    assert _no_staging_left(workspace)
    assert _charges(workspace) == 1


def test_private_n_is_estimated_with_a_charged_noisy_count(workspace: Path):
    text = release_config(n='"noisy"\nneighbouring = "add-remove"\nn_epsilon = 0.1')
    (workspace / "release.toml").write_text(text)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.OK, result.output
    [entry] = Ledger(workspace / "ledger.duckdb").show("adult-slice")
    mechanisms = [c["mechanism"] for c in entry["charges"]]
    assert mechanisms == ["laplace-count", "dualquery"]
    assert sum(c["epsilon"] for c in entry["charges"]) <= 1.0 + 1e-12
    assert sum(c["delta"] for c in entry["charges"]) <= 1e-6 * (1 + 1e-12)
    [release] = _published(workspace)
    manifest = json.loads((workspace / "out" / "internal" / release.name / "manifest.json").read_text())
    assert len(manifest["ledger_charges"]) == 2
    assert manifest["privacy"]["n"] < SLICE_ROWS  # the plan uses the count's lower bound


def test_plan_explains_a_private_n(workspace: Path):
    text = release_config(n='"noisy"\nneighbouring = "add-remove"\nn_epsilon = 0.1')
    (workspace / "release.toml").write_text(text)
    result = _run("plan", str(workspace / "release.toml"))
    assert result.exit_code == ExitCode.OK, result.output
    assert "n is private" in result.output


def test_unexpected_error_on_private_data_hides_its_message(workspace: Path, monkeypatch):
    import dqrelease.tasks.prepare

    def leaky(*args, **kwargs):
        raise ValueError(f"could not convert {UNDECLARED_WORKCLASS!r} to float")

    monkeypatch.setattr(dqrelease.tasks.prepare, "discretize", leaky)
    result = _run("run", str(workspace / "release.toml"), "--quiet", "--seeded-test-or-audit")
    assert result.exit_code == ExitCode.INTERNAL_ERROR
    assert "ValueError" in result.output and "--debug" in result.output
    assert UNDECLARED_WORKCLASS not in result.output
    assert _charges(workspace) == 0


# ---------------------------------------------------------------------- seeded configs need a test or an audit
@pytest.mark.parametrize("entry", ["release", "run_release", "release_many"])
def test_the_flows_refuse_a_seeded_config_without_the_keyword(workspace: Path, entry: str):
    import dqrelease.flows.release as flows
    from dqrelease.errors import ConfigInvalidError

    config = str(workspace / "release.toml")
    with pytest.raises(ConfigInvalidError, match=r"'adult-test' is seeded .*pass seeded_test_or_audit=True if this "
                                                 r"run is a test or an audit, or set run\.seed_mode = 'secure'"):
        getattr(flows, entry)([config] if entry == "release_many" else config)
    assert not (workspace / "ledger.duckdb").exists() and not (workspace / "out").exists()
