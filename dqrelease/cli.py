"""The ``dqrelease`` command line.

Commands: ``run CONFIG``, ``plan CONFIG``, ``budget show`` / ``budget set-cap``, ``verify MANIFEST``,
``serve CONFIG --cron`` and ``server start|status|stop`` (the local Prefect server runs reuse). Exit codes
(see :class:`dqrelease.errors.ExitCode`): 0 success, 1 internal error,
2 invalid config or schema, 3 validation failure, 4 budget refused, 5 verification mismatch, 6 replay refused,
7 nothing to verify.

Output rules: an expected refusal is one line on stderr and its exit code (tracebacks and Prefect's run logs only
with ``--debug``; the run logs are in the Prefect server in any case); printed paths are never wrapped.
Prefect, Great Expectations and Dask are imported only once a run really starts, so a bad config, schema or
plan is refused in about a second (``tests/cli/test_import_boundary.py``).
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dqrelease.errors import DEBUG_VARIABLE, ExitCode, ReleaseError

EXIT_CODES_HELP = (
    "Exit codes: 0 success, 1 internal error, 2 invalid config or schema, 3 validation failure, 4 budget refused, "
    "5 verification mismatch (a published file or a replay's output differs from the manifest), 6 replay refused "
    "(config, schema, input files, code or package versions differ from the manifest; nothing was read), "
    "7 nothing to verify (an unseeded release cannot be replayed)."
)
# rich_markup_mode=None: click's plain help, where a flag shows no "<bool>" value type
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Differentially private synthetic data releases.",
    epilog=EXIT_CODES_HELP, rich_markup_mode=None,
)
budget_app = typer.Typer(
    no_args_is_help=True, help="Inspect and set privacy budgets in the ledger.", rich_markup_mode=None
)
app.add_typer(budget_app, name="budget")
server_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None,
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

SIDE_PROCESS_WARM_UP = ("dqrelease.expectations.engine:warm_up",)
"""What the side process imports while a run starts: Great Expectations and its context (validation waits for it)."""

SIDE_PROCESS_WHEN_IDLE = ("dqrelease.outputs.report:warm_up",)
"""What it imports once first idle (after the raw table's validation): matplotlib's backend, for the report."""

PREFECT_DEFAULTS = {
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


def _plan_public(loaded: Any, schema: Any) -> tuple[Any, Any, Any]:
    """Domain, workload and plan from public quantities (plan None when n is a noisy count, known only later).

    Raises the config errors a plan finds (exit 2) without importing Prefect, GX or Dask.
    """
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.plan import build_workload, plan_release

    domain = domain_from_columns(schema.columns)
    workload = build_workload(loaded.workload, domain)
    if loaded.privacy.n == "noisy":
        return domain, workload, None
    return domain, workload, plan_release(loaded, n=int(loaded.privacy.n), workload=workload)


def _check_before_run(config: Path, dask: str | None, *, accept_low_utility: bool = False) -> Any:
    """Refuse a missing or invalid config, schema, source path, plan or Dask address before Prefect starts.

    A plan whose utility forecast is no better than publishing zeros or uniform data is refused too (exit 2,
    nothing read or charged) unless ``accept_low_utility``.

    Returns:
        The release's schema.
    """
    loaded, schema = _load(config)
    from dqrelease.inputs.ingest import check_source_files  # imports DuckDB and Arrow: only for a valid config
    from dqrelease.runtime.cluster import local_worker_count

    check_source_files(loaded.source)
    _, workload, planned = _plan_public(loaded, schema)
    if planned is not None and not accept_low_utility:
        from dqrelease.plan import check_release_utility

        check_release_utility(loaded, planned, n=int(loaded.privacy.n), workload=workload)
    address = dask or loaded.run.dask_address
    if address is not None:
        local_worker_count(address)
    return schema


class _QuietConsole(logging.Filter):
    """Keep Prefect's run logs off the terminal (they are in the Prefect server); keep other warnings.

    A failed run reaches the CLI as its exception and is printed as one line; the run logs would repeat it
    with two tracebacks.
    """

    RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and not record.name.startswith(self.RUN_LOGGERS)


PREFECT_SERVICE_LOGGERS = ("EventsWorker", "APILogWorker")
"""Loggers of Prefect's queue services (``prefect._internal.concurrency.services``), named after their classes."""


@contextmanager
def _quiet_prefect_console() -> Iterator[None]:
    """Filter Prefect's terminal handler with :class:`_QuietConsole` (not with --debug or ``run --verbose``).

    Call it after importing the flow: ``prefect.main`` configures logging when it is imported.
    """
    if _state["debug"] or _state["verbose"]:
        yield
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    quiet = _QuietConsole()
    # Prefect's background services log "Still processing items: N items remaining..." while they drain at exit,
    # after this context has ended (their loggers are named after the class): only their errors are shown
    for service in PREFECT_SERVICE_LOGGERS:
        logging.getLogger(service).setLevel(logging.ERROR)
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in ("uvicorn", "fastapi"))]
    handlers = {h for lg in loggers for h in lg.handlers if isinstance(h, PrefectConsoleHandler)}
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def _run_release(config: Path, *, quiet: bool, dask: str | None = None, accept_low_utility: bool = False) -> dict:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dqrelease.runtime import progress
    from dqrelease.runtime.prefect_server import prefect_api

    _prefect_environment()
    api = prefect_api()  # a server started here starts while the flow's imports run
    from dqrelease.flows.release import run_release

    # no bar when stderr is not a terminal (a log file or a pipe gets no redraw sequences)
    bar = Progress(TextColumn("synthesizing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[status]}"), console=console, disable=quiet or not console.is_terminal)
    handle = {}

    def sink(done: int, total: int, public: dict) -> None:
        if "task" not in handle:
            handle["task"] = bar.add_task("rounds", total=total, status="")
        bar.update(handle["task"], completed=done, status=progress.describe_round(public))

    progress.set_sink(sink)
    try:
        with api.connected(), _quiet_prefect_console(), bar:
            return run_release(str(config), dask_address=dask, accept_low_utility=accept_low_utility)
    finally:
        progress.clear_sink()


@app.command()
def run(
    config: Annotated[Path, typer.Argument(metavar="CONFIG", help="Release config (TOML).")],
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Also print Prefect's run logs (task states, rounds) on stderr.")
    ] = False,
    dask: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Dask scheduler (tcp://host:8786), or 'local' / 'local:N' for N local worker processes.",
        ),
    ] = None,
    accept_low_utility: Annotated[
        bool,
        typer.Option(
            "--accept-low-utility",
            help="Publish even when the utility forecast is no better than publishing zeros or uniform data "
            "(`dqrelease plan` shows it; without this flag such a release is refused before anything is read).",
        ),
    ] = False,
) -> None:
    """Run a release: ingest, validate, charge the budget, synthesize, publish."""
    _state["verbose"] = verbose
    from dqrelease.runtime import side_process

    # Great Expectations and matplotlib are imported in the side process, on the other core, while this one checks
    # the config and starts the run (a refusal kills it at once)
    with _exit_codes(), side_process.running(SIDE_PROCESS_WARM_UP, when_idle=SIDE_PROCESS_WHEN_IDLE):
        schema = _check_before_run(config, dask, accept_low_utility=accept_low_utility)
        from dqrelease.expectations.validate import prepare_raw_suite

        prepare_raw_suite(schema)  # built in the side process right after its imports, before the data is read
        summary = _run_release(config, quiet=quiet, dask=dask, accept_low_utility=accept_low_utility)
    out = _stdout()
    cost = summary["privacy"][summary["accounting_mode"]]
    mode = summary["accounting_mode"]
    out.print(Text(f"release {summary['run_id']} published", style="green"))
    for line in (
        f"  synthetic table: {summary['release']}  ({', '.join(summary['outputs'])})",
        f"  INTERNAL error report + audit manifest: {summary['internal']}",
        f"  privacy charged ({mode}): epsilon={cost['epsilon']:.4g}, delta={cost['delta']:.3g}",
    ):
        out.print(line, markup=False, highlight=False)


@app.command()
def plan(config: Annotated[Path, typer.Argument(help="Release config (TOML).")]) -> None:
    """Show the privacy cost and the mechanism parameters without touching the data."""
    with _exit_codes():
        loaded, schema = _load(config)
        domain, workload, result = _plan_public(loaded, schema)
    out = _stdout()
    if result is None:
        from dqrelease.plan import mechanism_budget

        epsilon, delta = mechanism_budget(loaded)
        out.print(
            f"release {loaded.name}: n is private (add/remove neighbours). The run first charges "
            f"a Laplace count (epsilon={loaded.privacy.n_epsilon}, delta={loaded.privacy.delta / 2:.3g}), then "
            f"plans {loaded.mechanism.name} within epsilon={epsilon}, delta={delta:.3g} using the count's "
            "lower bound; the number of rounds and the utility forecast are known only after the count (a release "
            "forecast to be no better than zeros or uniform is refused then, before its own charge, unless "
            "--accept-low-utility).", markup=False, highlight=False,
        )
        return
    out.print(f"release {loaded.name}: {domain.n_bits} binary attributes from {len(domain)} columns, "
              f"workload {workload.description} ({len(workload):,} queries)", markup=False, highlight=False)
    table = Table("parameter", "value")
    for key, value in result.parameters.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    out.print(table)
    costs = Table("accounting", "epsilon", "delta", "rho", "analysis")
    for mode, cost in result.costs.items():
        marker = " (charged)" if mode == result.mode else ""
        costs.add_row(mode + marker, f"{cost.epsilon:.5g}", f"{cost.delta:.3g}",
                      "" if cost.rho is None else f"{cost.rho:.5g}", cost.method)
    out.print(costs)
    for note in result.notes:
        out.print(note, markup=False, highlight=False)
    _print_forecast(out, loaded, result, workload)


def _print_forecast(out: Console, loaded: Any, result: Any, workload: Any) -> None:
    """The utility forecast next to the baselines', and a warning (with a passing choice) when it is no better."""
    from dq_engine.evaluation.forecast import judge_forecast
    from dqrelease.mechanisms.dispatch import recommendation
    from dqrelease.mechanisms.utility import ACCEPT_FLAG, forecast_plan, forecast_shape
    from dqrelease.plan import mechanism_budget, plan_inputs

    n = int(loaded.privacy.n)
    inputs = plan_inputs(loaded, n=n, workload=workload)
    shape = forecast_shape(inputs, rows=loaded.output.rows or n)
    predicted = forecast_plan(result, shape)
    if predicted is None:
        out.print(f"forecast: no model for {result.mechanism}; its utility is not checked", markup=False,
                  highlight=False)
        return
    verdict = judge_forecast(predicted, shape)
    table = Table("forecast (public quantities only)", "worst one-way cell", "workload max", "source")
    for row in (verdict.forecast, *verdict.baselines):
        cells = row.worst_one_way_cell, row.workload_max
        table.add_row(row.label, *(cell.shown() for cell in cells),
                      " / ".join(dict.fromkeys(cell.source for cell in cells)))
    out.print(table)
    out.print("theory: closed form of the mechanism's noise; calibrated: noise formula x constants fitted on "
              "benchmark runs; bound: a public lower bound (docs/engine.md, 'Forecast')", markup=False,
              highlight=False)
    if verdict.passes:
        return
    epsilon, _ = mechanism_budget(loaded)
    offset = 0.0 if epsilon is None else loaded.privacy.epsilon - epsilon
    out.print(Text.assemble(
        ("warning: ", "yellow"),
        f"low utility: {'; '.join(verdict.failures)}. `dqrelease run` refuses this release unless {ACCEPT_FLAG} "
        f"is given; use {recommendation(inputs, epsilon_offset=offset)}",
    ), highlight=False)


def _ledger(ledger: Path | None, config: Path | None):
    from dqrelease.ledger import Ledger

    if ledger is None and config is None:
        raise typer.BadParameter("give --ledger PATH or --config CONFIG")
    return Ledger(ledger if ledger is not None else _load(config)[0].ledger.path)


SMALLEST_PLAIN = Fraction(1, 10_000)
"""Amounts below this (typically δ) are shown in e-notation; larger ones as plain decimals."""


def _amount(value: Fraction | None) -> str:
    """An exact amount as a short decimal, rounded to 6 significant digits (``--json`` has the exact fraction).

    A float amount such as δ = 1e-6 is stored at its binary value (slightly below 10⁻⁶); rounding to nearest
    shows it as ``1e-6`` again.
    """
    from decimal import Decimal, localcontext

    if value is None:
        return "-"
    with localcontext() as context:
        context.prec = 6
        number = (Decimal(value.numerator) / Decimal(value.denominator)).normalize()
    if number == 0 or abs(value) >= SMALLEST_PLAIN:
        return f"{number:f}"
    return f"{number:e}".replace("e-0", "e-")


def _budget_table(budgets: list[Any]) -> Table:
    table = Table("dataset", "charges", "budget", "cap", "spent", "remaining")
    for budget in budgets:
        cap, spent, remaining = budget.cap, budget.spent, budget.remaining
        names = ("epsilon", "delta", "rho") if cap is not None and cap.rho is not None else ("epsilon", "delta")
        for index, name in enumerate(names):
            table.add_row(
                budget.dataset_id if index == 0 else "",
                str(spent.charges) if index == 0 else "",
                name,
                "none" if cap is None else _amount(getattr(cap, name)),
                _amount(getattr(spent, name)),
                "-" if remaining is None else _amount(getattr(remaining, name)),
            )
    return table


def _charges_table(charges: tuple[Any, ...]) -> Table:
    table = Table("#", "charged at (UTC)", "run", "mechanism", "accounting", "epsilon", "delta", "rho")
    for charge in charges:
        table.add_row(
            str(charge.seq), charge.charged_at.strftime("%Y-%m-%d %H:%M:%S"), charge.run_id, charge.mechanism,
            charge.mode, _amount(charge.epsilon), _amount(charge.delta), _amount(charge.rho),
        )
    return table


@budget_app.command("show")
def budget_show(
    dataset: Annotated[str | None, typer.Argument(help="Dataset id (default: all).")] = None,
    ledger: Annotated[Path | None, typer.Option(metavar="FILE", help="Ledger DuckDB file.")] = None,
    config: Annotated[
        Path | None, typer.Option(metavar="CONFIG", help="Take the ledger path from this config.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (exact amounts as fractions, every charge) instead.")
    ] = False,
) -> None:
    """Show each dataset's cap, spent and remaining budget (and its charges when DATASET is given)."""
    with _exit_codes():
        store = _ledger(ledger, config)
        budgets = store.budgets(dataset)
    if as_json:
        typer.echo(json.dumps([budget.as_dict() for budget in budgets], indent=2, default=str))
        return
    out = _stdout()
    if not budgets:
        which = f"dataset {dataset!r}" if dataset is not None else "any dataset"
        out.print(f"ledger {store.path} has no cap or charge for {which}", markup=False, highlight=False)
        return
    out.print(_budget_table(budgets))
    if dataset is not None and budgets[0].charges:
        out.print(_charges_table(budgets[0].charges))
    if any(budget.cap is None for budget in budgets):
        out.print("a dataset without a cap refuses every charge: set one with `dqrelease budget set-cap`",
                  markup=False, highlight=False)


@budget_app.command("set-cap")
def budget_set_cap(
    dataset: Annotated[str, typer.Argument(help="Dataset id.")],
    epsilon: Annotated[float, typer.Option(help="Cap on the total epsilon.")],
    delta: Annotated[float, typer.Option(help="Cap on the total delta.")],
    rho: Annotated[float | None, typer.Option(help="Optional zCDP cap.")] = None,
    ledger: Annotated[Path | None, typer.Option(metavar="FILE", help="Ledger DuckDB file.")] = None,
    config: Annotated[
        Path | None, typer.Option(metavar="CONFIG", help="Take the ledger path from this config.")
    ] = None,
) -> None:
    """Create or change a dataset's budget cap."""
    with _exit_codes():
        _ledger(ledger, config).set_cap(dataset, epsilon=epsilon, delta=delta, rho=rho)
    _stdout().print(
        f"cap of {dataset}: epsilon={epsilon}, delta={delta}" + (f", rho={rho}" if rho else ""),
        markup=False, highlight=False,
    )


VERIFY_HELP = (
    "Check a release against its audit manifest: the published files, then a replay that must reproduce them "
    "byte for byte.\n\n"
    "The replay re-runs a seeded release with its recorded seed. Before it reads any data it checks that the "
    "config, schema, input files, code and package versions are the ones the manifest recorded, and refuses "
    "otherwise (exit 6, naming what differs). It charges nothing, the noisy count included, and publishes nothing. "
    "An unseeded release cannot be replayed (exit 7); a published file or a replayed output that differs from the "
    "manifest is exit 5."
)


@app.command(help=VERIFY_HELP, epilog=EXIT_CODES_HELP)
def verify(
    manifest: Annotated[Path, typer.Argument(help="internal/<run_id>/manifest.json of the release.")],
    release: Annotated[
        Path | None, typer.Option(help="Published release directory (default: <output.directory>/releases/<run_id>).")
    ] = None,
) -> None:
    """Check a release against its manifest: published files, then an uncharged replay (see VERIFY_HELP)."""
    with _exit_codes():
        from dqrelease.outputs.replay import check_published, compare_outputs, prepare_replay, read_manifest

        record = read_manifest(manifest)
        formats = check_published(record, release_dir=release)
        _stdout().print(f"published files match the manifest: {', '.join(formats)}", markup=False, highlight=False)
        prepare_replay(manifest)  # refuse before Prefect starts; the replay flow checks again before reading
        from dqrelease.runtime import side_process
        from dqrelease.runtime.prefect_server import prefect_api

        # as for `run`: slow imports beside the replay's start
        with side_process.running(SIDE_PROCESS_WARM_UP, when_idle=SIDE_PROCESS_WHEN_IDLE):
            _prefect_environment()
            api = prefect_api()
            from dqrelease.flows.release import replay_release

            with api.connected(), _quiet_prefect_console():
                summary = replay_release(str(manifest))
        expected = {fmt: output.model_dump() for fmt, output in record.outputs.items()}
        reproduced = compare_outputs(expected, summary["outputs"])
    _stdout().print(
        Text.assemble(("verified", "green"), f": {', '.join(reproduced)} reproduced byte for byte by a replay "
                      "(nothing charged, nothing published)"),
        highlight=False,
    )


@app.command()
def serve(
    config: Annotated[Path, typer.Argument(help="Release config (TOML).")],
    cron: Annotated[str, typer.Option(help="Cron schedule, e.g. '0 6 1 * *' (06:00 on the 1st).")],
    name: Annotated[str | None, typer.Option(help="Deployment name (default: the release name).")] = None,
) -> None:
    """Serve a Prefect deployment that runs the release on a cron schedule (blocks; Ctrl-C stops)."""
    with _exit_codes():
        loaded, _ = _load(config)
        _prefect_environment()
        from dqrelease.runtime.prefect_server import prefect_api

        api = prefect_api()
        from dqrelease.flows.release import release

        with api.connected():  # the deployment and its runs live in the same server as `dqrelease run`'s
            release.serve(
                name=name or loaded.name, cron=cron, parameters={"config_path": str(Path(config).resolve())}
            )


def _describe_server(record: Any) -> str:
    return (f"{record.ui_url} (API {record.api_url}, pid {record.pid}, Prefect {record.prefect_version}, "
            f"started {record.started_at}; log {record.log})")


def _configured_note() -> str | None:
    from dqrelease.runtime.prefect_server import configured_api_url

    _prefect_environment()
    url = configured_api_url()
    return None if url is None else (
        f"runs use the Prefect API configured in Prefect's settings ({url}); dqrelease starts no server"
    )


@server_app.command("start")
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
    out.print(f"{'started' if started else 'already running'}: Prefect server at {_describe_server(record)}",
              markup=False, highlight=False)


@server_app.command("status")
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
    elif status.state == "stale":
        line = (f"not running: the state file named pid {record.pid}, which is no longer the server dqrelease "
                "started; removed the stale state file (nothing was stopped)")
    else:
        line = f"not running (no server recorded in {state_dir()}); the next `dqrelease run` starts one"
    out.print(line, markup=False, highlight=False)


@server_app.command("stop")
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


if __name__ == "__main__":  # pragma: no cover - `python -m dqrelease.cli`
    main()
