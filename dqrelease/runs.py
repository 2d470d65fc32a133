"""A run's identity, randomness and directories (staging, then atomic publication).

Layout under ``output.directory``::

    releases/<run_id>/      published: synthetic.parquet / .csv / .duckdb and release.json (public)
    internal/<run_id>/      INTERNAL: error_report.{json,md,html}, manifest.json (audit), seed (0600)
    .staging/<run_id>/      work in progress; renamed into place only when every step succeeded
    work.duckdb             the working DuckDB file (holds the raw private table: internal)

A failed run leaves no partial release: the staging directory is removed (its budget charge, if any,
stays: charges are never refunded).
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dq_engine.rng import fresh_seed
from dqrelease.config import ReleaseConfig

__all__ = ["RunContext", "new_run"]


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Paths and identity of one run.

    Attributes:
        run_id: ``<name>-<UTC time>-<random hex>``.
        started: UTC start time (ISO 8601).
        output: ``output.directory``.
        staging: Staging directory of this run.
        database: Working DuckDB file.
        seeded: Whether the run uses a seed (tests / audits).
    """

    run_id: str
    started: str
    output: Path
    staging: Path
    database: Path
    seeded: bool

    @property
    def staging_release(self) -> Path:
        """Staged public files."""
        return self.staging / "release"

    @property
    def staging_internal(self) -> Path:
        """Staged internal files."""
        return self.staging / "internal"

    @property
    def release_dir(self) -> Path:
        """Final public directory."""
        return self.output / "releases" / self.run_id

    @property
    def internal_dir(self) -> Path:
        """Final internal directory."""
        return self.output / "internal" / self.run_id

    def write_seed(self, seed: int) -> Path:
        """Store the seed of a seeded run in a restricted (0600) file in the staged internal directory."""
        self.staging_internal.mkdir(parents=True, exist_ok=True)
        path = self.staging_internal / "seed"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f"{seed}\n")
        return self.internal_dir / "seed"

    def publish(self) -> None:
        """Move the staged internal files, then the release, into place (each a single rename)."""
        self.internal_dir.parent.mkdir(parents=True, exist_ok=True)
        self.release_dir.parent.mkdir(parents=True, exist_ok=True)
        if self.staging_internal.exists():
            os.replace(self.staging_internal, self.internal_dir)
        os.replace(self.staging_release, self.release_dir)
        shutil.rmtree(self.staging, ignore_errors=True)

    def abandon(self) -> None:
        """Remove everything staged (a failed run publishes nothing)."""
        shutil.rmtree(self.staging, ignore_errors=True)


def new_run(config: ReleaseConfig, *, output: Path | None = None) -> RunContext:
    """Create the run id and the staging directories.

    Args:
        config: The release config.
        output: Override of ``output.directory`` (used by ``verify`` to re-run into a scratch directory).
    """
    started = datetime.now(UTC)
    run_id = f"{config.name}-{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
    root = Path(output) if output is not None else config.output.directory
    staging = root / ".staging" / run_id
    (staging / "release").mkdir(parents=True, exist_ok=False)
    (staging / "internal").mkdir(parents=True, exist_ok=False)
    database = config.run.database if config.run.database is not None and output is None else root / "work.duckdb"
    return RunContext(
        run_id=run_id,
        started=started.isoformat(),
        output=root,
        staging=staging,
        database=database,
        seeded=config.run.seed_mode == "seeded",
    )


def run_seed(config: ReleaseConfig) -> int:
    """The seed a run uses: the configured one (seeded mode) or a fresh secure one (recorded nowhere)."""
    return config.run.seed if config.run.seed_mode == "seeded" else fresh_seed()
