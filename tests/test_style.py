"""Repository-wide checks: ruff is clean, the engine's import boundary holds, and no machine path is committed."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = ("prefect", "duckdb", "great_expectations", "dqrelease", "tasks", "flows", "expectations")


def test_ruff_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dq_engine_imports_no_pipeline_libraries():
    offenders = []
    for path in (ROOT / "dq_engine").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_dq_engine_import_does_not_load_pipeline_libraries():
    code = f"import sys, dq_engine; print(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_config_reference_doc_is_generated_from_the_models():
    from dqrelease.inputs.config_docs import config_reference_markdown

    assert (ROOT / "docs" / "config.md").read_text() == config_reference_markdown(), (
        "docs/config.md is stale: regenerate it with python -c "
        "\"from dqrelease.inputs.config_docs import config_reference_markdown as m; "
        "open('docs/config.md','w').write(m())\""
    )


def test_no_tracked_file_names_a_folder_of_this_machine():
    """Committed files (code, docs, benchmark results) name no absolute folder of the machine they came from.

    Checked: this checkout's root, the shared data directory as resolved here, and the home folder. A result file
    written by a benchmark records ``.`` and ``$DQRELEASE_DATA`` instead (``bench/scale_common.public_text``).
    """
    sys.path.insert(0, str(ROOT))
    from dqrelease.inputs.data_home import shared_data_dir

    folders = {str(ROOT)}
    data = shared_data_dir()
    if data is not None:
        folders.add(str(data))
    if len(pathlib.Path.home().parts) > 1:
        folders.add(str(pathlib.Path.home()) + "/")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    offenders = []
    for name in filter(None, listed.stdout.split("\0")):
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (plots, parquet) or deleted in the working tree
        offenders += [f"{name}: {folder}" for folder in folders if folder in text]
    assert offenders == [], "machine paths in tracked files (use bench/scale_common.public_text): " + "; ".join(
        offenders[:10]
    )
