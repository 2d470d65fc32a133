"""A refusal stays one line: multiprocessing's resource tracker says nothing on the run's standard error.

The tracker unlinks the named semaphores a process leaves registered when it ends and warns about them on the
standard error it inherited (``dqrelease.cli.app.quiet_resource_tracker``). The child below leaks one on purpose:
it creates a ``spawn`` lock and ends with ``os._exit`` before any finalizer runs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

LEAK = """
import multiprocessing, os, sys
if sys.argv[1] == "quiet":
    from dqrelease.cli.app import quiet_resource_tracker
    quiet_resource_tracker()
lock = multiprocessing.get_context("spawn").Lock()
sys.stderr.write("the one line\\n")
sys.stderr.flush()
os._exit(4)
"""


def _stderr(mode: str, **env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key != "DQRELEASE_DEBUG"} | env
    done = subprocess.run([sys.executable, "-c", LEAK, mode], capture_output=True, text=True, timeout=120,
                          env=environment)
    assert done.returncode == 4
    return done.stderr


def test_the_leak_this_test_makes_is_reported_by_a_tracker_started_plainly():
    assert "leaked semaphore" in _stderr("plain")  # the check below would pass for nothing without this


@pytest.mark.parametrize("debug", [False, True], ids=["quiet", "debug"])
def test_the_cli_starts_a_tracker_that_prints_nothing_unless_debugging(debug: bool):
    stderr = _stderr("quiet", **({"DQRELEASE_DEBUG": "1"} if debug else {}))
    if debug:
        assert "leaked semaphore" in stderr
    else:
        assert stderr == "the one line\n"
