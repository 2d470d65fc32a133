"""A failed run leaves nothing in Prefect's local result storage (``$PREFECT_HOME/storage``).

Prefect 3 pickles a flow's exception there even with ``persist_result=False``; the release flows return their
failure as an unwritten ``Failed`` state instead (:func:`dqrelease.tasks.common.failures_not_persisted`). The run is
a fresh ``python -m dqrelease.cli`` process with its own Prefect home, talking to the session's Prefect test
server, refused after the data stage (the Adult slice with an undeclared value fails validation).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dqrelease.cli.live import PLAIN_PREFIX
from dqrelease.errors import ExitCode
from tests.adult_slice import release_config, write_slice

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_a_refusal_after_the_data_stage_writes_nothing_to_prefect_result_storage(tmp_path: Path):
    from prefect.settings import PREFECT_API_URL

    write_slice(tmp_path, undeclared_value=True)
    config = tmp_path / "release.toml"
    config.write_text(release_config(cap="initial_cap_epsilon = 5.0\ninitial_cap_delta = 1e-5",
                                     run='seed_mode = "secure"'))
    home = tmp_path / "prefect-home"
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_HOME": str(home)}
    env.pop("PREFECT_RESULTS_LOCAL_STORAGE_PATH", None)
    env.pop("PREFECT_LOCAL_STORAGE_PATH", None)
    result = subprocess.run(
        [sys.executable, "-m", "dqrelease.cli", "run", str(config)], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=300, check=False,
    )
    # the exception still reaches the CLI: its exit code and its one line
    assert result.returncode == ExitCode.VALIDATION_FAILED, result.stderr
    [line] = [line for line in result.stderr.splitlines() if not re.match(PLAIN_PREFIX, line)]  # besides progress
    assert line.startswith("error: ") and "workclass" in line
    assert home.is_dir()  # the process used this Prefect home (its settings, its logs)
    storage = home / "storage"
    assert not storage.exists() or not any(storage.rglob("*")), sorted(map(str, storage.rglob("*")))
