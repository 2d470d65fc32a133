"""What ``dqrelease run`` shows on stderr while it works: a live view in a terminal, plain lines elsewhere.

The run's stages (:data:`dqrelease.runtime.progress.STAGES`) arrive as :class:`~dqrelease.runtime.progress.StageEvent`
s from the flow and the synthesize task (from a Dask worker too, see :mod:`dqrelease.runtime.cluster`). The view
shows them in one of three ways (:func:`run_view`):

* **terminal** (stderr is a terminal): a spinner from the first moment while the config is checked and the run
  planned (removed if the run is refused there, so a refusal stays one line), then the plan line and one rich
  progress row per stage: a bar, ``done/total`` and an ETA where the stage's length is known (rounds), its elapsed
  time, and what its last round did.
* **plain** (stderr is a file or a pipe): nothing until the run is accepted (a refusal stays one line), then
  the plan line and one line per stage start and end, one line per tenth of a stage's rounds, and a line for a
  stage that has printed nothing for :data:`PLAIN_INTERVAL` seconds. Every line starts with the run's elapsed time
  in brackets (``[0:01:05] mechanism: round 12/60 ...``).
* **quiet** (``run --quiet``): no progress and no plan line; a Prefect server left running is still announced.

No line carries a count taken from the data: stage names, planned rounds (public parameters), round numbers, what a
round did (public diagnostics) and the wall time the operator sees anyway (``docs/engine.md``, "What timing
reveals": the terminal is the data holder's own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from rich.console import Console
from rich.live import Live
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.spinner import Spinner
from rich.text import Text

from dqrelease.runtime import progress
from dqrelease.runtime.progress import STAGES, StageEvent

__all__ = ["PLAIN_INTERVAL", "PLAIN_PREFIX", "RunView", "run_view"]

PLAIN_INTERVAL = 30.0
"""Seconds after which a running stage that printed nothing gets a plain line saying it still runs."""

PLAIN_PREFIX = r"\[\d+:\d\d:\d\d\] "
"""A regular expression matching the start of every plain line (the run's elapsed time)."""

_STAGE_WIDTH = max(len(name) for name in STAGES)


def _clock(seconds: float) -> str:
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}"


@dataclass(kw_only=True)
class _StageState:
    started: float
    total: int | None = None
    done: int = 0
    finished: bool = False
    last_line: float = 0.0
    tenths: int = 0


@dataclass(kw_only=True)
class _Stages:
    """Which stages started, advanced and finished (events for a finished stage are ignored: late Dask events)."""

    states: dict[str, _StageState] = field(default_factory=dict)

    def accept(self, event: StageEvent, now: float) -> _StageState | None:
        """The stage's state after ``event``, or None when the event changes nothing."""
        state = self.states.get(event.stage)
        if state is not None and state.finished:
            return None
        if state is None:
            state = self.states[event.stage] = _StageState(started=now, total=event.total, last_line=now)
            if event.state == "started":
                return state
        elif event.state == "started":
            return None
        if event.total is not None:
            state.total = event.total
        if event.state == "advanced":
            state.done = max(state.done, event.done)
        else:
            state.finished = True
        return state


class _EtaColumn(ProgressColumn):
    """``about 0:01:20 left`` for a running stage of known length; blank otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self._remaining = TimeRemainingColumn()

    def render(self, task: Task) -> Text:
        if task.finished or task.total is None or not task.fields.get("known"):
            return Text("")
        return Text.assemble("about ", self._remaining.render(task), " left")


class RunView:
    """The live view of one run; register :meth:`handle` as a progress sink inside :meth:`showing`."""

    def __init__(self, console: Console, mode: Literal["terminal", "plain", "quiet"]) -> None:
        self.console = console
        self.mode = mode
        self._began = time.monotonic()
        self._lock = threading.Lock()
        self._stages = _Stages()
        self._progress: Progress | None = None
        self._rows: dict[str, int] = {}
        self._stop = threading.Event()

    # ------------------------------------------------------------------ before the run is accepted
    @contextmanager
    def checking(self, config: object) -> Iterator[None]:
        """A spinner while ``config`` is checked and planned (terminal only; it leaves nothing on the screen)."""
        if self.mode != "terminal":
            yield
            return
        text = f"checking {config} and planning the release (nothing is read or charged yet)"
        # Live draws its first frame on entering (console.status waits for its refresh thread's first tick)
        with Live(Spinner("dots", text=text), console=self.console, transient=True, refresh_per_second=12.5):
            yield

    def notice(self, text: str, *, style: str | None = None, quiet_too: bool = False) -> None:
        """A line that stays (the plan, a Prefect server left running); in quiet mode only when ``quiet_too``."""
        if self.mode == "quiet" and not quiet_too:
            return
        with self._lock:
            if self.mode == "plain":
                self.console.print(self._plain(text), markup=False, highlight=False)
                return
            target = self._progress.console if self._progress is not None else self.console
            target.print(Text(text, style=style or ""), highlight=False)

    # ------------------------------------------------------------------ while the run works
    @contextmanager
    def showing(self) -> Iterator[None]:
        """Show the stages while the block runs (the progress sink is registered for the block)."""
        if self.mode == "quiet":
            yield
            return
        ticker = None
        if self.mode == "terminal":
            self._progress = Progress(
                SpinnerColumn(finished_text="[green]✓[/]"),
                TextColumn(f"{{task.fields[stage]:<{_STAGE_WIDTH}}}"),
                BarColumn(bar_width=24),
                TextColumn("{task.fields[count]}", justify="right"),
                TimeElapsedColumn(),
                _EtaColumn(),
                TextColumn("{task.description}"),
                console=self.console,
            )
            self._progress.start()
        else:
            ticker = threading.Thread(target=self._tick, name="dqrelease-progress-lines", daemon=True)
            ticker.start()
        progress.set_sink(self.handle)
        try:
            yield
        except BaseException:
            self._mark_stopped()
            raise
        finally:
            progress.clear_sink()
            self._stop.set()
            if ticker is not None:
                ticker.join()
            if self._progress is not None:
                self._progress.stop()
                self._progress = None

    def handle(self, event: StageEvent) -> None:
        """The progress sink: show ``event`` (called from the flow's thread or Dask's client thread)."""
        with self._lock:
            if event.state == "started":  # stages run one after the other: a new one ends those before it
                order = list(STAGES)
                for name, earlier in list(self._stages.states.items()):
                    if not earlier.finished and order.index(name) < order.index(event.stage):
                        self._handle(StageEvent(stage=name, state="finished"))
            self._handle(event)

    def _handle(self, event: StageEvent) -> None:
        """:meth:`handle` with the lock held."""
        now = time.monotonic()
        state = self._stages.accept(event, now)
        if state is None:
            return
        if self.mode == "terminal":
            self._show_row(event.stage, state, event.detail)
        elif self.mode == "plain":
            self._show_line(event, state, now)

    def _show_row(self, name: str, state: _StageState, detail: str) -> None:
        assert self._progress is not None
        known = bool(state.total)
        count = f"{state.done}/{state.total}" if known else ""
        if name not in self._rows:
            self._rows[name] = self._progress.add_task(
                STAGES[name], stage=name, count=count, known=known, total=state.total if known else None
            )
        row = self._rows[name]
        if state.finished:
            total = state.total if known else 1
            self._progress.update(row, total=total, completed=total, count=f"{total}/{total}" if known else "",
                                  description=STAGES[name])
        else:
            self._progress.update(row, total=state.total if known else None, completed=state.done, count=count,
                                  known=known, description=detail or STAGES[name])

    def _show_line(self, event: StageEvent, state: _StageState, now: float) -> None:
        name = event.stage
        if state.finished:
            text = f"{name}: done ({_clock(now - state.started)})"
        elif event.state == "started":
            length = f", {state.total} rounds" if state.total else ""
            text = f"{name}: started ({STAGES[name]}{length})"
        else:
            tenths = 10 * state.done // state.total if state.total else 0
            if tenths == state.tenths and now - state.last_line < PLAIN_INTERVAL:
                return
            state.tenths = tenths
            text = f"{name}: round {state.done}" + (f"/{state.total}" if state.total else "")
            if event.detail:
                text += f", {event.detail}"
            if state.total and 0 < state.done < state.total:
                left = (now - state.started) / state.done * (state.total - state.done)
                text += f", about {_clock(left)} left"
        state.last_line = now
        self.console.print(self._plain(text), markup=False, highlight=False)

    def _tick(self) -> None:
        """Plain mode: a line for each running stage that printed nothing for :data:`PLAIN_INTERVAL` seconds."""
        while not self._stop.wait(min(PLAIN_INTERVAL, 5.0)):
            with self._lock:
                now = time.monotonic()
                for name, state in self._stages.states.items():
                    if not state.finished and now - state.last_line >= PLAIN_INTERVAL:
                        state.last_line = now
                        rounds = f", round {state.done}/{state.total}" if state.total else ""
                        line = f"{name}: still running ({_clock(now - state.started)} so far{rounds})"
                        self.console.print(self._plain(line), markup=False, highlight=False)

    def _mark_stopped(self) -> None:
        """After an error: running stages say they stopped (the error's own line follows)."""
        with self._lock:
            for name, state in self._stages.states.items():
                if state.finished:
                    continue
                if self.mode == "plain":
                    self.console.print(self._plain(f"{name}: stopped"), markup=False, highlight=False)
                elif self._progress is not None and name in self._rows:
                    self._progress.update(self._rows[name], description="[red]stopped[/]")
                    self._progress.stop_task(self._rows[name])

    def _plain(self, text: str) -> str:
        return f"[{_clock(time.monotonic() - self._began)}] {text}"


def run_view(console: Console, *, quiet: bool) -> RunView:
    """The view for a run printing on ``console`` (stderr): quiet, terminal or plain lines (module docstring)."""
    if quiet:
        return RunView(console, "quiet")
    return RunView(console, "terminal" if console.is_terminal else "plain")
