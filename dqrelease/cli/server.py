"""``dqrelease server start|status|stop``: the local Prefect server that runs reuse."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dqrelease.cli.app import HelpConventions, _exit_codes, _prefect_environment, _stdout, server_app


def _describe_server(record: Any) -> str:
    return (f"{record.ui_url} (API {record.api_url}, pid {record.pid}, Prefect {record.prefect_version}, "
            f"started {record.started_at}; log {record.log})")


def _export_line(api_url: str) -> str:
    """The line that points Prefect's own CLI (``prefect deployment run``, ``prefect flow-run ls``) at ``api_url``.

    Without it ``prefect`` started from a plain shell starts a temporary server of its own on the same database.
    """
    return f"  export PREFECT_API_URL={api_url}   # for `prefect` commands against this server"


def started_server_notice(record: Any) -> str:
    """The one line ``run`` prints when it started the local Prefect server (which outlives the run)."""
    return (f"started a local Prefect server in the background at {record.ui_url} (pid {record.pid}); it keeps "
            "running for later runs: `dqrelease server status` shows it, `dqrelease server stop` stops it")


def _configured_note() -> str | None:
    """What runs use when the user configured a Prefect API (None: dqrelease's own server), with its export line."""
    from dqrelease.runtime.prefect_server import configured_api_url

    _prefect_environment()
    url = configured_api_url()
    return None if url is None else (
        f"runs use the Prefect API configured in Prefect's settings ({url}); dqrelease starts no server\n"
        f"{_export_line(url)}"
    )


@server_app.command("start", cls=HelpConventions)
def server_start(
    port: Annotated[int | None, typer.Option(help="Port of a new server (default: 4200 if free, else any free one).")]
    = None,
) -> None:
    """Start the local Prefect server in the background (or show the one already running)."""
    with _exit_codes():
        from dqrelease.runtime.prefect_server import find_or_start, wait_until_ready

        note = _configured_note()
        if note is None:
            record, started = find_or_start(port=port)
            wait_until_ready(record)
    out = _stdout()
    if note is not None:
        out.print(note, markup=False, highlight=False)
        return
    out.print(f"{'started' if started else 'already running'}: Prefect server at {_describe_server(record)}\n"
              f"{_export_line(record.api_url)}", markup=False, highlight=False)


@server_app.command("status", cls=HelpConventions)
def server_status_command() -> None:
    """Show whether the local Prefect server runs, where, and which API runs use."""
    with _exit_codes():
        from dqrelease.runtime.prefect_server import server_status, state_dir

        note = _configured_note()
        status = server_status()
    out = _stdout()
    if note is not None:
        out.print(note, markup=False, highlight=False)
    record = status.record
    if status.state in ("running", "starting"):
        line = f"{status.state}: Prefect server started by dqrelease at {_describe_server(record)}"
        if note is None:
            line += f"\n{_export_line(record.api_url)}"
    elif status.state == "stale":
        line = (f"not running: the state file named pid {record.pid}, which is no longer the server dqrelease "
                "started; removed the stale state file (nothing was stopped)")
    else:
        line = f"not running (no server recorded in {state_dir()}); the next `dqrelease run` starts one"
    out.print(line, markup=False, highlight=False)


@server_app.command("stop", cls=HelpConventions)
def server_stop() -> None:
    """Stop the local Prefect server dqrelease started (never a server it did not start)."""
    with _exit_codes():
        from dqrelease.runtime.prefect_server import state_dir, stop_server

        outcome, record = stop_server()
    if outcome == "stopped":
        line = f"stopped the Prefect server at {record.ui_url} (pid {record.pid})"
    elif outcome == "stale":
        line = (f"nothing to stop: the state file named pid {record.pid}, which is no longer the server "
                "dqrelease started; removed the stale state file (nothing was killed)")
    else:
        line = f"nothing to stop: no server started by dqrelease is recorded in {state_dir()}"
    _stdout().print(line, markup=False, highlight=False)
