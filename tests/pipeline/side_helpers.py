"""Module-level functions the side-process tests name as warm-ups or send as calls (the child imports them)."""

from __future__ import annotations

import sys

MARKER = "tests.pipeline.side_marker"


def import_marker() -> None:
    """A warm-up: import the marker module (a module nothing else imports)."""
    __import__(MARKER)


def marker_imported() -> bool:
    """Whether :func:`import_marker` has run in this process."""
    return MARKER in sys.modules


def broken() -> None:
    """A warm-up that fails."""
    raise LookupError("a warm-up that fails")
