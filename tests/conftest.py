"""Test-session setup shared by every test folder.

Prefect gets a private home and no analytics; the Prefect test server (one per session, it takes 10-25 s to
start) is created lazily by the ``prefect_harness`` fixture only for tests that run flows.
"""

from __future__ import annotations

import os
import tempfile

import pytest

_HOME = tempfile.mkdtemp(prefix="dqrelease-tests-prefect-")
os.environ.setdefault("PREFECT_HOME", _HOME)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test server for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield
