"""The run manifest: everything an auditor needs to re-run a release and check its bytes.

Two views are written:

* ``internal/<run_id>/manifest.json`` (audit record, internal): config and its hash, hashes of the input
  files (every file the ingest reads, glob patterns expanded) and of the schema, package versions, a hash
  of the code, git commit, privacy events and totals in both accounting modes, the ledger charge, solver
  settings, output file hashes, and the path of the restricted seed file (never the seed itself).
  A replay (:mod:`dqrelease.outputs.replay`) refuses to run unless the config, schema, inputs, code and package
  versions still have these hashes and versions.
* ``releases/<run_id>/release.json`` (public): what a user of the table needs and nothing about the operator's
  machine (:data:`PUBLIC_SETTINGS`, :func:`build_manifest`): the release and data set names, the days of the
  run, the hashes of the config, schema and code, the public settings (privacy, workload, mechanism, accuracy,
  how the table is written), the privacy cost and the ledger's charges, the published files (their own names,
  ``synthetic.csv``, and hashes) and how the run was seeded. It holds no path, relative or absolute: no source
  file, schema file, ledger, output folder or config file name (``verify`` and replay read those from the
  internal manifest), and no package or platform inventory of the operator's machine (the internal manifest
  has them). A hash of the private input is a deterministic function of the data; with all but one record
  known it would confirm a guess of the last one, so it never leaves the internal directory either.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from dqrelease.inputs.config import ReleaseConfig, config_hash, file_sha256
from dqrelease.outputs.private_files import write_internal

__all__ = [
    "CODE_PACKAGES",
    "CODE_SUFFIXES",
    "PACKAGES",
    "PUBLIC_OUTPUT_SETTINGS",
    "PUBLIC_SETTINGS",
    "SEEDING",
    "build_manifest",
    "code_files",
    "code_sha256",
    "git_commit",
    "input_files",
    "input_hashes",
    "package_versions",
    "plan_fingerprint",
    "write_json",
]

PACKAGES = (
    "dqrelease", "numpy", "pandas", "scipy", "ortools", "opendp", "duckdb", "pyarrow", "great_expectations",
    "prefect", "pydantic", "matplotlib",
)

CODE_PACKAGES = (
    "dq_engine", "dqrelease", "dqrelease.expectations", "dqrelease.flows", "dqrelease.sql", "dqrelease.tasks",
)
"""Packages whose source files (:data:`CODE_SUFFIXES`) make up :func:`code_sha256`."""

CODE_SUFFIXES = (".py", ".sql", ".j2")
"""The source files of :data:`CODE_PACKAGES` that make up :func:`code_sha256`: modules, SQL models and the error
report's templates (:mod:`dqrelease.outputs.report.render`)."""


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


def code_files() -> dict[str, Path]:
    """The files :func:`code_sha256` hashes (:data:`CODE_SUFFIXES` in :data:`CODE_PACKAGES`), by package path."""
    files: dict[str, Path] = {}
    for package in CODE_PACKAGES:
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            for path in Path(root).rglob("*"):
                if path.suffix in CODE_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
                    files.setdefault(f"{package.replace('.', '/')}/{path.relative_to(root).as_posix()}", path)
    return files


@functools.cache
def code_sha256() -> str:
    """SHA-256 of the source files of :data:`CODE_PACKAGES`, each named by its package path.

    The same code gives the same hash wherever it is installed (editable checkout or wheel). Computed once
    per process: it describes the code this process loaded, even if the files change later.
    """
    files = code_files()
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{file_sha256(files[name])}\n".encode())
    return digest.hexdigest()


def input_files(config: ReleaseConfig) -> list[Path]:
    """Every file the ingest reads: ``source.paths`` with glob patterns expanded (sorted), and ``source.database``.

    A path that names no existing file is left out (the ingest refuses it before reading anything).
    """
    files: list[Path] = []
    for path in config.source.paths:
        text = str(path)
        matches = sorted(glob.glob(text, recursive=True)) if glob.has_magic(text) else [text]
        files.extend(Path(match) for match in matches if Path(match).is_file())
    if config.source.database is not None and Path(config.source.database).is_file():
        files.append(Path(config.source.database))
    return files


def input_hashes(config: ReleaseConfig) -> dict[str, str]:
    """SHA-256 of every input file, by path (internal: see the module docstring)."""
    return {str(path): file_sha256(path) for path in input_files(config)}


SEEDING = {
    "seeded": "seeded for a test or an audit, not a production release: anyone holding its seed can reproduce its "
    "noise (the seed is kept by the operator, never published)",
    "secure": "secure: fresh randomness from the operating system, recorded nowhere (a production release)",
}
"""How both manifests describe a run's randomness (``seeding``, next to the ``seeded`` flag), by ``run.seed_mode``."""


PUBLIC_SETTINGS = ("privacy", "workload", "mechanism", "accuracy")
"""Config sections ``release.json`` copies whole: public parameters that name no file."""

PUBLIC_OUTPUT_SETTINGS = ("formats", "rows", "numeric_values", "single_value_numbers")
"""Keys of ``[output]`` that ``release.json`` copies (not ``directory``: a folder of the operator's machine)."""


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
    """The manifest as a dict: the internal audit record, or with ``public=True`` the public ``release.json``.

    The internal manifest keeps the full config with absolute paths, the input-file hashes, the package
    versions and the seed file's path (``verify`` and replay read them). The public one is built from a list of
    what may be published (see the module docstring), not by removing what may not: a key added to the config
    later stays internal until it is added here. It gives the dates of ``started`` and ``finished``, not the times
    (the run's duration depends on the data: docs/engine.md, "What timing reveals"), and so the ledger charges
    carry their date only.
    """
    if public:
        return _public_manifest(config=config, run_id=run_id, started=started, finished=finished, plan=plan,
                                charges=charges, outputs=outputs, rows=rows)
    return {
        "run_id": run_id,
        "release": config.name,
        "started": started,
        "finished": finished,
        "config_path": str(config_path),
        "config_sha256": config_hash(config),
        "config": json.loads(config.model_dump_json(exclude={"run": {"seed"}})),
        "schema_sha256": file_sha256(config.schema_file),
        "packages": package_versions(),
        "code_sha256": code_sha256(),
        "git_commit": git_commit(Path(__file__).parent),
        "privacy": plan,
        "ledger_charges": charges,
        "outputs": outputs,
        "rows_published": rows,
        "seeded": config.run.seed_mode == "seeded",
        "seeding": SEEDING[config.run.seed_mode],
        "input_sha256": input_hashes(config),
        "seed_file": seed_file,
    }


def _public_manifest(
    *,
    config: ReleaseConfig,
    run_id: str,
    started: str,
    finished: str,
    plan: dict[str, Any],
    charges: list[dict[str, Any]],
    outputs: dict[str, dict[str, str]],
    rows: int,
) -> dict[str, Any]:
    """``release.json``: the public fields only (:func:`build_manifest`)."""
    settings = json.loads(config.model_dump_json(include=set(PUBLIC_SETTINGS)))
    settings["output"] = json.loads(config.output.model_dump_json(include=set(PUBLIC_OUTPUT_SETTINGS)))
    settings["run"] = {"seed_mode": config.run.seed_mode}
    return {
        "run_id": run_id,
        "release": config.name,
        "dataset": config.ledger.dataset_id,
        "description": config.description,
        "started": started[:10],
        "finished": finished[:10],
        "config_sha256": config_hash(config),
        "schema_sha256": file_sha256(config.schema_file),
        "code_sha256": code_sha256(),
        "dqrelease_version": package_versions()["dqrelease"],
        "settings": settings,
        "privacy": plan,
        "ledger_charges": [_public_charge(charge) for charge in charges],
        "outputs": outputs,
        "rows_published": rows,
        "seeded": config.run.seed_mode == "seeded",
        "seeding": SEEDING[config.run.seed_mode],
    }


def _public_charge(charge: dict[str, Any]) -> dict[str, Any]:
    """A ledger receipt for ``release.json``: its date, not its time (see :func:`build_manifest`)."""
    public = dict(charge)
    if isinstance(public.get("charged_at"), str):
        public["charged_at"] = public["charged_at"][:10]
    return public


def plan_fingerprint(plan: dict[str, Any]) -> str:
    """Canonical JSON of a plan's public dict, equal for ``ReleasePlan.as_dict()`` and its manifest record."""
    return json.dumps(plan, default=str, sort_keys=True)


def write_json(data: dict[str, Any], path: Path, *, internal: bool) -> Path:
    """Write pretty JSON; ``internal``: an owner-only (0600) file (:func:`~.private_files.write_internal`)."""
    text = json.dumps(data, indent=2, default=str) + "\n"
    if internal:
        return write_internal(path, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
