"""The reusable local Prefect server: started once in the background, found again by later runs.

Prefect's default without a configured API is a *temporary* server started inside every process that runs a
flow and stopped when it exits; that costs 9-17 s per ``dqrelease run``. Prefect users run a long-lived
server instead (``prefect server start``); this module does that for them on first use.

Which Prefect API a run uses (first match wins):

1. A Prefect API the user configured (``PREFECT_API_URL`` in the environment, a Prefect profile, ``.env`` or
   ``prefect.toml``): used as it is; dqrelease starts and stops nothing.
2. ``DQRELEASE_PREFECT_SERVER=ephemeral``: Prefect's temporary per-run server (nothing is left running).
3. Otherwise the server recorded in the state file, if its process is the one dqrelease started and it
   answers; else a new one is started with ``python -m prefect server start`` (the documented command, run
   as a detached process: own session, output to a log file), preferring Prefect's default port 4200 and
   taking a free port when 4200 is taken.

What is Prefect's: the server itself and its options (``prefect server start --host --port --log-level
--analytics-off``, ``prefect --no-prompt``), its health endpoint (``/api/health``), the settings that say
which API is configured, ``temporary_settings`` and the temporary server of :func:`shared_api`. The rest is
hand-written because Prefect 3.8.8's ``server start --background`` / ``status`` / ``stop`` cannot do it; each
such piece's docstring says why in one line (the evidence: docs/decisions.md, "A reusable local Prefect server").

State (per user): ``$DQRELEASE_STATE_DIR``, else ``$XDG_STATE_HOME/dqrelease``, else
``~/.local/state/dqrelease``, holding ``prefect-server.json`` (pid, process start time, URL, Prefect
version), ``prefect-server.log`` and a lock file that serializes concurrent starts.

Invariants:

* A process is only ever signalled if its pid *and* its start time match the state file, i.e. it is the
  server dqrelease started (a reused pid or a server someone else started is never killed).
* A state file whose process is gone (or is another process) is stale: it is removed, nothing is killed.
* A server started by a different Prefect version than the installed one is replaced (it is ours).

This module imports no Prefect code at module level, so a refusal before a run starts stays fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Literal

import psutil

from dqrelease.errors import ConfigInvalidError, ReleaseError

__all__ = [
    "MODE_VARIABLE",
    "PREFERRED_PORT",
    "STARTUP_TIMEOUT",
    "PrefectApi",
    "PrefectServerError",
    "ServerRecord",
    "ServerStatus",
    "configured_api_url",
    "find_or_start",
    "prefect_api",
    "server_status",
    "shared_api",
    "state_dir",
    "stop_server",
    "wait_until_ready",
]

MODE_VARIABLE = "DQRELEASE_PREFECT_SERVER"
"""Environment variable: ``auto`` (default: reuse or start the local server) or ``ephemeral``."""

STATE_VARIABLE = "DQRELEASE_STATE_DIR"
"""Environment variable overriding the per-user state directory."""

HEARTBEAT_VARIABLES = ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY")
"""Prefect's settings of the flow-run heartbeat; when one is set, a run keeps the user's heartbeat."""

PREFERRED_PORT = 4200
"""Prefect's default server port, used when it is free."""

HOST = "127.0.0.1"

STARTUP_TIMEOUT = 180.0
"""Seconds a run waits for a starting server (a fresh Prefect database is migrated on the first start)."""

STOP_TIMEOUT = 20.0

_STATE_FILE = "prefect-server.json"
_LOG_FILE = "prefect-server.log"
_LOCK_FILE = "prefect-server.lock"


class PrefectServerError(ReleaseError):
    """The local Prefect server could not be started or did not answer (exit code 1)."""


@dataclass(frozen=True, kw_only=True)
class ServerRecord:
    """What the state file records about the server dqrelease started.

    Hand-written: Prefect's ``--background`` records only a pid, in ``$PREFECT_HOME/server.pid``.

    Attributes:
        pid: Process id of ``prefect server start``.
        create_time: The process's start time (psutil), which identifies it together with the pid.
        api_url: ``http://127.0.0.1:<port>/api``.
        port: TCP port.
        prefect_version: Prefect version that started it.
        started_at: UTC start time (ISO 8601).
        log: The server's log file.
    """

    pid: int
    create_time: float
    api_url: str
    port: int
    prefect_version: str
    started_at: str
    log: str

    @property
    def ui_url(self) -> str:
        """The Prefect UI of this server."""
        return self.api_url.removesuffix("/api")


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """The server's state as :func:`server_status` sees it.

    Attributes:
        state: ``running`` (answers), ``starting`` (our process is alive, not answering yet), ``stopped``
            (no state file) or ``stale`` (the state file's process is gone or is not ours; the file was
            removed).
        record: The state file's record (None when stopped).
    """

    state: Literal["running", "starting", "stopped", "stale"]
    record: ServerRecord | None


@dataclass(frozen=True, kw_only=True)
class PrefectApi:
    """The Prefect API a command uses (see the module docstring for the order).

    Attributes:
        source: ``configured`` (the user's PREFECT_API_URL / profile), ``ephemeral`` (Prefect's temporary
            per-run server), ``reused`` (the local server an earlier run started) or ``started`` (started now).
        url: The API URL (None for ``ephemeral``: Prefect picks it).
        record: The local server's record (``reused`` / ``started`` only).
    """

    source: Literal["configured", "ephemeral", "reused", "started"]
    url: str | None
    record: ServerRecord | None = None

    @contextlib.contextmanager
    def connected(self) -> Iterator[None]:
        """Inside the block Prefect talks to this API (after waiting for a starting server to answer).

        Prefect's settings are overridden with ``temporary_settings`` for this process, and
        ``PREFECT_API_URL`` is exported for the processes it starts (local Dask workers); both are restored.

        On a server dqrelease runs (``reused``, ``started``, ``ephemeral``) flow-run heartbeats are off unless
        the user set ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``: nothing reads them there (they feed automations
        that mark crashed runs, which such a server does not have), and ending a run waits up to a second for
        the heartbeat thread's sleep. A configured API keeps Prefect's settings as they are.
        """
        if self.source == "configured":
            yield
            return
        from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

        updates: dict = {}
        if not any(os.environ.get(name) for name in HEARTBEAT_VARIABLES):
            updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
        with contextlib.ExitStack() as stack:
            if self.record is not None:
                wait_until_ready(self.record)
                stack.enter_context(shared_api(self.record.api_url))
            stack.enter_context(temporary_settings(updates=updates))
            yield


def configured_api_url() -> str | None:
    """The Prefect API URL the user configured (environment, profile, ``.env``, ``prefect.toml``), if any."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


@contextlib.contextmanager
def shared_api(url: str | None = None) -> Iterator[str]:
    """Inside the block this process and the processes it starts (local Dask workers) use one Prefect API.

    The API is ``url``, else the configured one, else Prefect's temporary server (``SubprocessASGIServer``,
    started here and stopped at the end). This process gets it through ``temporary_settings``, its children
    through ``PREFECT_API_URL`` in the environment; both are restored afterwards.

    Yields:
        The API URL.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with contextlib.ExitStack() as stack:
        url = url or configured_api_url()
        if not url:
            from prefect.server.api.server import SubprocessASGIServer

            server = SubprocessASGIServer()
            server.start(timeout=90)
            stack.callback(server.stop)
            url = server.api_url
        previous = os.environ.get("PREFECT_API_URL")
        stack.callback(_restore_environment, "PREFECT_API_URL", previous)
        os.environ["PREFECT_API_URL"] = url
        stack.enter_context(temporary_settings(updates={PREFECT_API_URL: url}))
        yield url


def _restore_environment(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def prefect_api() -> PrefectApi:
    """Decide which Prefect API a command uses; find or start the local server when that is the answer.

    A server started here may still be starting: :meth:`PrefectApi.connected` waits for it, so the caller can
    import the flow in between.

    Raises:
        ConfigInvalidError: If ``DQRELEASE_PREFECT_SERVER`` is neither ``auto`` nor ``ephemeral``.
    """
    configured = configured_api_url()
    if configured:
        return PrefectApi(source="configured", url=configured)
    mode = os.environ.get(MODE_VARIABLE, "auto") or "auto"
    if mode == "ephemeral":
        return PrefectApi(source="ephemeral", url=None)
    if mode != "auto":
        raise ConfigInvalidError(f"{MODE_VARIABLE}={mode!r} must be 'auto' or 'ephemeral'")
    record, started = find_or_start()
    return PrefectApi(source="started" if started else "reused", url=record.api_url, record=record)


# ---------------------------------------------------------------------- locations
def state_dir() -> Path:
    """The per-user state directory (see the module docstring); created on demand by the writers.

    Not ``PREFECT_HOME``: its one ``server.pid`` serves every tool; a home of our own would move the database too.
    """
    explicit = os.environ.get(STATE_VARIABLE)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "dqrelease"


def _state_path() -> Path:
    return state_dir() / _STATE_FILE


@contextlib.contextmanager
def _state_lock() -> Iterator[None]:
    """Serialize find/start/stop across processes (an advisory lock on the lock file).

    Hand-written: the kernel frees a dead holder's lock; Prefect's ``--background`` pid file outlives its server.
    """
    directory = state_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory / _LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_record() -> ServerRecord | None:
    try:
        return ServerRecord(**json.loads(_state_path().read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):  # unreadable or from another version: treat as stale
        _state_path().unlink(missing_ok=True)
        return None


def _write_record(record: ServerRecord) -> None:
    path = _state_path()
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(asdict(record), indent=2) + "\n")
    os.replace(temporary, path)


# ---------------------------------------------------------------------- process checks
def _our_process(record: ServerRecord) -> psutil.Process | None:
    """The recorded process if it is still the one dqrelease started (same pid and start time), else None.

    Hand-written: Prefect's ``server stop`` signals whatever process has the pid in its file.
    """
    try:
        process = psutil.Process(record.pid)
        if process.create_time() != record.create_time or process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return process


def _answers(api_url: str, timeout: float = 1.0) -> bool:
    """Whether a Prefect API answers its health check ``/api/health`` (Prefect's endpoint) at ``api_url``.

    Read with urllib: Prefect's client (so ``prefect server status`` too) retries timeouts 5 times, 2-32 s apart.
    """
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _port_is_free(port: int) -> bool:
    """Checked before the detached start: ``prefect server start`` refuses a taken port only in its log."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    """Hand-written: ``prefect server start`` cannot pick another port when its port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _prefect_version() -> str:
    return metadata.version("prefect")


# ---------------------------------------------------------------------- public operations
def server_status() -> ServerStatus:
    """Look at the state file and the recorded process; remove a stale state file (killing nothing).

    Hand-written: ``prefect server status`` only asks the configured API's health, not whose process it is.
    """
    with _state_lock():
        record = _read_record()
        if record is None:
            return ServerStatus(state="stopped", record=None)
        if _our_process(record) is None:
            _state_path().unlink(missing_ok=True)
            return ServerStatus(state="stale", record=record)
    return ServerStatus(state="running" if _answers(record.api_url) else "starting", record=record)


def find_or_start(*, port: int | None = None) -> tuple[ServerRecord, bool]:
    """The running server dqrelease started, or a newly started one (which may still be starting).

    Hand-written: Prefect neither finds a server it started earlier nor knows which Prefect version started it.

    Args:
        port: Port for a new server (default: 4200 if free, else a free port). Ignored when one runs.

    Returns:
        The server's record and whether it was started by this call. Call :func:`wait_until_ready` before
        sending it work.

    Raises:
        PrefectServerError: If the requested port is taken.
    """
    with _state_lock():
        record = _read_record()
        if record is not None:
            process = _our_process(record)
            if process is not None and record.prefect_version == _prefect_version():
                return record, False
            if process is not None:  # ours, but another Prefect version: its API may not match this client
                _terminate(process)
            _state_path().unlink(missing_ok=True)
        return _start(port), True


def wait_until_ready(record: ServerRecord, *, timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait until the server answers its health check.

    Hand-written: ``prefect server status --wait`` keeps polling until its timeout when the server has died.

    Raises:
        PrefectServerError: If its process ends first, or it does not answer within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not _answers(record.api_url):
        if _our_process(record) is None:
            with _state_lock():
                if _read_record() == record:
                    _state_path().unlink(missing_ok=True)
            raise PrefectServerError(
                f"the local Prefect server stopped while starting ({_last_log_line(record.log)}); see its log "
                f"{record.log}, or set PREFECT_API_URL to a Prefect server you run"
            )
        if time.monotonic() > deadline:
            raise PrefectServerError(
                f"the local Prefect server at {record.ui_url} did not answer within {timeout:g} s; see its log "
                f"{record.log}, or stop it with `dqrelease server stop` and retry"
            )
        time.sleep(0.1)


def stop_server() -> tuple[Literal["stopped", "stale", "none"], ServerRecord | None]:
    """Stop the server dqrelease started, if it is still that process.

    Returns:
        ``("stopped", record)`` after terminating it, ``("stale", record)`` when the state file named a process
        that is gone or is not ours (the file is removed, nothing is killed), ``("none", None)`` without a
        state file.
    """
    with _state_lock():
        record = _read_record()
        if record is None:
            return "none", None
        process = _our_process(record)
        if process is not None:
            _terminate(process)
        _state_path().unlink(missing_ok=True)
    return ("stopped" if process is not None else "stale"), record


# ---------------------------------------------------------------------- starting and stopping
def _start(port: int | None) -> ServerRecord:
    """Spawn ``python -m prefect server start`` in its own session (caller holds the state lock).

    Not ``--background``: its server writes to dead pipes and stays in the caller's process group (Ctrl-C stops it).
    """
    if port is None:
        port = PREFERRED_PORT if _port_is_free(PREFERRED_PORT) else _free_port()
    elif not _port_is_free(port):
        raise PrefectServerError(f"port {port} on {HOST} is in use; give another --port")
    directory = state_dir()
    log = directory / _LOG_FILE
    environment = {**os.environ, "DO_NOT_TRACK": "1"}
    environment.pop("PREFECT_API_URL", None)
    # one line per request at INFO would grow the log with every run; warnings and errors are kept
    log_level = os.environ.get("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    command = [sys.executable, "-m", "prefect", "--no-prompt", "server", "start", "--host", HOST,
               "--port", str(port), "--log-level", log_level, "--analytics-off"]
    # posix_spawn, not subprocess.Popen: the server outlives this process, which never waits for it
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    try:
        pid = os.posix_spawn(
            sys.executable, command, environment, setsid=True,
            file_actions=[(os.POSIX_SPAWN_DUP2, null_fd, 0), (os.POSIX_SPAWN_DUP2, log_fd, 1),
                          (os.POSIX_SPAWN_DUP2, log_fd, 2)],
        )
    finally:
        os.close(log_fd)
        os.close(null_fd)
    record = ServerRecord(
        pid=pid,
        create_time=psutil.Process(pid).create_time(),
        api_url=f"http://{HOST}:{port}/api",
        port=port,
        prefect_version=_prefect_version(),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        log=str(log),
    )
    _write_record(record)
    return record


def _terminate(process: psutil.Process) -> None:
    """SIGTERM (Prefect shuts down cleanly), then SIGKILL if it is still there after :data:`STOP_TIMEOUT` s.

    Hand-written: Prefect's ``server stop`` sends SIGTERM and returns at once (a replacement may find the port taken).
    """
    with contextlib.suppress(psutil.Error):
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except psutil.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)


def _last_log_line(log: str) -> str:
    """Hand-written: the server's log file is ours (Prefect's ``--background`` keeps no output)."""
    try:
        lines = [line.strip() for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:200] if lines else "empty log"
