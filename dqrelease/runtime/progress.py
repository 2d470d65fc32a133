"""What a run reports while it works: its stages, each stage's rounds, and how a round is described.

A release goes through the stages of :data:`STAGES` in that order (``count`` only when ``n`` is a noisy count).
The flow announces each stage (:func:`stage`); the synthesize task reports the rounds of the two stages with a
known length, the mechanism's and the table fit's (:class:`RoundStages`). Every announcement is a
:class:`StageEvent` sent to the sinks registered here (the CLI's terminal view, :mod:`dqrelease.cli.live`); a
task on a Dask worker sends its events to the client instead (:func:`dqrelease.runtime.cluster.forward_progress`).
The synthesize task also writes a Prefect progress artifact and its run log.

Only public facts are passed on: stage names, round numbers and the planned number of rounds (public
parameters), a round's solver status and the marginal it measured (never the ``internal_`` fields), and no
timings: a round's seconds include work on the private data (answering, the exponential mechanism's exact
samplers), so they stay in the internal error report (``docs/engine.md``, "What timing reveals"). No count taken
from the data (rows, chunks, bytes) is ever part of an event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from dqrelease.runtime.pause_points import pause_point

__all__ = [
    "STAGES",
    "ProgressSink",
    "RoundStages",
    "StageEvent",
    "clear_sink",
    "describe_round",
    "emit",
    "round_line",
    "set_sink",
    "stage",
    "without_timings",
]

STAGES: dict[str, str] = {
    "start": "start Prefect, its flow run and the flow's own checks",
    "ingest": "load the source into the working database",
    "validate": "check the raw table against the schema, then discretize it",
    "count": "charge and draw the noisy record count",
    "charge": "charge the privacy budget to the ledger",
    "mechanism": "answer the workload, then run the mechanism",
    "fit": "fit the records to charged noisy marginals",
    "sample": "draw which synthetic record each published row copies",
    "report": "decode, validate and write the rows chunk by chunk, draw the internal error report",
    "publish": "write the manifests and publish",
}
"""The stages of a ``dqrelease run`` in their order, each with what it does.

``start`` is the CLI's: it is announced before Prefect is imported and ends when the flow's first stage starts (a
view ends a running stage when a later one starts: the stages run one after the other)."""

MEASURING_SOURCE = "mw"
"""``RoundDiagnostics.source`` of a round that selects and measures a marginal (MWEM, MWEM on particles)."""

NO_SOLVER = "NOT_RUN"
"""``RoundDiagnostics.status`` when CP-SAT was not called in the round (or has no part in the mechanism)."""


@dataclass(frozen=True, kw_only=True)
class StageEvent:
    """One progress event: a stage started, completed a round, or finished.

    Attributes:
        stage: A name of :data:`STAGES`.
        state: ``started``, ``advanced`` (a round completed) or ``finished``.
        done: Rounds completed (``advanced``; 0 otherwise).
        total: The stage's planned rounds (a public parameter), None when its length is not known.
        detail: What the round did (:func:`describe_round`), or empty.
    """

    stage: str
    state: Literal["started", "advanced", "finished"]
    done: int = 0
    total: int | None = None
    detail: str = ""

    def as_message(self) -> dict[str, Any]:
        """A plain dict (what a Dask worker sends: msgpack-serializable)."""
        return {"stage": self.stage, "state": self.state, "done": self.done, "total": self.total,
                "detail": self.detail}

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> StageEvent:
        """The event of :meth:`as_message`'s dict (keys a transport added, like Dask's ``worker``, are dropped)."""
        return cls(**{key: message[key] for key in ("stage", "state", "done", "total", "detail") if key in message})


ProgressSink = Callable[[StageEvent], None]
_sinks: list[ProgressSink] = []


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
    """Register ``sink(event)``; it is called in the thread that emits (the flow's, or Dask's client thread)."""
    _sinks.append(sink)


def clear_sink() -> None:
    """Remove every registered sink."""
    _sinks.clear()


def emit(event: StageEvent) -> None:
    """Send ``event`` to every registered sink (none registered: nothing happens)."""
    for sink in list(_sinks):
        sink(event)


@contextmanager
def stage(name: str, *, total: int | None = None) -> Iterator[None]:
    """Announce stage ``name`` (a key of :data:`STAGES`) while the block runs: started, then finished.

    A block that raises sends no ``finished``: the stage stopped there, and the error says why.
    """
    if name not in STAGES:
        raise ValueError(f"unknown progress stage {name!r}; use one of {', '.join(STAGES)}")
    emit(StageEvent(stage=name, state="started", total=total))
    yield
    emit(StageEvent(stage=name, state="finished", total=total))


@dataclass(frozen=True, kw_only=True)
class RoundStages:
    """How a plan's rounds split into the ``mechanism`` stage and the ``fit`` stage.

    The engine numbers the table fit's rounds after the mechanism's (``dq_engine.fit.table_fit``), and a plan's
    ``progress_rounds`` counts both: the first ``mechanism`` rounds are the mechanism's, the next ``fit`` the fit's.

    Attributes:
        mechanism: The mechanism's planned rounds.
        fit: The table fit's planned rounds (0 without a fit).
    """

    mechanism: int
    fit: int = 0

    @classmethod
    def of(cls, plan: Any) -> RoundStages:
        """The split of a :class:`~dqrelease.mechanisms.ReleasePlan` (public parameters only)."""
        fit = 0 if plan.fit is None else int(plan.fit.rounds)
        return cls(mechanism=max(0, int(plan.progress_rounds) - fit), fit=fit)

    def describe(self) -> str:
        """``60 rounds + 40 fit rounds`` (or ``60 rounds``)."""
        text = f"{self.mechanism} rounds"
        return text + (f" + {self.fit} fit rounds" if self.fit else "")

    @contextmanager
    def running(self) -> Iterator[None]:
        """The ``mechanism`` stage (and the ``fit`` stage the rounds start) while the block runs the mechanism.

        A plan without per-round progress (``progress_rounds`` 0) gives a stage of unknown length.
        """
        emit(StageEvent(stage="mechanism", state="started", total=self.mechanism or None))
        yield
        emit(StageEvent(stage="mechanism", state="finished", total=self.mechanism or None))  # a no-op after the fit
        if self.fit:
            emit(StageEvent(stage="fit", state="finished", total=self.fit))

    def report(self, number: int, public: dict[str, Any], send: ProgressSink = emit) -> None:
        """Send the events of round ``number`` (counted over both stages) to ``send``.

        The mechanism's last round also finishes the ``mechanism`` stage and starts ``fit``, so the fit's own
        preparation (its noisy prior) shows as the fit's, not as a mechanism stuck on its last round.
        """
        # test-only (dqrelease.runtime.pause_points); inert unless DQRELEASE_TEST_PAUSE_AT=mechanism
        pause_point("mechanism")
        detail = describe_round(without_timings(public))
        if number <= self.mechanism or not self.fit:
            send(StageEvent(stage="mechanism", state="advanced", done=number, total=self.mechanism, detail=detail))
            if number == self.mechanism and self.fit:
                send(StageEvent(stage="mechanism", state="finished", total=self.mechanism))
                send(StageEvent(stage="fit", state="started", total=self.fit))
            return
        done = min(number - self.mechanism, self.fit)
        send(StageEvent(stage="fit", state="advanced", done=done, total=self.fit, detail=detail))
