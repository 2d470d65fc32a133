"""Running the embarrassingly parallel parts of a release on a Dask cluster (via prefect-dask).

``run.dask_address`` (or ``dqrelease run --dask ADDRESS``) is either the address of an existing Dask
scheduler (``tcp://scheduler:8786``) or ``local`` / ``local:N`` for a cluster of ``N`` (default 2) worker
processes on this machine. What runs there: raw-table validation and discretization by chunks of rows, answering
the workload on the private data (partitioned by marginal), the mechanism (several releases fan out in parallel in
``release_many``), FEM's independent oracle calls of a round, and the decoding and CSV text of the published rows by
chunks (:mod:`dqrelease.runtime.chunks`). Ingest, the sums of the chunks' counts, the published rows' draw and their
writing stay on the driver. Results are identical to a single-machine run with the same seed.

Dask workers report task states and artifacts to the same Prefect API as the flow: a local cluster's workers
inherit it through :func:`dqrelease.runtime.prefect_server.shared_api` (which starts Prefect's temporary server
when no API is set); a remote cluster needs a Prefect server both sides can reach (set
``PREFECT_API_URL`` on the flow's machine and on the workers).

A scheduler address is reached (:func:`check_scheduler`, at most :data:`SCHEDULER_TIMEOUT` seconds) before the flow
starts, so a cluster that does not answer stops the run before anything is read or charged.

The private table and the generator's key travel to the workers, so a scheduler on another machine is reached over
TLS: a ``tls://`` address with the certificate files of ``[run.dask_tls]`` (Dask's
:class:`distributed.security.Security`), or, when the operator opts in (``--dask-insecure`` /
``run.dask_insecure``), plain TCP. :meth:`DaskAccess.check` refuses anything else before Dask is imported;
``local`` / ``local:N`` and loopback addresses (127.0.0.0/8, ``::1``, ``localhost``) never leave the machine.

Progress: a task on a worker sends its :class:`~dqrelease.runtime.progress.StageEvent` s as Dask events
(:func:`forward_progress`, topic :data:`PROGRESS_TOPIC`); :func:`dask_scheduler` subscribes to them and hands them to
this process's progress sinks, so a Dask run shows the same stages and rounds as a local one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from dqrelease.errors import ConfigInvalidError
from dqrelease.runtime import progress

if TYPE_CHECKING:
    from distributed.security import Security
    from prefect_dask import DaskTaskRunner

__all__ = [
    "DASK_EXTRA", "INSECURE_FLAG", "PROGRESS_TOPIC", "SCHEDULER_TIMEOUT", "DaskAccess", "Scheduler", "TlsFiles",
    "check_scheduler", "dask_executor", "dask_scheduler", "executor_for", "flow_client_kwargs", "forward_progress",
    "local_worker_count",
]

PROGRESS_TOPIC = "dqrelease-progress"
"""Dask event topic of the progress events that tasks on workers send to the client."""

DEFAULT_LOCAL_WORKERS = 2

SCHEDULER_TIMEOUT = 5.0
"""Seconds :func:`check_scheduler` waits for a Dask scheduler to answer before the run is refused."""

DASK_EXTRA = 'pip install -e ".[dask]"'
"""The install command of the ``dask`` extra (distributed and prefect-dask), as the README gives it."""

DASK_PACKAGES = ("distributed", "prefect_dask")
"""The modules a Dask run imports: the ``dask`` extra's packages."""

TLS_SCHEME = "tls"
"""The scheme of an encrypted scheduler address (``tls://host:8786``), reached with ``[run.dask_tls]``'s files."""

INSECURE_FLAG = "--dask-insecure"
"""The flag of ``dqrelease run`` that allows plain TCP to another machine (``run.dask_insecure`` in the config)."""

_NOTHING_DONE = "nothing was read or charged"


class TlsFiles(Protocol):
    """The PEM files a ``tls://`` scheduler is reached with: ``[run.dask_tls]`` of the release config."""

    @property
    def ca_file(self) -> Path:
        """The certificate authority the cluster's certificates are signed by."""

    @property
    def cert_file(self) -> Path:
        """This client's certificate (signed by that authority)."""

    @property
    def key_file(self) -> Path | None:
        """Its private key; None when the key is in ``cert_file``."""


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
        raise ConfigInvalidError(f"dask address {address!r} must be 'local', 'local:N' or a URL like tls://host:8786")
    return None


def _is_loopback(address: str) -> bool:
    """The address's host is this machine's loopback: 127.0.0.0/8, ``::1`` or ``localhost`` (no name is resolved)."""
    host = urlsplit(address).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _missing_extra(module: str) -> ConfigInvalidError:
    return ConfigInvalidError(
        f"a Dask run needs the dask extra ({module} is not installed): {DASK_EXTRA} in the dqrelease folder, "
        f"or run without --dask / run.dask_address; {_NOTHING_DONE}"
    )


@dataclass(frozen=True, kw_only=True)
class DaskAccess:
    """How a run reaches its Dask cluster (built by ``RunConfig.dask_access``).

    Attributes:
        address: ``local`` / ``local:N`` or a scheduler URL (``tls://host:8786``, ``tcp://127.0.0.1:8786``).
        tls: The files a ``tls://`` scheduler is reached with (``[run.dask_tls]``); a local cluster needs none.
        insecure: The operator's opt-in to plain TCP to another machine (``--dask-insecure`` /
            ``run.dask_insecure``).
    """

    address: str
    tls: TlsFiles | None = None
    insecure: bool = False

    def check(self) -> None:
        """Refuse an address this run may not use, before anything is read or charged (imports no Dask).

        Raises:
            ConfigInvalidError: A malformed address; a plain scheduler address on another machine without the
                opt-in; a ``tls://`` address without ``[run.dask_tls]``, or one of its files missing; certificate
                files with a plain address; or the ``dask`` extra not installed.
        """
        if local_worker_count(self.address) is None:
            self._check_scheduler_address()
        for module in DASK_PACKAGES:
            if find_spec(module) is None:
                raise _missing_extra(module)

    def _check_scheduler_address(self) -> None:
        scheme = self.address.partition("://")[0].lower()
        if scheme == TLS_SCHEME:
            if self.tls is None:
                raise ConfigInvalidError(
                    f"Dask scheduler {self.address} is a TLS address but the config has no [run.dask_tls]: give its "
                    f"ca_file, cert_file and key_file (PEM files); {_NOTHING_DONE}"
                )
            files = {"ca_file": self.tls.ca_file, "cert_file": self.tls.cert_file, "key_file": self.tls.key_file}
            for key, path in files.items():
                if path is not None and not Path(path).is_file():
                    raise ConfigInvalidError(
                        f"run.dask_tls.{key} {path} does not exist; fix it in the release config (relative paths "
                        f"are resolved against the config file's directory); {_NOTHING_DONE}"
                    )
            return
        if self.tls is not None:
            raise ConfigInvalidError(
                f"[run.dask_tls] is set but Dask scheduler {self.address} is not a {TLS_SCHEME}:// address: use "
                f"{TLS_SCHEME}://HOST:PORT, or remove [run.dask_tls]; {_NOTHING_DONE}"
            )
        if not self.insecure and not _is_loopback(self.address):
            raise ConfigInvalidError(
                f"Dask scheduler {self.address} is on another machine over plain {scheme}://, which would send the "
                f"private data and the generator's key unencrypted; use a {TLS_SCHEME}:// address with certificate "
                f"files in [run.dask_tls], or opt in with {INSECURE_FLAG} (run.dask_insecure = true); {_NOTHING_DONE}"
            )

    def security(self) -> Security | None:
        """Dask's :class:`~distributed.security.Security` for a ``tls://`` scheduler, its files loaded; else None.

        Raises:
            ConfigInvalidError: The files are not a PEM certificate authority, certificate and key that belong
                together.
        """
        if self.tls is None or local_worker_count(self.address) is not None:
            return None
        from distributed.security import Security

        key = self.tls.key_file
        security = Security(
            require_encryption=True, tls_ca_file=str(self.tls.ca_file), tls_client_cert=str(self.tls.cert_file),
            tls_client_key=None if key is None else str(key),
        )
        try:
            security.get_connection_args("client")  # loads the files: a bad one is refused here, not at connect
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
            raise ConfigInvalidError(
                f"the files of [run.dask_tls] cannot be used for TLS ({error}): give a PEM certificate authority, "
                f"certificate and private key that belong together; {_NOTHING_DONE}"
            ) from None
        return security


@dataclass(frozen=True, kw_only=True)
class Scheduler:
    """A Dask scheduler this process reached: its address and the security its clients connect with."""

    address: str
    security: Security | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of a ``distributed.Client`` for this scheduler."""
        return {} if self.security is None else {"security": self.security}

    def task_runner(self) -> DaskTaskRunner:
        """A prefect-dask task runner on this scheduler, its client connecting with the same security."""
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=self.address, client_kwargs=self.client_kwargs())


def _distributed() -> ModuleType:
    """The ``distributed`` module (imported only when a run asks for Dask), or a refusal naming what to install."""
    try:
        import distributed
        import prefect_dask  # noqa: F401 - the flow's task runner needs it too
    except ImportError as error:
        raise _missing_extra(error.name or "distributed") from None
    return distributed


def check_scheduler(address: str, *, security: Security | None = None, timeout: float = SCHEDULER_TIMEOUT) -> None:
    """Connect to the Dask scheduler at ``address`` with ``security`` and disconnect, within ``timeout`` seconds.

    Raises:
        ConfigInvalidError: Dask is not installed, the scheduler did not answer, or it refused the certificates
            (nothing was read or charged).
    """
    distributed = _distributed()
    from distributed.comm.core import FatalCommClosedError

    try:
        with distributed.Client(address, timeout=timeout, set_as_default=False, security=security):
            pass
    except FatalCommClosedError:  # a TLS handshake that failed: not the cluster's certificate authority
        raise ConfigInvalidError(
            f"Dask scheduler {address} and the certificates of [run.dask_tls] do not trust each other; give the "
            f"cluster's certificate authority and a certificate it signed; {_NOTHING_DONE}"
        ) from None
    except (OSError, TimeoutError, ValueError) as error:
        reason = "did not answer" if isinstance(error, OSError | TimeoutError) else "is not a scheduler address"
        raise ConfigInvalidError(
            f"Dask scheduler {address} {reason} within {timeout:g} s; start the scheduler or fix the address "
            f"(--dask or run.dask_address), or run without Dask; {_NOTHING_DONE}"
        ) from None


@contextmanager
def dask_scheduler(access: DaskAccess) -> Iterator[Scheduler]:
    """Yield the scheduler of ``access``: the given one (once it answers), or that of a local cluster started here.

    Raises:
        ConfigInvalidError: As :meth:`DaskAccess.check` and :meth:`DaskAccess.security`, or the scheduler did not
            answer.
    """
    access.check()
    workers = local_worker_count(access.address)
    with ExitStack() as stack:
        if workers is None:
            scheduler = Scheduler(address=access.address, security=access.security())
            check_scheduler(scheduler.address, security=scheduler.security)
            stack.enter_context(_progress_from_workers(scheduler))
            yield scheduler
            return
        LocalCluster = _distributed().LocalCluster  # noqa: N806 - a class

        from dqrelease.runtime.prefect_server import shared_api

        stack.enter_context(shared_api())  # the local workers report to this process's Prefect API
        # ":0": the scheduler's HTTP server (and a dashboard, if bokeh is installed) on a free port; None still binds
        # it to 8787, and a second local cluster on the machine (another release) then prints a warning line
        cluster = stack.enter_context(
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        )
        scheduler = Scheduler(address=cluster.scheduler_address)
        stack.enter_context(_progress_from_workers(scheduler))
        yield scheduler


@contextmanager
def _progress_from_workers(scheduler: Scheduler) -> Iterator[None]:
    """Inside the block the progress events workers send (:func:`forward_progress`) reach this process's sinks."""
    from distributed import Client

    def deliver(event: tuple[float, dict]) -> None:
        progress.emit(progress.StageEvent.from_message(event[1]))

    with Client(scheduler.address, set_as_default=False, **scheduler.client_kwargs()) as client:
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
    """An executor on the Dask cluster for a task's inner parallel work (FEM's oracle calls, the particles' moves).

    Inside a Dask worker (the mechanism task of a flow on a ``DaskTaskRunner``) the worker's own client is
    used, and the task secedes from the worker's thread pool while it waits: otherwise the calls it submits
    could queue behind it on a one-thread worker forever; it connects as the worker does (over TLS on a TLS
    cluster). Elsewhere a client connects to ``address`` as the running flow's task runner does
    (:func:`flow_client_kwargs`).
    Futures are submitted with ``pure=False``: two calls are never merged because their arguments look alike.
    """
    from distributed import Client, worker_client

    with worker_client() if _inside_dask_worker() else Client(address, **flow_client_kwargs()) as client:
        yield client.get_executor(pure=False)


@contextmanager
def executor_for(address: str | None) -> Iterator[Executor | None]:
    """:func:`dask_executor` on ``address``, or None without a cluster.

    Without one the engine's parallel parts (FEM's oracle calls, the particles' move shards) run in this process,
    with the same result.
    """
    if address is None:
        yield None
        return
    with dask_executor(address) as executor:
        yield executor


def flow_client_kwargs() -> dict[str, Any]:
    """How a client of the running flow's cluster connects: its ``DaskTaskRunner``'s security, if it has one.

    Outside a flow on a ``DaskTaskRunner`` (tests, the Python API): no keyword, Dask's configured security.
    """
    from prefect.context import FlowRunContext

    runner = getattr(FlowRunContext.get(), "task_runner", None)
    security = (getattr(runner, "client_kwargs", None) or {}).get("security")
    return {} if security is None else {"security": security}
