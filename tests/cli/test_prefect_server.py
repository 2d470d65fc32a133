"""The reusable local Prefect server: started once, found again, stale state handled, never someone else's killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.runtime import prefect_server
from dqrelease.runtime.prefect_server import ServerRecord, find_or_start, server_status, stop_server, wait_until_ready


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("DQRELEASE_STATE_DIR", str(directory))
    return directory


def _write_state(directory: Path, *, pid: int, create_time: float) -> ServerRecord:
    record = ServerRecord(
        pid=pid, create_time=create_time, api_url="http://127.0.0.1:9/api", port=9, prefect_version="3.8.8",
        started_at="2026-01-01T00:00:00+00:00", log=str(directory / "prefect-server.log"),
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "prefect-server.json").write_text(json.dumps(record.__dict__))
    return record


def test_a_state_file_naming_a_finished_process_is_stale_and_removed(state: Path):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    _write_state(state, pid=finished.pid, create_time=1.0)

    status = server_status()
    assert status.state == "stale" and status.record.pid == finished.pid
    assert not (state / "prefect-server.json").exists()
    assert server_status().state == "stopped"
    assert stop_server() == ("none", None)


def test_stop_never_kills_a_process_dqrelease_did_not_start(state: Path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # the pid is alive but its start time is not the recorded one: a reused pid, not our server
        _write_state(state, pid=other.pid, create_time=psutil.Process(other.pid).create_time() - 100.0)
        outcome, record = stop_server()
        assert outcome == "stale" and record.pid == other.pid
        assert other.poll() is None, "a process dqrelease did not start was signalled"
        assert not (state / "prefect-server.json").exists()
    finally:
        other.kill()
        other.wait()


def test_the_cli_reports_a_stale_state_file_without_stopping_anything(state: Path):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    _write_state(state, pid=finished.pid, create_time=1.0)
    result = CliRunner().invoke(app, ["server", "stop"])
    assert result.exit_code == 0, result.output
    assert f"the state file named pid {finished.pid}" in result.output and "nothing was killed" in result.output


def test_an_explicit_prefect_api_url_is_used_and_nothing_is_started(tmp_path: Path):
    code = (
        "from dqrelease.runtime.prefect_server import prefect_api\n"
        "api = prefect_api()\n"
        "print(api.source, api.url)\n"
    )
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "DQRELEASE_STATE_DIR": str(tmp_path / "s")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["configured", "http://127.0.0.1:9/api"]
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("mode", "expected"), [("ephemeral", "ephemeral None"), ("sometimes", "ConfigInvalidError")])
def test_the_server_mode_switch(tmp_path: Path, mode: str, expected: str):
    code = (
        "from dqrelease.runtime.prefect_server import prefect_api\n"
        "try:\n"
        "    api = prefect_api()\n"
        "    print(api.source, api.url)\n"
        "except Exception as error:\n"
        "    print(type(error).__name__)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env.update(DQRELEASE_PREFECT_SERVER=mode, DQRELEASE_STATE_DIR=str(tmp_path / "s"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == expected
    assert not (tmp_path / "s" / "prefect-server.json").exists()


@pytest.mark.slow
def test_a_server_is_started_once_found_again_and_stopped(state: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    port = prefect_server._free_port()
    record, started = find_or_start(port=port)
    try:
        assert started and record.port == port
        wait_until_ready(record, timeout=240)
        assert server_status().state == "running"

        # Prefect's own options, and a session of its own: a Ctrl-C to the caller's process group does not reach it
        assert psutil.Process(record.pid).cmdline()[-5:] == ["--port", str(port), "--log-level", "WARNING",
                                                              "--analytics-off"]
        assert os.getsid(record.pid) == record.pid != os.getsid(0)

        again, started_again = find_or_start()
        assert (again, started_again) == (record, False)  # found, not started twice

        shown = CliRunner().invoke(app, ["server", "status"])
        assert shown.exit_code == 0
        assert f"running: Prefect server started by dqrelease at {record.ui_url}" in shown.output
    finally:
        outcome, _ = stop_server()
    assert outcome == "stopped"
    assert not psutil.pid_exists(record.pid) or psutil.Process(record.pid).status() == psutil.STATUS_ZOMBIE
    assert server_status().state == "stopped"


@pytest.mark.parametrize(("variable", "expected"), [(None, ["None", "180"]), ("60", ["60", "60"])])
def test_heartbeats_are_off_on_servers_dqrelease_runs_unless_the_user_set_them(variable, expected):
    """Nothing reads flow-run heartbeats on our own server, and each run's end waits for the heartbeat thread.

    A configured API keeps Prefect's settings (its default: every 180 s); a user's own setting is kept anywhere.
    """
    code = (
        "from prefect.settings import get_current_settings as current\n"
        "from dqrelease.runtime.prefect_server import PrefectApi\n"
        "with PrefectApi(source='ephemeral', url=None).connected():\n"
        "    print(current().flows.heartbeat_frequency)\n"
        "with PrefectApi(source='configured', url='http://127.0.0.1:9/api').connected():\n"
        "    print(current().flows.heartbeat_frequency)\n"
    )
    env = {k: v for k, v in os.environ.items() if "HEARTBEAT" not in k}
    if variable is not None:
        env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] = variable
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == expected


@pytest.mark.parametrize(
    ("previous", "url", "inside", "after"),
    [
        (None, "http://127.0.0.1:9/api", "http://127.0.0.1:9/api", "None None"),
        ("http://127.0.0.1:8/api", "http://127.0.0.1:9/api", "http://127.0.0.1:9/api",
         "http://127.0.0.1:8/api http://127.0.0.1:8/api"),
        ("http://127.0.0.1:8/api", None, "http://127.0.0.1:8/api", "http://127.0.0.1:8/api http://127.0.0.1:8/api"),
    ],
)
def test_shared_api_gives_this_process_and_its_children_one_api_and_restores_both(previous, url, inside, after):
    """The one place that points this process (Prefect's settings) and its children (the environment) at an API."""
    code = (
        "import os, subprocess, sys\n"
        "from prefect.settings import get_current_settings as current\n"
        "from dqrelease.runtime.prefect_server import shared_api\n"
        f"with shared_api({url!r}) as url:\n"
        "    child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"PREFECT_API_URL\"])'],\n"
        "                           capture_output=True, text=True, check=True).stdout.strip()\n"
        "    print(url, current().api.url, child)\n"
        "print(os.environ.get('PREFECT_API_URL'), current().api.url)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    if previous is not None:
        env["PREFECT_API_URL"] = previous
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.splitlines() == [f"{inside} {inside} {inside}", after]


def _status_output(env_extra: dict[str, str], tmp_path: Path) -> str:
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env.update(DQRELEASE_STATE_DIR=str(tmp_path / "state"), PREFECT_HOME=str(tmp_path / "home"), **env_extra)
    done = subprocess.run([sys.executable, "-m", "dqrelease.cli", "server", "status"], capture_output=True, text=True,
                          env=env, check=True, timeout=120)
    return done.stdout


def test_server_status_prints_the_prefect_api_url_to_export_for_the_server_dqrelease_started(tmp_path: Path):
    """A `prefect` command from a plain shell needs it: without it, it starts a temporary server of its own."""
    # the state file names a live process of ours (this test's), so the status is "starting" (nothing answers)
    me = psutil.Process(os.getpid())
    _write_state(tmp_path / "state", pid=me.pid, create_time=me.create_time())
    output = _status_output({}, tmp_path)
    assert "starting: Prefect server started by dqrelease at http://127.0.0.1:9" in output
    assert "export PREFECT_API_URL=http://127.0.0.1:9/api" in output.splitlines()[1]


def test_server_status_prints_the_configured_prefect_api_url_to_export(tmp_path: Path):
    output = _status_output({"PREFECT_API_URL": "http://127.0.0.1:8/api"}, tmp_path)
    lines = output.splitlines()
    assert "runs use the Prefect API configured in Prefect's settings (http://127.0.0.1:8/api)" in lines[0]
    assert "export PREFECT_API_URL=http://127.0.0.1:8/api" in lines[1]
    assert "not running" in lines[2]
