"""What ``dqrelease run`` shows while it works: live from the first second, then its stages in order.

A run is a fresh ``python -m dqrelease.cli`` process releasing the Adult slice of ``tests/adult_slice.py`` (4
DualQuery rounds and the table fit) through the session's Prefect test server: once on a pseudo-terminal (what an
operator's shell is), once with its output captured by pipes (a log file, a scheduler, CI).
"""

from __future__ import annotations

import os
import pty
import re
import select
import struct
import subprocess
import sys
import time
from fcntl import ioctl
from pathlib import Path
from termios import TIOCSWINSZ

import pytest

from dqrelease.cli.live import PLAIN_PREFIX
from dqrelease.errors import ExitCode
from dqrelease.runtime.progress import STAGES
from tests.adult_slice import release_config, write_slice

pytestmark = pytest.mark.usefixtures("prefect_harness")

RUN_STAGES = [name for name in STAGES if name != "count"]
"""The stages of a release with a public n, in order (a noisy count is the only optional stage)."""

FIRST_OUTPUT_SECONDS = 1.0
"""The first output comes within this many seconds of the start, or, on a machine so loaded that a command's fixed
start (:func:`_cli_start_seconds`) takes longer, within :data:`LOADED_MARGIN` seconds of that."""

LOADED_MARGIN = 0.5
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\r")


def _workspace(tmp_path: Path) -> Path:
    write_slice(tmp_path)
    config = tmp_path / "release.toml"
    config.write_text(release_config(rounds="rounds = 4", run='seed_mode = "secure"'))
    return config


def _environment(**extra: str) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), **extra}


def _cli_start_seconds() -> float:
    """Seconds every ``dqrelease`` command takes now before its own code runs.

    That is the interpreter's start, the CLI's imports and Typer's parameter conversion (``typer._adapters``, which
    imports pydantic: Typer loads it for the first option it converts, whatever the command).
    """
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import dqrelease.cli, typer._adapters"], check=True, timeout=60)
    return time.monotonic() - started


def _run_on_a_terminal(args: list[str], cwd: Path, *, timeout: float = 600.0) -> tuple[float, str, str, int]:
    """Run ``dqrelease ARGS`` with a pseudo-terminal as stdin, stdout and stderr (160 x 50).

    Returns:
        Seconds from the start to the first output, the first output, all output without terminal control
        sequences, and the exit code.
    """
    controller, terminal = pty.openpty()
    ioctl(terminal, TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    environment = _environment(TERM="xterm-256color", COLUMNS="160", LINES="50")
    for variable in ("NO_COLOR", "FORCE_COLOR", "TERM_PROGRAM"):
        environment.pop(variable, None)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "dqrelease.cli", *args], stdin=terminal, stdout=terminal, stderr=terminal, cwd=cwd,
        env=environment, start_new_session=True,
    )
    os.close(terminal)
    chunks: list[bytes] = []
    first_at = None
    deadline = started + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.05)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the process has ended
                break
            if not chunk:
                break
            if first_at is None and ANSI.sub("", chunk.decode(errors="replace")).strip():
                first_at = time.monotonic() - started
                first = ANSI.sub("", chunk.decode(errors="replace")).strip()
            chunks.append(chunk)
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
    assert first_at is not None, "the run printed nothing"
    return first_at, first, ANSI.sub("", b"".join(chunks).decode(errors="replace")), code


def test_a_run_on_a_terminal_shows_something_within_a_second_then_the_plan_and_each_stage_in_order(tmp_path: Path):
    config = _workspace(tmp_path)
    limit = max(FIRST_OUTPUT_SECONDS, _cli_start_seconds() + LOADED_MARGIN)
    first_at, first, output, code = _run_on_a_terminal(["run", str(config)], tmp_path)

    assert code == ExitCode.OK, output[-2000:]
    assert first_at < limit, f"first output after {first_at:.2f} s: {first!r}"
    assert "checking" in first and "nothing is read or charged yet" in first
    plan = output.index("plan: release adult-test: dualquery")
    assert re.search(r"epsilon=[0-9.]+, delta=1e-06 \(tight accounting\), 4 rounds \+ \d+ fit rounds", output)
    # a finished stage's row starts with a tick; each row is redrawn many times: its first tick is when it ended
    ended = [output.find(f"✓ {name} ") for name in RUN_STAGES]
    assert min(ended) > plan, dict(zip(RUN_STAGES, ended, strict=True))
    assert ended == sorted(ended), dict(zip(RUN_STAGES, ended, strict=True))
    assert "published" in output[max(ended):]


def _plain_run(tmp_path: Path, *extra: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Run the slice's release with stdout and stderr captured; return its plain progress lines (prefix removed)."""
    config = _workspace(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "run", str(config), *extra], capture_output=True, text=True,
        cwd=tmp_path, env=_environment(COLUMNS="80"), timeout=900, check=False,
    )
    assert result.returncode == ExitCode.OK, result.stderr
    assert "\x1b[" not in result.stderr  # no redraws in a log
    lines = [line for line in result.stderr.splitlines() if re.match(PLAIN_PREFIX, line)]
    return [re.sub(PLAIN_PREFIX, "", line) for line in lines], result


def _check_stages_in_order(events: list[str]) -> None:
    assert events[0].startswith("plan: release adult-test: dualquery, epsilon=")
    started = [event.split(":")[0] for event in events if ": started (" in event]
    done = [event.split(":")[0] for event in events if re.search(r": done \(\d+:\d\d:\d\d\)$", event)]
    assert started == RUN_STAGES
    assert done == RUN_STAGES
    rounds = [event for event in events if event.startswith("mechanism: round ")]
    assert rounds[-1].startswith("mechanism: round 4/4, oracle ")
    assert any(event.startswith("fit: round ") for event in events)
    for event in events:  # n (1,500 here) may be private: no count from the data on any line
        assert not re.search(r"\b1,?500\b", event), event


def test_a_run_writing_to_pipes_prints_plain_lines_for_each_stage_in_order(tmp_path: Path):
    events, result = _plain_run(tmp_path)
    _check_stages_in_order(events)
    assert result.stdout.splitlines()[0].startswith("release adult-test-")


@pytest.mark.slow
def test_a_dask_run_shows_the_same_stages_and_the_workers_rounds_without_log_noise(tmp_path: Path):
    events, result = _plain_run(tmp_path, "--dask", "local:1")
    _check_stages_in_order(events)  # the rounds come from the worker process
    others = [line for line in result.stderr.splitlines() if not re.match(PLAIN_PREFIX, line)]
    assert others == []  # no Prefect INFO line, no "Sending large graph", no "Worker process still alive"
