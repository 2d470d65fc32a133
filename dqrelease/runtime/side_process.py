"""The side process: a child that imports the slow libraries while the run starts, then works beside it.

A small release spends most of its time outside the mechanism importing libraries and drawing: Great
Expectations alone costs about 3 s of CPU to import (it pulls in scipy.stats, altair and sqlalchemy), and the
report's charts about 3 s to draw. ``dqrelease run`` therefore starts this process (:func:`running`) as soon as
the config has been checked. On the machine's other core it imports Great Expectations (and builds its
context) while the run imports Prefect, ingests and plans; then it validates each chunk of a table
(:mod:`expectations.validate`). Matplotlib is imported when the process is first idle after the raw
table's validation (the run waits for that, not for the report), and the process draws a chart of the report while
the run draws the others (:mod:`dqrelease.outputs.report`).

Without a running side process (the Python API, tests, a Dask worker) every call runs in the calling process:
the results are the same either way, byte for byte.

Privacy: what is sent (chunks of the private table, the internal report's figures) travels through a local pipe
to a child of this process and is never written to disk. An exception raised in the child comes back as a
:class:`SideProcessError` naming its type only (its text may quote data), or with its traceback when
``DQRELEASE_DEBUG=1``; a :class:`~dqrelease.errors.ReleaseError` (public by design) comes back as itself.
"""

from __future__ import annotations

import importlib
import itertools
import multiprocessing
import multiprocessing.util
import os
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from dqrelease.errors import ReleaseError, debugging

__all__ = [
    "IN_FLIGHT", "Pending", "SideProcess", "SideProcessError", "begin", "call", "call_each", "prefetch", "running",
]

IN_FLIGHT = 2
"""Calls of :func:`call_each` sent ahead: the next chunk is read while the side process validates one."""

_POLL_SECONDS = 0.5

IDLE_SECONDS = 0.25
"""Seconds without a request after which the side process does its next ``when_idle`` warm-up."""

R = TypeVar("R")


class SideProcessError(RuntimeError):
    """An unexpected exception in the side process, or the process ended early."""


class SideProcess:
    """One spawned child process that runs module-level functions in the order they are submitted."""

    def __init__(self, warm_up: tuple[str, ...] = (), when_idle: tuple[str, ...] = ()) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self._requests = context.Queue()
        self._results = context.Queue()
        self._ready = context.Event()
        self._keys = itertools.count()
        self._submitting = threading.Lock()
        self._reading = threading.Lock()
        self._received: dict[int, tuple[bool, Any]] = {}
        self._abandoned: set[int] = set()
        self._process = context.Process(
            target=_serve, args=(self._requests, self._results, self._ready, warm_up, when_idle),
            name="dqrelease-side",
            daemon=True,
        )
        self._process.start()

    def submit(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
        """Queue ``function(*args, **kwargs)`` (a module-level function); return the key of its result."""
        return self._put(function, args, kwargs, awaited=True)

    def prefetch(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Queue ``function(*args, **kwargs)`` for its effect in the child; its result is dropped."""
        self.abandon([self._put(function, args, kwargs, awaited=False)])

    def _put(self, function: Callable[..., Any], args: tuple, kwargs: dict[str, Any], *, awaited: bool) -> int:
        with self._submitting:
            key = next(self._keys)
            self._requests.put((key, awaited, function, args, kwargs))
        return key

    def result(self, key: int) -> Any:
        """Wait for the result of ``key``; raise what the call raised.

        Several threads may wait at once (the synthetic table is validated in a task thread while the run draws
        the report): whichever thread reads the pipe files every result under its key for its owner.
        """
        while True:
            with self._reading:
                if key in self._received:
                    ok, value = self._received.pop(key)
                    break
                try:
                    got, ok, value = self._results.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    if not self._process.is_alive():
                        raise SideProcessError(
                            f"the side process ended (exit code {self._process.exitcode}) before answering"
                        ) from None
                    continue
                if got == key:
                    break
                if got in self._abandoned:
                    self._abandoned.discard(got)
                else:
                    self._received[got] = (ok, value)
        if ok:
            return value
        raise value

    def abandon(self, keys: Iterable[int]) -> None:
        """Drop the results of ``keys`` when they come (a :func:`call_each` whose consumer stopped early)."""
        with self._reading:
            for key in keys:
                if self._received.pop(key, None) is None:
                    self._abandoned.add(key)

    def close(self) -> None:
        """Stop the process.

        Once warmed up it exits as soon as it reads the stop request (killed if it has not in 5 s); while still
        importing (a run refused early) it is killed at once, so that the refusal does not wait for the imports.
        """
        if self._process.is_alive() and self._ready.is_set():
            self._requests.put(None)
            self._process.join(timeout=5.0)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5.0)
        self._requests.close()
        self._results.close()


class Pending(Generic[R]):
    """A call started by :func:`begin`; :meth:`result` waits for it."""

    def __init__(self, process: SideProcess | None, key: int | None, value: R | None = None) -> None:
        self._process, self._key, self._value = process, key, value

    def result(self) -> R:
        """The call's result (raises what it raised)."""
        if self._process is None:
            return self._value  # type: ignore[return-value]
        return self._process.result(self._key)  # type: ignore[arg-type]

    def abandon(self) -> None:
        """Drop the call's result when it comes: nobody will wait for it."""
        if self._process is not None:
            self._process.abandon([self._key])  # type: ignore[list-item]


_current: SideProcess | None = None


@contextmanager
def running(warm_up: tuple[str, ...] = (), *, when_idle: tuple[str, ...] = ()) -> Iterator[SideProcess]:
    """Start the side process; calls inside the block use it; stop it at the end.

    Args:
        warm_up: ``"module:function"`` names the child calls first (imports, contexts), while the run starts.
        when_idle: Names it calls later, one each time no request has come for :data:`IDLE_SECONDS` once it has
            answered a call that someone waits for (not a :func:`prefetch`): imports that the first calls do not
            need, so that those calls do not wait for them (a call that comes during one waits for it). In a
            release the first awaited call is the raw table's validation, which comes after the ingest.
    """
    global _current
    if _current is not None:
        raise RuntimeError("a side process is already running in this process")
    process = SideProcess(warm_up, when_idle)
    _current = process
    try:
        yield process
    finally:
        _current = None
        process.close()


def call(function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """``function(*args, **kwargs)`` in the side process if one is running, else here."""
    return begin(function, *args, **kwargs).result()


def begin(function: Callable[..., R], *args: Any, **kwargs: Any) -> Pending[R]:
    """Start ``function(*args, **kwargs)`` in the side process and return at once; without one, run it here."""
    if _current is None:
        return Pending(None, None, function(*args, **kwargs))
    return Pending(_current, _current.submit(function, *args, **kwargs))


def prefetch(function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Start ``function(*args, **kwargs)`` in the side process for its effect there (a cache it fills); no result.

    Without a side process nothing is done. What it returns or raises is dropped: the later call that needs the
    cache raises the same again.
    """
    if _current is not None:
        _current.prefetch(function, *args, **kwargs)


def call_each(function: Callable[..., R], items: Iterable[Any], **kwargs: Any) -> Iterator[R]:
    """``function(item, **kwargs)`` for each item, in order; up to :data:`IN_FLIGHT` items are sent ahead."""
    process = _current
    if process is None:
        yield from (function(item, **kwargs) for item in items)
        return
    pending: list[int] = []
    try:
        for item in items:
            pending.append(process.submit(function, item, **kwargs))
            if len(pending) >= IN_FLIGHT:
                yield process.result(pending.pop(0))
        while pending:
            yield process.result(pending.pop(0))
    finally:  # the consumer stopped early (or a call raised): the results still on their way are dropped
        process.abandon(pending)


# ---------------------------------------------------------------------- the child
def _warm_up(names: tuple[str, ...]) -> None:
    """Call each ``"module:function"`` of ``names`` (the child's imports happen there)."""
    for name in names:
        module, _, function = name.partition(":")
        getattr(importlib.import_module(module), function)()


def _serve(requests: Any, results: Any, ready: Any, warm_up: tuple[str, ...], when_idle: tuple[str, ...]) -> None:
    """The child's loop: warm up, then answer ``(key, awaited, function, args, kwargs)`` until ``None``.

    The ``when_idle`` warm-ups run one at a time while no request waits (a request that comes during one waits
    for it to end), from the first awaited call's answer on: a prefetch is usually followed by the call that
    needs it, after the run has done something else in between. A warm-up that raises makes every later call
    raise the same.

    Ctrl-C reaches the whole process group: the child ignores it (no second traceback on the terminal); the run
    handles it and stops the child.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    failure: BaseException | None = None
    try:
        _warm_up(warm_up)
    except BaseException as error:  # answered to every call below
        failure = error
    ready.set()
    later = list(when_idle)
    answered = False  # an awaited call (not a prefetch) has been answered: idle time is idle from then on
    while True:
        try:
            idle = later and failure is None and answered
            request = requests.get(timeout=IDLE_SECONDS) if idle else requests.get()
        except queue.Empty:
            try:
                _warm_up((later.pop(0),))
            except BaseException as error:
                failure = error
            continue
        if request is None:
            break
        key, awaited, function, args, kwargs = request
        answered = answered or awaited
        try:
            if failure is not None:
                raise failure
            results.put((key, True, function(*args, **kwargs)))
        except ReleaseError as error:
            results.put((key, False, error))
        except BaseException as error:  # reduced to its type: its text may quote data
            results.put((key, False, _withheld(error)))
    results.close()
    results.join_thread()  # every answer is in the pipe
    # what multiprocessing does when a child's target returns (its finalizers release the queues' semaphores),
    # then skip the interpreter's teardown of Great Expectations: most of a second the run would wait for
    multiprocessing.util._exit_function()
    os._exit(0)


def _withheld(error: BaseException) -> SideProcessError:
    if debugging():
        text = "".join(traceback.format_exception(error))
        return SideProcessError(f"{type(error).__name__} in the side process:\n{text}")
    return SideProcessError(f"{type(error).__name__} in the side process (its text is withheld: it may quote data)")
