"""Where per-round progress goes while a mechanism runs.

The synthesize task always reports to a Prefect progress artifact; a front end in the same process (the
CLI's terminal progress bar) can also register a sink here. Only public diagnostics are passed on (round
number, solver status, timings; never the ``internal_`` fields).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ProgressSink", "clear_sink", "emit", "set_sink"]

ProgressSink = Callable[[int, int, dict[str, Any]], None]
_sinks: list[ProgressSink] = []


def set_sink(sink: ProgressSink) -> None:
    """Register ``sink(done, total, public_diagnostics)``."""
    _sinks.append(sink)


def clear_sink() -> None:
    """Remove every registered sink."""
    _sinks.clear()


def emit(done: int, total: int, public: dict[str, Any]) -> None:
    """Send progress to every sink."""
    for sink in list(_sinks):
        sink(done, total, public)
