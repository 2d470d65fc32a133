"""A run's identity, randomness and directories (staging, then atomic publication).

Layout under ``output.directory``::

    releases/<run_id>/      published: synthetic.parquet / .csv / .duckdb and release.json (public)
    internal/<run_id>/      INTERNAL: error_report.{json,md,html}, manifest.json (audit), seed (0600)
    .staging/<run_id>/      work in progress; renamed into place only when every step succeeded; holds the
                            run's working DuckDB file work.duckdb (the raw private table) unless
                            run.database names one
    .staging/<run_id>.lock  held (flock) by the live run; a lock nobody holds marks a dead run

A failed run leaves no partial release: the staging directory (with the working database) is removed (its
budget charge, if any, stays: charges are never refunded). Publication is two renames, internal files first,
then the release; the release's rename is the commit point. A run killed before it (kill -9, power loss)
cannot clean up after itself: the next run under the same output directory finds its lock free, removes its
staging directory and, if its release was never published, the internal files it had moved already.
Concurrent runs of one config never share a working database.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dq_engine.privacy.rng import fresh_seed
from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.config import ReleaseConfig
from dqrelease.runtime.pause_points import pause_point

try:  # POSIX advisory locks mark live runs; without them (Windows) dead runs are not cleaned up
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

__all__ = ["RunContext", "new_run", "recover_dead_runs"]

STAGING = ".staging"
"""Name of the staging folder under ``output.directory``."""

_HELD: dict[str, int] = {}  # lock file -> descriptor holding its flock, for the runs of this process
_HELD_GUARD = threading.Lock()


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

    @property
    def lock_file(self) -> Path:
        """The run's lock file beside its staging directory (see the module docstring)."""
        return self.staging.with_name(f"{self.run_id}.lock")

    def publish(self) -> None:
        """Move the staged internal files, then the release, into place (each a single rename).

        The release's rename is the commit point: a run killed before it is rolled back by the next run
        (:func:`recover_dead_runs`), one killed after it is complete.
        """
        self.internal_dir.parent.mkdir(parents=True, exist_ok=True)
        self.release_dir.parent.mkdir(parents=True, exist_ok=True)
        if self.staging_internal.exists():
            os.replace(self.staging_internal, self.internal_dir)
        pause_point("publish")
        os.replace(self.staging_release, self.release_dir)
        self._clean_up()

    def abandon(self) -> None:
        """Remove everything staged, the working database included (a failed run publishes nothing).

        Internal files already moved by a :meth:`publish` that failed before its commit point go too.
        """
        if not self.release_dir.exists():
            shutil.rmtree(self.internal_dir, ignore_errors=True)
        self._clean_up()

    def _clean_up(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        _release_lock(self.lock_file)


def new_run(config: ReleaseConfig, *, output: Path | None = None) -> RunContext:
    """Create the run id, the staging directories and the run's lock; first clean up after dead runs.

    Args:
        config: The release config.
        output: Override of ``output.directory`` (a replay's scratch directory).

    Raises:
        ConfigInvalidError: The output directory cannot be created or written.
    """
    started = datetime.now(UTC)
    run_id = f"{config.name}-{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
    root = Path(output) if output is not None else config.output.directory
    staging = root / STAGING / run_id
    try:
        staging.parent.mkdir(parents=True, exist_ok=True)
        recover_dead_runs(root)
        _hold_lock(staging.with_name(f"{run_id}.lock"))
        (staging / "release").mkdir(parents=True, exist_ok=False)
        (staging / "internal").mkdir(parents=True, exist_ok=False)
    except OSError as error:
        _release_lock(staging.with_name(f"{run_id}.lock"))
        reason = error.strerror or type(error).__name__
        raise ConfigInvalidError(
            f"output directory {root} cannot be written ({reason}); set output.directory to a writable folder"
        ) from None
    explicit = config.run.database is not None and output is None
    return RunContext(
        run_id=run_id,
        started=started.isoformat(),
        output=root,
        staging=staging,
        database=config.run.database if explicit else staging / "work.duckdb",
        seeded=config.run.seed_mode == "seeded",
    )


def recover_dead_runs(output: Path) -> list[str]:
    """Clean up after runs under ``output`` that died without cleaning up (killed, crashed machine).

    A run is dead when nobody holds its lock file. Its staging directory (and working database) is removed;
    when its release was never published (``releases/<run_id>`` missing), so are the internal files it had
    already moved (``internal/<run_id>``): a release is published completely or not at all. Ledger charges
    are never touched (a run that reached its mechanism stays charged).

    Returns:
        The run ids cleaned up.
    """
    staging = Path(output) / STAGING
    if fcntl is None or not staging.is_dir():
        return []
    recovered = []
    for lock_file in sorted(staging.glob("*.lock")):
        try:
            descriptor = os.open(lock_file, os.O_RDWR)
        except OSError:
            continue  # removed meanwhile by its run or another recovery
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live run holds it
            run_id = lock_file.stem
            if not (Path(output) / "releases" / run_id).exists():
                shutil.rmtree(Path(output) / "internal" / run_id, ignore_errors=True)
            shutil.rmtree(staging / run_id, ignore_errors=True)
            lock_file.unlink(missing_ok=True)
            recovered.append(run_id)
        finally:
            os.close(descriptor)
    return recovered


def _hold_lock(lock_file: Path) -> None:
    """Create ``lock_file`` and hold an exclusive flock on it until :func:`_release_lock` (or the process ends)."""
    if fcntl is None:
        return
    with _HELD_GUARD:
        for held in [path for path in _HELD if not Path(path).exists()]:  # runs whose folder was removed
            os.close(_HELD.pop(held))
        # locked under a name recovery does not look at, then renamed: a lock file is never seen unheld
        fresh = lock_file.with_name(lock_file.name + "-new")
        descriptor = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.replace(fresh, lock_file)
        except BaseException:
            os.close(descriptor)
            fresh.unlink(missing_ok=True)
            raise
        _HELD[str(lock_file)] = descriptor


def _release_lock(lock_file: Path) -> None:
    with _HELD_GUARD:
        descriptor = _HELD.pop(str(lock_file), None)
        lock_file.unlink(missing_ok=True)
        if descriptor is not None:
            os.close(descriptor)


def run_seed(config: ReleaseConfig) -> int:
    """The seed a run uses: the configured one (seeded mode) or a fresh secure one (recorded nowhere)."""
    return config.run.seed if config.run.seed_mode == "seeded" else fresh_seed()
