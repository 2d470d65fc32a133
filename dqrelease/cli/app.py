"""The Typer apps, the global options and what every command shares.

The command groups (``budget``, ``server``), the ``--debug`` option, the error-to-exit-code mapping (one line on
stderr, see :func:`_fail`), the consoles, the config loader, Prefect's environment defaults and the fast exit of
:func:`main`. The commands are in :mod:`dqrelease.cli.release`, :mod:`dqrelease.cli.budget` and
:mod:`dqrelease.cli.server`; importing :mod:`dqrelease.cli` registers them.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing.util
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import click
import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from dqrelease.errors import DEBUG_VARIABLE, ExitCode, ReleaseError, committed_charge, debugging

EXIT_CODES_HELP = (
    "Exit codes: 0 success, 1 internal error, 2 invalid config or schema, 3 validation failure, 4 budget refused, "
    "5 verification mismatch (a published file or a replay's output differs from the manifest), 6 replay refused "
    "(config, schema, input files, code or package versions differ from the manifest; nothing was read), "
    "7 nothing to replay (the Python API's replay_release of an unseeded release; verify checks its files instead)."
)


class HelpConventions(TyperCommand):
    """A command whose help follows one convention (every command of the CLI is one: ``@app.command(cls=...)``).

    * Names of values are upper case: an argument's or option's own name (``CONFIG``, ``MANIFEST``, ``--port
      PORT``) unless it gives a ``metavar`` (``--ledger PATH``); no ``{CONFIG}``, ``config <path>`` or ``<int>``.
    * The usage line is click's: ``dqrelease run [OPTIONS] CONFIG``, an optional argument in brackets.
    * The command list shows the whole first sentence (:class:`FullShortHelp`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.metavar is None and not getattr(param, "is_flag", False) and param.name is not None:
                param.metavar = param.name.upper()

    def get_short_help_str(self, limit: int = 45) -> str:
        """The whole first sentence of the help (click would cut it at the terminal's width)."""
        return super().get_short_help_str(limit=sys.maxsize)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        """``[OPTIONS]``, then each argument's name (in brackets when optional)."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":  # typer's arguments are not click.Argument
                pieces.append(param.metavar if param.required else f"[{param.metavar}]")
        return pieces

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Arguments then options, each under its own heading, an argument by its name only (no value type)."""
        sections: dict[str, list[tuple[str, str]]] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                sections["Arguments"].append((str(param.metavar), record[1]))
            else:
                sections["Options"].append(record)
        for title, rows in sections.items():
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class FullShortHelp(TyperGroup):
    """A command group whose own line in its parent's command list is its whole first sentence."""

    def get_short_help_str(self, limit: int = 45) -> str:
        """The whole first sentence of the help (click would cut it at the terminal's width)."""
        return super().get_short_help_str(limit=sys.maxsize)


# rich_markup_mode=None: click's plain help, where a flag shows no "<bool>" value type
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Differentially private synthetic data releases.",
    epilog=EXIT_CODES_HELP, rich_markup_mode=None,
)
budget_app = typer.Typer(
    no_args_is_help=True, help="Inspect and set privacy budgets in the ledger.", rich_markup_mode=None,
    cls=FullShortHelp,
)
app.add_typer(budget_app, name="budget")
server_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, cls=FullShortHelp,
    help="The local Prefect server that runs reuse (started by the first run unless PREFECT_API_URL is set).",
)
app.add_typer(server_app, name="server")
console = Console(stderr=True, soft_wrap=True)
_state = {"debug": False, "verbose": False}
PIPE_WIDTH = 10_000
"""Console width when stdout is not a terminal: tables keep their natural width instead of 80 columns."""


def _stdout() -> Console:
    """A console on stdout whose lines (paths included) are never wrapped."""
    out = Console(soft_wrap=True)
    return out if out.is_terminal else Console(soft_wrap=True, width=PIPE_WIDTH)


@app.callback()
def _options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Print tracebacks and Prefect's run logs on the terminal.")
    ] = False,
) -> None:
    """Differentially private synthetic data releases."""
    _state["debug"] = debug
    _state["verbose"] = False  # set by `run --verbose` for its own invocation only
    if debug:
        os.environ[DEBUG_VARIABLE] = "1"


PREFECT_DEFAULTS = {
    # a local server's SQLite database answers 503 while another writer holds it; Prefect's client retries 503 with
    # exponential backoff (2, 4, 8... s). Its default of 5 retries (62 s) was spent by 16 releases started at once
    # (bench/prefect_api_contention.py: 7 of 32 runs failed with PrefectHTTPStatusError 503, left Pending); 8 (510 s)
    "PREFECT_CLIENT_MAX_RETRIES": "8",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "GX_ANALYTICS_ENABLED": "false",
}


def _prefect_environment() -> None:
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


def _release_frames(error: BaseException | None) -> None:
    """Drop the local variables of the frames in ``error``'s tracebacks (and of its causes).

    Prefect keeps a failed run's exception alive until the interpreter exits. Its frames hold DuckDB
    connections and values, which DuckDB's nanobind bindings then report at exit as "nanobind: leaked N
    instances/functions" warnings. Clearing the frames releases them; the message and type stay. Before
    Python 3.13 a frame whose ``f_locals`` was read (rich's traceback reads it) keeps that snapshot dict
    after ``clear()``; reading ``f_locals`` again drops the cleared names from it.
    """
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        frames = error.__traceback__
        while frames is not None:
            frames.tb_frame.f_locals  # noqa: B018 - re-syncs the snapshot with the cleared frame
            frames = frames.tb_next
        error = error.__cause__ or error.__context__


def _fail(error: BaseException) -> NoReturn:
    """Print one line for ``error`` on stderr (plus the traceback with --debug) and exit with its code."""
    if _state["debug"]:
        console.print_exception()  # rich reads each frame's locals (its omit markers): cleared again below
    if isinstance(error, ReleaseError):
        # the failures of a ValidationFailedError are named in its message
        line, code = str(error), int(error.exit_code)
    elif _state["debug"]:
        line, code = f"{type(error).__name__}: {error}", int(ExitCode.INTERNAL_ERROR)
    else:
        # the message of an unexpected error could quote a data value: shown only with --debug
        line = f"{type(error).__name__}; rerun with --debug for the traceback"
        code = int(ExitCode.INTERNAL_ERROR)
    label = "error: " if isinstance(error, ReleaseError) else "internal error: "
    charged = committed_charge(error)  # a run that failed after its ledger charge says so
    if charged:
        line = f"{line}; {charged}"
    console.print(Text.assemble((label, "red"), line.replace("\n", " ")), highlight=False)
    _release_frames(error)
    raise typer.Exit(code)


@contextmanager
def _exit_codes() -> Iterator[None]:
    """Map errors raised inside the block to the CLI's exit codes (typer's own exits pass through)."""
    try:
        yield
    except (typer.Exit, typer.BadParameter):
        raise
    except Exception as error:  # every other error becomes an exit code with a safe message
        _fail(error)


def _load(config: Path):
    from dqrelease.inputs.config import load_config
    from dqrelease.inputs.schema import load_schema

    loaded = load_config(config)
    return loaded, load_schema(loaded.schema_file)


CRON_FIX = "give five fields 'minute hour day-of-month month day-of-week', e.g. --cron '0 6 1 * *' (06:00 on the 1st)"


def check_cron(cron: str) -> None:
    """Refuse a cron schedule Prefect would not accept, before the config is loaded or a server started.

    Raises:
        ConfigInvalidError: One line naming the schedule and the fix (exit 2).
    """
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    from dqrelease.errors import ConfigInvalidError

    try:
        CronSchedule(cron=cron)
    except ValidationError as error:
        reason = error.errors()[0]["msg"].removeprefix("Value error, ").split(":")[0]
        raise ConfigInvalidError(f"--cron {cron!r} is not a valid cron schedule ({reason}); {CRON_FIX}") from None


def quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with its standard error on ``/dev/null`` (unless ``--debug``).

    The tracker is the process that unlinks the named semaphores of this process's ``spawn`` queues (the side
    process's) if they are still registered when this process ends, and it says so on its standard error, which it
    inherits when it starts: under load a refused run's one line was followed, rarely, by two lines of "leaked
    semaphore objects" (``tests/robustness/test_concurrency.py`` on a loaded machine, twice in one day). Which
    semaphore escapes :func:`multiprocessing.util._exit_function` was not found; the tracker still removes it, only
    its words are dropped. Called just before the side process starts; the tracker is started once per process.
    """
    if debugging():
        return
    from multiprocessing import resource_tracker

    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(2)
    try:
        os.dup2(devnull, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _exit_without_teardown() -> None:
    """Exit handler registered by :func:`main` before Prefect is imported: it runs after Prefect's handlers.

    By then Prefect's own handlers have sent its last logs and events to the server. What remains is the
    interpreter's teardown (clearing thousands of modules and collecting the objects Prefect, GX and pandas
    created), 1-3 s that change nothing, except multiprocessing's exit handler, which is run here: it releases the
    side process's queue semaphores, which otherwise stay registered while an exception's traceback still holds
    them, and the resource tracker then prints a warning of leaked semaphores after the refusal's one line. Once
    the logging handlers and the standard streams are flushed the process ends here with the command's exit code;
    if flushing fails, the normal exit goes on.
    """
    code = _state.get("exit_code")
    if not isinstance(code, int):
        return
    try:
        multiprocessing.util._exit_function()  # registered before this handler, so it would run after it
        logging.shutdown()  # registered before this handler, so it would run after it
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def main() -> None:  # pragma: no cover - console entry point (tests/cli run it as `python -m dqrelease.cli`)
    """Entry point: run the command, then end the process without the interpreter's teardown."""
    atexit.register(_exit_without_teardown)
    try:
        app()
    except SystemExit as done:
        _state["exit_code"] = 0 if done.code is None else done.code
        raise
