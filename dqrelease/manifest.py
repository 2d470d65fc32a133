"""The run manifest: everything an auditor needs to re-run a release and check its bytes.

Two views are written:

* ``internal/<run_id>/manifest.json`` (audit record, internal): config and its hash, hashes of the input
  files and of the schema, package versions, git commit, privacy events and totals in both accounting
  modes, the ledger charge, solver settings, output file hashes, and the path of the restricted seed file
  (never the seed itself).
* ``releases/<run_id>/release.json`` (public): the same minus the input-file hashes. A hash of the private
  input is a deterministic function of the data; with all but one record known it would confirm a guess of
  the last one, so it never leaves the internal directory.
"""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from dqrelease.config import ReleaseConfig, config_hash, file_sha256

__all__ = ["PACKAGES", "build_manifest", "git_commit", "package_versions", "write_json"]

PACKAGES = (
    "dqrelease", "numpy", "pandas", "scipy", "ortools", "opendp", "duckdb", "pyarrow", "great_expectations",
    "prefect", "pydantic", "matplotlib",
)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape a release."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(start: Path) -> str | None:
    """The git commit of the code, if it runs from a git checkout."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=start, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def input_hashes(config: ReleaseConfig) -> dict[str, str]:
    """SHA-256 of every input file (internal: see the module docstring)."""
    paths = list(config.source.paths)
    if config.source.database is not None:
        paths.append(config.source.database)
    return {str(p): file_sha256(p) for p in paths if Path(p).is_file()}


def build_manifest(
    *,
    config: ReleaseConfig,
    config_path: Path,
    run_id: str,
    started: str,
    finished: str,
    plan: dict[str, Any],
    charges: list[dict[str, Any]],
    outputs: dict[str, dict[str, str]],
    rows: int,
    seed_file: str | None,
    public: bool,
) -> dict[str, Any]:
    """The manifest as a dict (``public=True`` drops the input-file hashes and the seed-file path)."""
    manifest: dict[str, Any] = {
        "run_id": run_id,
        "release": config.name,
        "started": started,
        "finished": finished,
        "config_path": str(config_path),
        "config_sha256": config_hash(config),
        "config": json.loads(config.model_dump_json(exclude={"run": {"seed"}})),
        "schema_sha256": file_sha256(config.schema_file),
        "packages": package_versions(),
        "git_commit": git_commit(Path(__file__).parent),
        "privacy": plan,
        "ledger_charges": charges,
        "outputs": outputs,
        "rows_published": rows,
        "seeded": config.run.seed_mode == "seeded",
    }
    if not public:
        manifest["input_sha256"] = input_hashes(config)
        manifest["seed_file"] = seed_file
    return manifest


def write_json(data: dict[str, Any], path: Path) -> Path:
    """Write pretty JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path
