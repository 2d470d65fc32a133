"""Test-only pause points: hold a run at a named stage so a fault test can kill it there.

The fault-injection tests (``tests/robustness/``) must kill a release at a known moment: while it ingests,
while its mechanism runs, and while it publishes. A run calls :func:`pause_point` at each of those stages;
the call does nothing unless the environment variable ``DQRELEASE_TEST_PAUSE_AT`` names that stage. Then it
creates ``<DQRELEASE_TEST_PAUSE_DIR>/<stage>-<pid>.ready`` and waits (polling) until a file ``go`` exists in
that directory, or :data:`MAX_PAUSE_SECONDS` have passed, and the run carries on. A fault test waits for the
ready file and kills the process group; a concurrency test creates ``go`` to release every waiting run at once.

Invariant: inert in production. Nothing is read but the two environment variables, nothing is written
unless ``DQRELEASE_TEST_PAUSE_AT`` equals the stage, and no public setting or flag reaches this module.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["DIRECTORY_VARIABLE", "MAX_PAUSE_SECONDS", "PAUSE_VARIABLE", "STAGES", "pause_point"]

PAUSE_VARIABLE = "DQRELEASE_TEST_PAUSE_AT"
"""Names the stage to pause at (one of :data:`STAGES`); unset in production."""

DIRECTORY_VARIABLE = "DQRELEASE_TEST_PAUSE_DIR"
"""Directory of the ready files and of the ``go`` file (required when a pause is requested)."""

STAGES = ("ingest", "mechanism", "publish")
"""Where runs call :func:`pause_point`: after the raw table is loaded (before validation), after the first
round of the mechanism (the charge is committed), between moving the internal files and the release."""

MAX_PAUSE_SECONDS = 600.0
"""A paused run carries on after this long even without ``go`` (a test that died must not hang it forever)."""

_POLL_SECONDS = 0.05


def pause_point(stage: str) -> None:
    """Pause here if ``DQRELEASE_TEST_PAUSE_AT`` names ``stage`` (see the module docstring); else return at once.

    Raises:
        RuntimeError: A pause was requested without ``DQRELEASE_TEST_PAUSE_DIR`` (a broken test setup).
    """
    if os.environ.get(PAUSE_VARIABLE) != stage:
        return
    directory = os.environ.get(DIRECTORY_VARIABLE)
    if not directory:
        raise RuntimeError(f"{PAUSE_VARIABLE}={stage} needs {DIRECTORY_VARIABLE} (a test-only setting)")
    folder = Path(directory)
    (folder / f"{stage}-{os.getpid()}.ready").touch()
    deadline = time.monotonic() + MAX_PAUSE_SECONDS
    while not (folder / "go").exists() and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
