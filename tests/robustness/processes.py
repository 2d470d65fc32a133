"""Running ``dqrelease`` as real processes: the environment they share with the test session, one process
in its own session (to kill its whole group), and many at once through ``fork_runs.py``.

Processes use the session's Prefect test server (``PREFECT_API_URL``), never start one of their own, and get a
private temporary folder (``TMPDIR``) so their temporary files can be scanned for leaks. They run with
Prefect's user defaults (the test session's quieter ``PREFECT_LOGGING_LEVEL`` is removed), so their stderr is
what an operator would see.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.robustness.abuse_harness import Outcome, Workspace

LAUNCHER = Path(__file__).with_name("fork_runs.py")
_SESSION_ONLY = ("PREFECT_LOGGING_LEVEL", "PYTEST_CURRENT_TEST", "DQRELEASE_DEBUG", "ABUSE_CORPUS_TRANSCRIPT")


def process_environment(ws: Workspace, **extra: str) -> dict[str, str]:
    """The environment of a ``dqrelease`` process of this session (see the module docstring)."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    assert url, "the Prefect test server is not running (use the prefect_harness fixture)"
    env = {k: v for k, v in os.environ.items() if k not in _SESSION_ONLY}
    ws.tmp.mkdir(exist_ok=True)
    env.update(
        PREFECT_API_URL=url, TMPDIR=str(ws.tmp), DQRELEASE_STATE_DIR=str(ws.root / "state"), COLUMNS="200", **extra
    )
    return env


def cli_command(*args: str) -> list[str]:
    """The ``dqrelease`` console script of this interpreter's environment (or ``python -m dqrelease.cli``)."""
    script = Path(sys.executable).with_name("dqrelease")
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "dqrelease.cli", *args]


@dataclass
class Running:
    """A ``dqrelease`` process started in its own session."""

    process: subprocess.Popen
    stdout: Path
    stderr: Path
    started: datetime

    def kill_group(self) -> None:
        """SIGKILL the whole process group (the run and anything it started), then reap it."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)

    def outcome(self) -> Outcome:
        return Outcome(
            exit_code=self.process.returncode, stdout=self.stdout.read_text(errors="replace"),
            stderr=self.stderr.read_text(errors="replace"), started=self.started,
        )


def start(ws: Workspace, *args: str, env: dict[str, str], name: str = "run") -> Running:
    """Start ``dqrelease ARGS`` in ``ws`` in a new session (its own process group)."""
    stdout, stderr = ws.root / f"{name}.stdout", ws.root / f"{name}.stderr"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(
            cli_command(*args), cwd=ws.root, env=env, stdout=out, stderr=err, start_new_session=True
        )
    return Running(process=process, stdout=stdout, stderr=stderr, started=datetime.now(UTC))


def wait_for_file(path: Path, running: list[Running], *, timeout: float = 300) -> None:
    """Wait until ``path`` exists; fail early if a watched process exits first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        for run in running:
            if run.process.poll() is not None:
                raise AssertionError(
                    f"the process exited ({run.process.returncode}) before {path.name}:\n{run.stderr.read_text()}"
                )
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout:g} s"
        time.sleep(0.1)


@dataclass
class Job:
    """One command line for :func:`run_at_once`."""

    ws: Workspace
    args: tuple[str, ...]
    name: str
    env: dict[str, str]


def run_at_once(
    jobs: list[Job], folder: Path, *, timeout: float = 900, while_running: Callable[[], None] | None = None
) -> list[Outcome]:
    """Run every job as its own process, all at once (``fork_runs.py``), and return their outcomes in order.

    ``while_running`` is called once the processes are started (e.g. to release them from a pause point).
    """
    folder.mkdir(parents=True, exist_ok=True)
    specs = [
        {
            "argv": list(job.args), "cwd": str(job.ws.root), "env": job.env,
            "unset": [key for key in _SESSION_ONLY if key not in job.env],
            "stdout": str(job.ws.root / f"{job.name}.stdout"), "stderr": str(job.ws.root / f"{job.name}.stderr"),
        }
        for job in jobs
    ]
    jobs_file = folder / "jobs.json"
    jobs_file.write_text(json.dumps(specs))
    started = datetime.now(UTC)
    launcher = subprocess.Popen(
        [sys.executable, str(LAUNCHER), str(jobs_file)], env=dict(jobs[0].env), start_new_session=True
    )
    try:
        if while_running is not None:
            while_running()
        launcher.wait(timeout=timeout)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    assert launcher.returncode == 0, f"the launcher failed ({launcher.returncode})"
    codes = json.loads((folder / "jobs.json.result").read_text())["exit_codes"]
    return [
        Outcome(
            exit_code=code, stdout=Path(spec["stdout"]).read_text(errors="replace"),
            stderr=Path(spec["stderr"]).read_text(errors="replace"), started=started,
        )
        for code, spec in zip(codes, specs, strict=True)
    ]
