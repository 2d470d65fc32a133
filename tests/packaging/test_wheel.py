"""The wheel built from the repo installs only the project's own top-level packages.

The repo keeps ``flows/``, ``tasks/``, ``sql/`` and ``expectations/`` at its top level; they must be installed as
subpackages of ``dqrelease`` (pyproject's package-dir mapping), never as generic top-level modules that would clash
with a Prefect user's own ``flows`` or ``tasks``.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
OWN_TOP_LEVEL = {"dq_engine", "dqrelease"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    source = tmp_path_factory.mktemp("source") / "dqrelease"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", "dqrelease-out", "bench", "tests", "docs", "examples"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = out.glob("dqrelease-*.whl")
    return path


def test_wheel_installs_no_generic_top_level_module(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == OWN_TOP_LEVEL


def test_wheel_carries_every_source_module_and_sql_model(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    mapping = {"flows": "dqrelease/flows", "tasks": "dqrelease/tasks", "sql": "dqrelease/sql",
               "expectations": "dqrelease/expectations", "dq_engine": "dq_engine", "dqrelease": "dqrelease"}
    missing = []
    for folder, installed in mapping.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".sql") and "__pycache__" not in path.parts:
                target = f"{installed}/{path.relative_to(ROOT / folder).as_posix()}"
                if target not in names:
                    missing.append(target)
    assert missing == []
