"""Repository-wide checks: ruff is clean, the engine's import boundary holds, and no machine path is committed."""

import ast
import pathlib
import re
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


PAPER_FILE_NUMBERS = re.compile(r"\bseeds? 00[0-9]\b|\bfiles? 00[0-9]\b|\bCKS 2020\b", re.IGNORECASE)
"""A paper cited by the number of our copy's file ("seed" or "file" and three digits) or by initials ("CKS" and a year).

This file spells the patterns apart (``"seed " + "004"``) so that it passes its own check.
"""

PAPER_FILE_NUMBERS_ALLOWED: frozenset[str] = frozenset()
"""Tracked files that may still cite a paper by file number: none."""


def test_no_tracked_file_cites_a_paper_by_file_number():
    """Papers are cited by authors, title and year (CONTRIBUTING.md), never by file number or initials."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    offenders = []
    for name in filter(None, listed.stdout.split("\0")):
        if name in PAPER_FILE_NUMBERS_ALLOWED:
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (plots, parquet) or deleted in the working tree
        offenders += [f"{name}: {match.group(0)!r}" for match in PAPER_FILE_NUMBERS.finditer(text)]
    assert offenders == [], "cite papers by authors, title and year: " + "; ".join(offenders[:10])


def test_the_paper_citation_check_finds_file_numbers():
    cited = ["as in seed " + "004", "Seeds " + "000 and 003", "the DualQuery paper, file " + "001", "(CKS" + " 2020)"]
    assert all(PAPER_FILE_NUMBERS.search(text) for text in cited)
    assert not any(PAPER_FILE_NUMBERS.search(text) for text in ["seed = 0", "files 0600", "run.seed 20251126"])
