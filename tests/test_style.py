"""Repository-wide checks: ruff is clean and the engine's import boundary holds."""

import ast
import pathlib
import subprocess
import sys

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
    from dqrelease.config_docs import config_reference_markdown

    assert (ROOT / "docs" / "config.md").read_text() == config_reference_markdown(), (
        "docs/config.md is stale: regenerate it with python -c "
        "\"from dqrelease.config_docs import config_reference_markdown as m; open('docs/config.md','w').write(m())\""
    )
