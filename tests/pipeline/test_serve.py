"""`dqrelease serve` registers a cron-scheduled deployment of the release flow."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("prefect_harness")


async def _deployment(name: str):
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            return await client.read_deployment_by_name(name)
        except ObjectNotFound:
            return None


def test_serve_registers_a_cron_deployment(tmp_path: Path):
    from prefect.settings import PREFECT_API_URL

    config = ROOT / "examples" / "adult" / "release.toml"
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    log = tmp_path / "serve.log"
    with open(log, "w") as out:  # a file, not a pipe: a pipe nobody reads would block serve once it is full
        process = subprocess.Popen(
            [sys.executable, "-m", "dqrelease.cli", "serve", str(config), "--cron", "0 6 1 * *", "--name", "monthly"],
            env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        deployment = None
        deadline = time.monotonic() + 90
        while deployment is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(1)
            deployment = asyncio.run(_deployment("dqrelease-release/monthly"))
        assert process.poll() is None, log.read_text()[-2000:]
        assert deployment is not None
        [schedule] = deployment.schedules
        assert schedule.schedule.cron == "0 6 1 * *"
        assert deployment.parameters == {"config_path": str(config)}
    finally:
        # serve pauses its schedule through the API as it stops: on a loaded CI machine whose Prefect server is
        # busy with other tests' runs that took over 30 s once; stopping is not what this test checks
        process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def test_serve_rejects_an_invalid_config_with_exit_2(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n')
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "serve", str(bad), "--cron", "0 6 1 * *"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "schema_file" in result.stderr


def _serve_until_banner(command: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen, list[str]]:
    """Start `dqrelease serve` in its own session (output to a file: a full pipe would block it); read its banner."""
    log = cwd / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        lines = log.read_text().splitlines()
        if any("Ctrl-C stops serving" in line for line in lines):
            return process, lines
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGTERM)
    raise AssertionError("serve printed no banner:\n" + log.read_text()[-2000:])


async def _deployment_runs(name: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    async with get_client() as client:
        deployment = await client.read_deployment_by_name(name)
        runs = await client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
        )
    return sorted(runs, key=lambda run: run.start_time or run.expected_start_time)


def _wait_for(condition, what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_two_runs_of_one_dataset_never_overlap_and_charge_one_at_a_time(tmp_path: Path):
    """Two runs of the served deployment submitted together: the second waits for the first; one charge at a time.

    The runs are triggered with the command `serve` printed, from a shell without PREFECT_API_URL (the printed line
    must carry it). The first run is held right after its charge (test-only pause point in the mechanism); the
    second must then be waiting in Prefect's AwaitingConcurrencySlot state with nothing charged for it.
    """
    from tests.robustness.abuse_harness import base_config, charges, make_workspace, toml_text
    from tests.robustness.processes import cli_command, process_environment

    ws = make_workspace(tmp_path / "ws")
    config = base_config()
    config["run"] = {"seed_mode": "secure"}  # serve schedules production releases only
    ws.config.write_text(toml_text(config))
    pause = tmp_path / "pause"
    pause.mkdir()
    env = process_environment(ws, DQRELEASE_TEST_PAUSE_AT="mechanism", DQRELEASE_TEST_PAUSE_DIR=str(pause),
                              PREFECT_RUNNER_POLL_FREQUENCY="1")
    # a yearly schedule never fires during the test: both runs are the printed command's
    command = cli_command("serve", str(ws.config), "--cron", "0 6 1 1 *", "--name", "overlap")
    serve, banner = _serve_until_banner(command, env, ws.root)
    try:
        commands = [line.strip() for line in banner if line.strip().startswith("PREFECT_API_URL=")]
        trigger = f"PREFECT_API_URL={env['PREFECT_API_URL']} prefect deployment run 'dqrelease-release/overlap'"
        assert trigger in commands, banner
        shell = {key: value for key, value in env.items() if key != "PREFECT_API_URL"}
        shell["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{shell.get('PATH', '')}"
        limit = subprocess.run(next(c for c in commands if "gcl inspect" in c), shell=True, env=shell, cwd=ws.root,
                               capture_output=True, text=True, timeout=180)
        assert limit.returncode == 0 and "dqrelease-dataset-abuse" in limit.stdout, limit.stdout + limit.stderr
        for _ in range(2):
            subprocess.run(trigger, shell=True, env=shell, cwd=ws.root, check=True, timeout=180,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        _wait_for(lambda: list(pause.glob("mechanism-*.ready")), "the first run's mechanism", 300)
        runs = _wait_for(
            lambda: (found := asyncio.run(_deployment_runs("dqrelease-release/overlap")))
            and any(run.state.name == "AwaitingConcurrencySlot" for run in found) and found,
            "the second run to wait for the deployment's slot", 120,
        )
        assert [run.state.name for run in runs].count("Running") == 1
        assert len(charges(ws.ledger)) == 1  # the held run's charge only
        time.sleep(3)  # runner polls every second: the waiting run is retried meanwhile and must stay waiting
        assert len(list(pause.glob("mechanism-*.ready"))) == 1 and len(charges(ws.ledger)) == 1

        (pause / "go").touch()
        first, second = _wait_for(
            lambda: (found := asyncio.run(_deployment_runs("dqrelease-release/overlap")))
            and all(run.state.is_final() for run in found) and found,
            "both runs to end", 300,
        )
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=60)
    listed = subprocess.run(next(c for c in commands if "flow-run ls" in c), shell=True, env=shell, cwd=ws.root,
                            capture_output=True, text=True, timeout=180)
    assert listed.returncode == 0 and str(first.name) in listed.stdout, listed.stdout + listed.stderr
    assert [first.state.name, second.state.name] == ["Completed", "Completed"], (first.state, second.state)
    assert second.start_time >= first.end_time  # never overlapping
    made = [datetime.fromisoformat(charge["charged_at"]) for charge in charges(ws.ledger)]
    assert len(made) == 2 and first.start_time <= made[0] <= first.end_time <= made[1] <= second.end_time


async def _scheduled_runs(hours: list[tuple[float, bool]]) -> list:
    """Runs of a fresh deployment scheduled ``hours`` from now, ``(hours, made by the schedule)`` each.

    A run the deployment's schedule made (``auto_scheduled``) cannot be created through the API, so they are
    written with the server's own model functions into the test server's database.
    """
    from prefect.client.orchestration import get_client
    from prefect.server import models, schemas
    from prefect.server.database import provide_database_interface

    now = datetime.now(UTC)
    async with get_client() as client:
        flow_id = await client.create_flow_from_name("dqrelease-release")
        deployment_id = await client.create_deployment(flow_id=flow_id, name=f"catch-up-{now.timestamp()}")
    db = provide_database_interface()
    async with db.session_context(begin_transaction=True) as session:
        created = [
            await models.flow_runs.create_flow_run(session=session, flow_run=schemas.core.FlowRun(
                flow_id=flow_id, deployment_id=deployment_id, auto_scheduled=auto,
                state=schemas.states.Scheduled(scheduled_time=now + timedelta(hours=offset)),
            ))
            for offset, auto in hours
        ]
        ids = [run.id for run in created]
    async with get_client() as client:
        return [await client.read_flow_run(run_id) for run_id in ids]


def test_only_the_latest_missed_scheduled_run_is_caught_up():
    """A scheduled run is skipped when a later scheduled run of its deployment is due too; a manual one never is."""
    from dqrelease.runtime.schedules import superseded_by

    runs = asyncio.run(_scheduled_runs([(-2, True), (-1, True), (1, True), (-3, False)]))
    oldest, latest_due, _not_due_yet, manual = runs
    assert superseded_by(oldest).id == latest_due.id
    assert superseded_by(latest_due) is None  # the next run is not due yet: this one runs
    assert superseded_by(manual) is None  # started by hand (`prefect deployment run`): never skipped


def test_a_superseded_scheduled_run_ends_cancelled_without_running_and_the_latest_runs():
    """The flow decorator end to end: the older missed run is Cancelled before its function runs; the latest runs."""
    from prefect import flow
    from prefect.flow_engine import run_flow

    from dqrelease.runtime.schedules import one_release_per_dataset

    called: list[str] = []

    @flow(persist_result=False)
    @one_release_per_dataset(lambda label: "catch-up-test")
    def scheduled(label: str) -> str:
        called.append(label)
        return label

    oldest, latest_due, _not_due_yet = asyncio.run(_scheduled_runs([(-2, True), (-1, True), (1, True)]))
    skipped = run_flow(scheduled, flow_run=oldest, parameters={"label": "oldest"}, return_type="state")
    assert skipped.is_cancelled() and "only the latest missed run of a schedule is caught up" in skipped.message
    ran = run_flow(scheduled, flow_run=latest_due, parameters={"label": "latest"}, return_type="state")
    assert ran.is_completed()
    assert called == ["latest"]
