"""Where the shared data sets live: the one rule that tests, benchmarks and release configs follow.

The data sets used by the benchmarks and some tests (Adult, KDD Cup 99, BMS-WebView) are too large or not
redistributable, so they live outside the repository. Their folder is found by one rule:

1. the environment variable ``DQRELEASE_DATA``, if it is set and not empty; the folder is returned as given
   (made absolute), even if it is empty or missing, so that setting the variable to an empty folder hides the
   data from everything that follows this rule;
2. otherwise ``../shared/data`` beside the repository (the repository being the folder above this package's
   source directory, as in an editable install), if that folder exists;
3. otherwise there is none.

The rule only locates the folder: callers check the files they need (:func:`shared_data_file`).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_VARIABLE = "DQRELEASE_DATA"
"""Environment variable naming the folder that holds the shared data sets."""

DATA_FIX = (
    f"set {DATA_VARIABLE} to the folder holding the shared data sets, or put them at ../shared/data beside the repo"
)
"""How to make the shared data visible; quoted by every message about missing shared data."""


def shared_data_dir() -> Path | None:
    """The shared data directory, or None when there is none.

    ``DQRELEASE_DATA`` wins when it is set and not empty (returned even if the folder is empty or missing);
    otherwise ``<repo>/../shared/data`` if it exists, where ``<repo>`` is the folder above this package's source
    directory; otherwise None.

    Returns:
        The absolute path of the shared data directory, or None.
    """
    configured = os.environ.get(DATA_VARIABLE, "")
    if configured:
        return Path(configured).expanduser().resolve()
    beside_repo = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    return beside_repo if beside_repo.is_dir() else None


def shared_data_file(relative: str) -> Path | None:
    """A file of the shared data directory, or None when the directory or the file does not exist.

    Args:
        relative: Path of the file inside the shared data directory, e.g. ``"adult_pgm/adult.csv"``.

    Returns:
        The file's absolute path if it exists, else None.
    """
    root = shared_data_dir()
    if root is None:
        return None
    path = root / relative
    return path if path.is_file() else None


def require_shared_data_dir() -> Path:
    """The shared data directory, for scripts that cannot run without it.

    Returns:
        The directory given by :func:`shared_data_dir`.

    Raises:
        FileNotFoundError: When there is no shared data directory; the message says how to provide one.
    """
    root = shared_data_dir()
    if root is None:
        raise FileNotFoundError(f"no shared data directory: {DATA_FIX}")
    return root
