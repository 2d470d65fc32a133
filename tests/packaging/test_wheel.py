"""The wheel built from the repo installs only the project's own top-level packages.

The repo keeps ``flows/``, ``tasks/``, ``sql/`` and ``expectations/`` at its top level; they must be installed as
subpackages of ``dqrelease`` (pyproject's package-dir mapping), never as generic top-level modules that would clash
with a Prefect user's own ``flows`` or ``tasks``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from dqrelease.outputs.manifest import CODE_SUFFIXES

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


def test_wheel_carries_every_source_module_sql_model_and_template(wheel):
    """Every file the code hash covers (modules, SQL models, the error report's Jinja2 templates) ships."""
    names = set(zipfile.ZipFile(wheel).namelist())
    mapping = {"flows": "dqrelease/flows", "tasks": "dqrelease/tasks", "sql": "dqrelease/sql",
               "expectations": "dqrelease/expectations", "dq_engine": "dq_engine", "dqrelease": "dqrelease"}
    missing = []
    for folder, installed in mapping.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in CODE_SUFFIXES and "__pycache__" not in path.parts:
                target = f"{installed}/{path.relative_to(ROOT / folder).as_posix()}"
                if target not in names:
                    missing.append(target)
    assert missing == []


def test_the_error_report_renders_from_the_templates_in_the_wheel(wheel, tmp_path):
    """The report's Jinja2 templates are package data: an unpacked wheel renders the report without the checkout."""
    from dqrelease.outputs.report import render_markdown
    from dqrelease.outputs.report.charts import CHARTS

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    fixture = ROOT / "tests/pipeline/data/error_report_adult.json"
    script = (
        "import json, pathlib, sys\n"
        "import dqrelease.outputs.report as report\n"
        "from dqrelease.outputs.report.charts import CHARTS\n"
        "assert pathlib.Path(report.__file__).is_relative_to(sys.argv[1]), report.__file__\n"
        "data = json.loads(pathlib.Path(sys.argv[2]).read_text())\n"
        "sys.stdout.write(report.render_markdown(data, dict.fromkeys(CHARTS)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(site), str(fixture)], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == render_markdown(json.loads(fixture.read_text()), dict.fromkeys(CHARTS))
