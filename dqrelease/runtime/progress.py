"""Where per-round progress goes while a mechanism runs, and how a round is described.

The synthesize task always reports to a Prefect progress artifact and its run log; a front end in the same
process (the CLI's terminal progress bar) can also register a sink here. Only public diagnostics are passed on
(round number, solver status, the marginal a round measured; never the ``internal_`` fields), and no timings: a
round's seconds include work on the private data (answering, the exponential mechanism's exact samplers), so they
stay in the internal error report (``docs/engine.md``, "What timing reveals").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dqrelease.runtime.pause_points import pause_point

__all__ = ["ProgressSink", "clear_sink", "describe_round", "emit", "round_line", "set_sink", "without_timings"]

ProgressSink = Callable[[int, int, dict[str, Any]], None]
_sinks: list[ProgressSink] = []

MEASURING_SOURCE = "mw"
"""``RoundDiagnostics.source`` of a round that selects and measures a marginal (MWEM, MWEM on particles)."""

NO_SOLVER = "NOT_RUN"
"""``RoundDiagnostics.status`` when CP-SAT was not called in the round (or has no part in the mechanism)."""


def describe_round(public: dict[str, Any]) -> str:
    """What one round did, in a few words, from its public diagnostics.

    * MWEM rounds (``source == "mw"``) select a marginal with the exponential mechanism and measure it with
      noise: ``measured marginal 12 (8 cells)``. No oracle runs, so no solver status is shown.
    * Oracle rounds (DualQuery, DQRS, FEM, sepFEM, parity) name the record's source and the CP-SAT status when
      CP-SAT ran: ``oracle cpsat (OPTIMAL)``, ``oracle local`` (local search's record; CP-SAT not called).
    """
    if public.get("source") == MEASURING_SOURCE:
        marginal = public.get("extra", {}).get("marginal")
        which = f"marginal {int(marginal)}" if marginal is not None else "a marginal"
        return f"measured {which} ({public.get('distinct', 0):,} cells)"
    status = public.get("status")
    return f"oracle {public.get('source')}" + ("" if status in (None, NO_SOLVER) else f" ({status})")


def without_timings(public: dict[str, Any]) -> dict[str, Any]:
    """``public`` without its wall times (every ``*_seconds`` field): what may leave the process as progress."""
    return {key: value for key, value in public.items() if not key.endswith("_seconds")}


def round_line(done: int, total: int, public: dict[str, Any]) -> str:
    """The run log's line for a round: ``round 12/80: oracle cpsat (OPTIMAL)`` (no timing, see the module)."""
    return f"round {done}/{total}: {describe_round(public)}"


def set_sink(sink: ProgressSink) -> None:
    """Register ``sink(done, total, public_diagnostics)``."""
    _sinks.append(sink)


def clear_sink() -> None:
    """Remove every registered sink."""
    _sinks.clear()


def emit(done: int, total: int, public: dict[str, Any]) -> None:
    """Send progress to every sink, without timings (:func:`without_timings`)."""
    # test-only (dqrelease.runtime.pause_points); inert unless DQRELEASE_TEST_PAUSE_AT=mechanism
    pause_point("mechanism")
    public = without_timings(public)
    for sink in list(_sinks):
        sink(done, total, public)
