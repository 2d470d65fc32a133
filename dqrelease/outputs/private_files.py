"""INTERNAL files are created owner-only from the start: never written world-readable, never chmod-ed after.

What counts as INTERNAL (it holds the true private data, or figures computed from it): the error report (JSON,
Markdown, HTML), the audit manifest, the raw rule violations, the seed of a seeded run and the working DuckDB
database with the raw table. Each is created with :data:`INTERNAL_FILE_MODE` by ``os.open`` (the mode is applied by
the kernel at creation, so no other user can open the file between its creation and a later ``chmod``); the
staging folder that holds them while a run works is :data:`INTERNAL_DIRECTORY_MODE`. Published files keep the
modes the process's umask gives them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["INTERNAL_DIRECTORY_MODE", "INTERNAL_FILE_MODE", "create_internal_file", "write_internal"]

INTERNAL_FILE_MODE = 0o600
"""Mode of every INTERNAL file: read and write for the owner only."""

INTERNAL_DIRECTORY_MODE = 0o700
"""Mode of a run's staging folder (it holds the working database and the staged internal files)."""


def create_internal_file(path: Path) -> Path:
    """Create ``path`` empty with :data:`INTERNAL_FILE_MODE`; a file already there is replaced.

    Raises:
        OSError: The file cannot be created (its folder is missing or not writable, or it is a directory).
    """
    path = Path(path)
    if path.is_file() or path.is_symlink():
        path.unlink()  # a new inode: an old file's mode (or a link's target) is never reused
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, INTERNAL_FILE_MODE))
    return path


def write_internal(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to a new INTERNAL file ``path`` created with :data:`INTERNAL_FILE_MODE`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    create_internal_file(path)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path
