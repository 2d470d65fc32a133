"""`dqrelease serve` registers a cron-scheduled deployment of the release flow."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
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
    process = subprocess.Popen(
        [sys.executable, "-m", "dqrelease.cli", "serve", str(config), "--cron", "0 6 1 * *", "--name", "monthly"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deployment = None
        deadline = time.monotonic() + 90
        while deployment is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(1)
            deployment = asyncio.run(_deployment("dqrelease-release/monthly"))
        assert process.poll() is None, process.stdout.read().decode()[-2000:]
        assert deployment is not None
        [schedule] = deployment.schedules
        assert schedule.schedule.cron == "0 6 1 * *"
        assert deployment.parameters == {"config_path": str(config)}
    finally:
        process.terminate()
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
