"""Running the embarrassingly parallel parts of a release on a Dask cluster (via prefect-dask).

``run.dask_address`` (or ``dqrelease run --dask ADDRESS``) is either the address of an existing Dask
scheduler (``tcp://scheduler:8786``) or ``local`` / ``local:N`` for a cluster of ``N`` (default 2) worker
processes on this machine. What runs there: answering the workload on the private data (partitioned by
marginal), the mechanism (several releases fan out in parallel in ``release_many``) and FEM's independent
oracle calls of a round. Results are identical to a single-machine run with the same seed.

Dask workers report task states and artifacts to the same Prefect API as the flow: a local cluster's workers
inherit it through :func:`dqrelease.runtime.prefect_server.shared_api` (which starts Prefect's temporary server
when no API is set); a remote cluster needs a Prefect server both sides can reach (set
``PREFECT_API_URL`` on the flow's machine and on the workers).

A scheduler address is reached (:func:`check_scheduler`, at most :data:`SCHEDULER_TIMEOUT` seconds) before the flow
starts, so a cluster that does not answer stops the run before anything is read or charged.

Progress: a task on a worker sends its :class:`~dqrelease.runtime.progress.StageEvent` s as Dask events
(:func:`forward_progress`, topic :data:`PROGRESS_TOPIC`); :func:`dask_scheduler` subscribes to them and hands them to
this process's progress sinks, so a Dask run shows the same stages and rounds as a local one.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import ExitStack, contextmanager
from types import ModuleType

from dqrelease.errors import ConfigInvalidError
from dqrelease.runtime import progress

__all__ = [
    "PROGRESS_TOPIC", "SCHEDULER_TIMEOUT", "check_scheduler", "dask_executor", "dask_scheduler", "forward_progress",
    "local_worker_count",
]

PROGRESS_TOPIC = "dqrelease-progress"
"""Dask event topic of the progress events that tasks on workers send to the client."""

DEFAULT_LOCAL_WORKERS = 2

SCHEDULER_TIMEOUT = 5.0
"""Seconds :func:`check_scheduler` waits for a Dask scheduler to answer before the run is refused."""

DASK_FIX = "pip install 'dqrelease[dask]'"


def local_worker_count(address: str) -> int | None:
    """``N`` for ``local`` / ``local:N``, None for a scheduler address."""
    if address == "local":
        return DEFAULT_LOCAL_WORKERS
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ConfigInvalidError(f"dask address {address!r}: use local:N with N >= 1 workers")
        return int(count)
    if "://" not in address:
        raise ConfigInvalidError(f"dask address {address!r} must be 'local', 'local:N' or a URL like tcp://host:8786")
    return None


def _distributed() -> ModuleType:
    """The ``distributed`` module (imported only when a run asks for Dask), or a refusal naming what to install."""
    try:
        import distributed
        import prefect_dask  # noqa: F401 - the flow's task runner needs it too
    except ImportError as error:
        raise ConfigInvalidError(
            f"a Dask run needs the packages distributed and prefect-dask ({error.name} is not installed); "
            f"{DASK_FIX}, or run without --dask / run.dask_address"
        ) from None
    return distributed


def check_scheduler(address: str, *, timeout: float = SCHEDULER_TIMEOUT) -> None:
    """Connect to the Dask scheduler at ``address`` and disconnect: it must answer within ``timeout`` seconds.

    Raises:
        ConfigInvalidError: Dask is not installed, or the scheduler did not answer (nothing was read or charged).
    """
    distributed = _distributed()
    try:
        with distributed.Client(address, timeout=timeout, set_as_default=False):
            pass
    except (OSError, TimeoutError, ValueError) as error:
        reason = "did not answer" if isinstance(error, OSError | TimeoutError) else "is not a scheduler address"
        raise ConfigInvalidError(
            f"Dask scheduler {address} {reason} within {timeout:g} s; start the scheduler or fix the address "
            "(--dask or run.dask_address), or run without Dask; nothing was read or charged"
        ) from None


@contextmanager
def dask_scheduler(address: str) -> Iterator[str]:
    """Yield a scheduler address: the given one (once it answers), or that of a local cluster started here.

    Raises:
        ConfigInvalidError: Dask is not installed, or the scheduler at ``address`` did not answer.
    """
    workers = local_worker_count(address)
    with ExitStack() as stack:
        if workers is None:
            check_scheduler(address)
            stack.enter_context(_progress_from_workers(address))
            yield address
            return
        LocalCluster = _distributed().LocalCluster  # noqa: N806 - a class

        from dqrelease.runtime.prefect_server import shared_api

        stack.enter_context(shared_api())  # the local workers report to this process's Prefect API
        cluster = stack.enter_context(
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        )
        stack.enter_context(_progress_from_workers(cluster.scheduler_address))
        yield cluster.scheduler_address


@contextmanager
def _progress_from_workers(address: str) -> Iterator[None]:
    """Inside the block the progress events workers send (:func:`forward_progress`) reach this process's sinks."""
    from distributed import Client

    def deliver(event: tuple[float, dict]) -> None:
        progress.emit(progress.StageEvent.from_message(event[1]))

    with Client(address, set_as_default=False) as client:
        client.subscribe_topic(PROGRESS_TOPIC, deliver)
        try:
            yield
        finally:
            client.unsubscribe_topic(PROGRESS_TOPIC)


def forward_progress(event: progress.StageEvent) -> None:
    """Send ``event`` to the client's sinks: as a Dask event inside a worker, else to this process's sinks."""
    if not _inside_dask_worker():
        progress.emit(event)
        return
    from distributed import get_worker

    get_worker().log_event(PROGRESS_TOPIC, event.as_message())


def _inside_dask_worker() -> bool:
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


@contextmanager
def dask_executor(address: str) -> Iterator[Executor]:
    """An executor on the Dask cluster for a task's inner parallel work (FEM's oracle calls of a round).

    Inside a Dask worker (the mechanism task of a flow on a ``DaskTaskRunner``) the worker's own client is
    used, and the task secedes from the worker's thread pool while it waits: otherwise the calls it submits
    could queue behind it on a one-thread worker forever. Elsewhere a client connects to ``address``.
    Futures are submitted with ``pure=False``: two calls are never merged because their arguments look alike.
    """
    from distributed import Client, worker_client

    with worker_client() if _inside_dask_worker() else Client(address) as client:
        yield client.get_executor(pure=False)
