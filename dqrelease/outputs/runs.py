"""A run's identity, randomness and directories (staging, then atomic publication).

Layout under ``output.directory``::

    releases/<run_id>/      published: synthetic.parquet / .csv / .duckdb and release.json (public)
    internal/<run_id>/      INTERNAL (folder 0700, files 0600): error_report.{json,md,html}, manifest.json
                            (audit), raw_rule_violations.json, seed
    .staging/<run_id>/      work in progress (0700); renamed into place only when every step succeeded; holds
                            the run's working DuckDB file work.duckdb (the raw private table, 0600) unless
                            run.database names one
    .staging/<run_id>.lock  held (flock) by the live run; a lock nobody holds marks a dead run

A failed run leaves no partial release: the staging directory (with the working database) is removed (its
budget charge, if any, stays: charges are never refunded). Publication is two renames, internal files first,
then the release; the release's rename is the commit point. A run killed before it (kill -9, power loss)
cannot clean up after itself: the next run under the same output directory finds its lock free, removes its
staging directory and, if its release was never published, the internal files it had moved already.
Concurrent runs of one config never share a working database.

Every INTERNAL file is created owner-only from the start (:mod:`dqrelease.outputs.private_files`); the published
files and ``releases/<run_id>`` keep the modes the umask gives them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dq_engine.privacy.rng import fresh_seed
from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.config import ReleaseConfig
from dqrelease.outputs.private_files import INTERNAL_DIRECTORY_MODE, write_internal
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
        write_internal(self.staging_internal / "seed", f"{seed}\n")
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

    The staging folder is created 0700 and the working database 0600 (by DuckDB, under a restrictive umask:
    :func:`dqrelease.warehouse.private_database`), so the raw table is never readable by another user; an explicit
    ``run.database`` is opened here once too, before anything is read or charged.

    Raises:
        ConfigInvalidError: The output directory cannot be created or written, or ``run.database`` cannot be used.
    """
    started = datetime.now(UTC)
    run_id = f"{config.name}-{started.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
    root = Path(output) if output is not None else config.output.directory
    staging = root / STAGING / run_id
    try:
        staging.parent.mkdir(parents=True, exist_ok=True)
        recover_dead_runs(root)
        _hold_lock(staging.with_name(f"{run_id}.lock"))
        staging.mkdir(mode=INTERNAL_DIRECTORY_MODE)
        (staging / "release").mkdir()
        (staging / "internal").mkdir(mode=INTERNAL_DIRECTORY_MODE)
    except OSError as error:
        with suppress(OSError):
            _release_lock(staging.with_name(f"{run_id}.lock"))
        shutil.rmtree(staging, ignore_errors=True)
        blocker = next((p for p in (root, *root.parents) if p.exists()), root)
        reason = f"{blocker} is a file" if not blocker.is_dir() else (error.strerror or type(error).__name__)
        raise ConfigInvalidError(
            f"output directory {root} cannot be written ({reason}); set output.directory to a writable folder"
        ) from None
    explicit = config.run.database is not None and output is None
    run = RunContext(
        run_id=run_id,
        started=started.isoformat(),
        output=root,
        staging=staging,
        database=config.run.database if explicit else staging / "work.duckdb",
        seeded=config.run.seed_mode == "seeded",
    )
    try:
        _create_working_database(run.database, explicit=explicit)
    except BaseException:
        run.abandon()
        raise
    return run


def _create_working_database(path: Path, *, explicit: bool) -> None:
    """Create (or, for ``run.database``, open once) the working database, 0600, before anything is read or charged.

    An existing ``run.database`` is used as it is (its mode is the operator's); it must be a DuckDB file.

    Raises:
        ConfigInvalidError: ``run.database`` is a directory, not a DuckDB file, or cannot be created or opened.
    """
    import duckdb

    from dqrelease.warehouse import private_database

    fix = "set run.database to a DuckDB file in a writable folder, or remove the key (each run then gets its own)"
    if explicit and path.is_dir():
        raise ConfigInvalidError(f"run.database {path} is a directory, not a DuckDB file; {fix}")
    try:
        if explicit:
            path.parent.mkdir(parents=True, exist_ok=True)
        with private_database(path):
            pass
    except (OSError, duckdb.Error) as error:
        reason = getattr(error, "strerror", None) or str(error).splitlines()[0] or type(error).__name__
        what = "run.database" if explicit else "the working database"
        raise ConfigInvalidError(f"{what} {path} cannot be used ({reason}); {fix}") from None


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
