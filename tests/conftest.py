"""Test-session setup shared by every test folder.

Prefect gets a private home and no analytics; the Prefect test server (one per session, it takes 10-25 s to
start) is created lazily by the ``prefect_harness`` fixture only for tests that run flows.

Data sets outside the repo are found by ``dqrelease.inputs.data_home`` (``DQRELEASE_DATA``, else ``../shared/data``);
a test that needs one asks the ``require_shared_data`` fixture for the file and is skipped when it is absent.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from dqrelease.inputs.data_home import DATA_FIX, shared_data_dir, shared_data_file

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    # each pytest-xdist worker gets a Prefect home of its own: the controller's (inherited) would be one SQLite
    # database for every worker's temporary servers ("database is locked")
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"dqrelease-tests-prefect-{_WORKER}-")
else:
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="dqrelease-tests-prefect-"))
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "240")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# a `dqrelease run` started by a test uses Prefect's temporary server: no test leaves a local server running
# (tests/cli/test_prefect_server.py starts and stops one explicitly)
os.environ.setdefault("DQRELEASE_PREFECT_SERVER", "ephemeral")


_SHARED_DATA_WORDS = re.compile(
    r"shared_data_file|shared_data_dir|DQRELEASE_DATA|data_home|\.\./shared|[\"/]kdd99[\"/]"
)
"""Words of a test module that finds the shared data without the ``require_shared_data`` fixture: the data-home rule
itself, or the KDD99 example, whose config reads ``${DQRELEASE_DATA}``. Such a module is marked whole; any other test
is marked by its fixtures (a marked test runs twice, an unmarked one reading the data would go unchecked)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``shared_data`` every test that may read the shared data sets.

    A test is marked when it requests ``require_shared_data`` (directly or through another fixture: pytest lists the
    whole closure in ``fixturenames``) or when its module's text names the data-home rule or the KDD99 example.
    Naming a data set is not enough (engine tests cite KDD99's sizes, Adult's and McSherry's papers without reading
    a file): the first rule of this kind marked 370 tests and the data-hidden run took about 5 minutes.
    CI runs the suite once with the data, then only ``-m shared_data`` with the data hidden (``.ci/run``): a test
    that cannot see the data behaves the same in both runs unless it is one of these.
    """
    del config
    reads_data: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if path not in reads_data:
            reads_data[path] = bool(_SHARED_DATA_WORDS.search(path.read_text(encoding="utf-8")))
        if reads_data[path] or "require_shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.shared_data)


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test server for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=240):
        yield


def require_shared_data_file(relative: str) -> Path:
    """The path of a shared data file, or skip the calling test with a reason naming the missing file."""
    path = shared_data_file(relative)
    if path is None:
        root = shared_data_dir()
        where = f"in {root}" if root is not None else "(no shared data directory)"
        pytest.skip(f"shared data file {relative} not found {where}; {DATA_FIX}")
    return path


@pytest.fixture(scope="session")
def require_shared_data() -> Callable[[str], Path]:
    """``require_shared_data("adult_pgm/adult.csv")`` returns the file's path or skips the test."""
    return require_shared_data_file


def _spy(monkeypatch: pytest.MonkeyPatch, module: object, name: str, label: str) -> list[str]:
    """Record ``label`` for every call of ``module.name`` (the spy passes through, so a run is not broken)."""
    calls: list[str] = []
    original = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(label)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.fixture()
def ingest_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ingest of a private table (``dqrelease.tasks.prepare.ingest_source``)."""
    import dqrelease.tasks.prepare as prepare

    return _spy(monkeypatch, prepare, "ingest_source", "ingest")


@pytest.fixture()
def mechanism_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every mechanism run of the pipeline's mechanism task (``dqrelease.tasks.synthesize.run_mechanism``)."""
    import dqrelease.tasks.synthesize as synthesize_task

    return _spy(monkeypatch, synthesize_task, "run_mechanism", "mechanism")
