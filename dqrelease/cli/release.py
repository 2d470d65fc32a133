"""The release commands: ``run``, ``plan``, ``verify`` and ``serve``.

A config, schema, plan or manifest is checked before Prefect is imported, so a refusal costs seconds; the
side process imports Great Expectations and matplotlib meanwhile (:data:`SIDE_PROCESS_WARM_UP`). With ``n`` public
``run`` also refuses a plan whose cost the ledger cannot pay, or whose forecast misses the accuracy targets, before
Prefect starts and before any data is read. What ``run`` shows meanwhile: :mod:`dqrelease.cli.live`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from dqrelease.cli.app import (
    EXIT_CODES_HELP,
    HelpConventions,
    _exit_codes,
    _load,
    _prefect_environment,
    _state,
    _stdout,
    app,
    check_cron,
    console,
    quiet_resource_tracker,
)
from dqrelease.cli.plan_view import plan_console, print_forecast, print_key_values, shown_value

if TYPE_CHECKING:
    from dqrelease.cli.live import RunView

SIDE_PROCESS_WARM_UP = ("dqrelease.expectations.engine:warm_up",)
"""What the side process imports while a run starts: Great Expectations and its context (validation waits for it)."""

SIDE_PROCESS_WHEN_IDLE = ("dqrelease.outputs.report:warm_up",)
"""What it imports once first idle (after the raw table's validation): matplotlib's backend, for the report."""


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


def _check_before_run(
    config: Path,
    dask: str | None,
    *,
    dask_insecure: bool = False,
    accept_low_utility: bool = False,
    seeded_test_or_audit: bool = False,
) -> tuple[Any, Any, Any]:
    """Refuse a missing or invalid config, schema, source path, plan or Dask access before Prefect starts.

    A plan whose memory forecast exceeds ``run.memory_limit_gib`` is refused (exit 2, nothing read or charged), and
    so is one whose utility forecast is no better than publishing zeros or uniform data, or misses the ``[accuracy]``
    targets (exit 2, nothing read or charged) unless ``accept_low_utility``, and so is a seeded
    config unless ``seeded_test_or_audit``, or one whose seed the ledger already charged. With ``n`` public the
    plan's cost must fit the ledger's remaining budget (exit 4, nothing read or charged; the run charges it after
    the validation, as before). A Dask address is checked by :meth:`~dqrelease.runtime.cluster.DaskAccess.check`
    (plain TCP to another machine only with ``dask_insecure``, TLS files present, the ``dask`` extra installed).

    Returns:
        The release config, its schema and its plan (None when ``n`` is a noisy count).
    """
    loaded, schema = _load(config)
    from dqrelease.ledger.seeds import SEEDED_FLAG, check_seeded_release

    check_seeded_release(loaded, test_or_audit=seeded_test_or_audit, fix=f"give {SEEDED_FLAG}")
    from dqrelease.inputs.ingest import check_source_files  # imports DuckDB and Arrow: only for a valid config

    check_source_files(loaded.source)
    _, workload, planned = _plan_public(loaded, schema)
    if planned is not None:
        from dqrelease.plan import check_release_memory

        check_release_memory(loaded, planned, n=int(loaded.privacy.n), workload=workload)
    if planned is not None and not accept_low_utility:
        from dqrelease.plan import check_release_utility

        check_release_utility(loaded, planned, n=int(loaded.privacy.n), workload=workload)
    if planned is not None:
        from dqrelease.ledger.budget_check import check_budget

        check_budget(loaded, planned)
    access = loaded.run.dask_access(dask, insecure=dask_insecure)
    if access is not None:
        access.check()
    return loaded, schema, planned


def _plan_line(loaded: Any, planned: Any) -> str:
    """The run's first lasting line: the privacy cost, the accounting, the mechanism and its rounds (all public)."""
    from dqrelease.plan import mechanism_budget
    from dqrelease.runtime.progress import RoundStages

    if planned is None:
        epsilon, delta = mechanism_budget(loaded)
        budget = "" if epsilon is None else f"epsilon={epsilon:.4g}, "
        return (f"plan: release {loaded.name}: n is private, so a noisy count (epsilon={loaded.privacy.n_epsilon:.4g}) "
                f"comes first, then {loaded.mechanism.name} within {budget}delta={delta:.3g} "
                f"({loaded.privacy.accounting} accounting); its rounds are planned after the count")
    cost = planned.charged
    return (f"plan: release {loaded.name}: {planned.mechanism}, epsilon={cost.epsilon:.4g}, delta={cost.delta:.3g} "
            f"({planned.mode} accounting), {RoundStages.of(planned).describe()}")

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


WORKER_CONSOLE_LEVEL = ("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
"""Prefect's setting of its terminal handler's level (``logging.yml``), set for the processes a run starts (local Dask
workers): their task-run INFO lines stay in the Prefect server (its API handler keeps every level)."""

DASK_NOISE = (
    # the client warns when a task's arguments (the private dataset) make a large graph: expected, not actionable
    ("warning", r"Sending large graph of size"),
    # the nanny logs at WARNING when it kills a local worker that has not exited within its timeout at shutdown
    ("logger", "distributed.nanny"),
)
"""What a Dask run would print that says nothing to the operator (an error is still shown: loggers keep ERROR)."""


@contextmanager
def _quiet_prefect_console() -> Iterator[None]:
    """Keep Prefect's run logs and Dask's routine warnings off the terminal (not with --debug or ``run --verbose``).

    Prefect's terminal handler is filtered with :class:`_QuietConsole`; processes the run starts (local Dask
    workers) get :data:`WORKER_CONSOLE_LEVEL`; :data:`DASK_NOISE` is silenced. Call it after importing the flow:
    ``prefect.main`` configures logging when it is imported.
    """
    if _state["debug"] or _state["verbose"]:
        yield
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    with ExitStack() as stack:
        name, level = WORKER_CONSOLE_LEVEL
        if name not in os.environ:
            os.environ[name] = level
            stack.callback(os.environ.pop, name, None)
        stack.enter_context(warnings.catch_warnings())
        for kind, what in DASK_NOISE:
            if kind == "warning":
                warnings.filterwarnings("ignore", message=what, category=UserWarning)
            else:
                logger = logging.getLogger(what)
                stack.callback(logger.setLevel, logger.level)
                logger.setLevel(logging.ERROR)
        stack.enter_context(_filtered_prefect_console(PrefectConsoleHandler))
        yield


@contextmanager
def _filtered_prefect_console(handler_class: type) -> Iterator[None]:
    """Filter every Prefect terminal handler (``handler_class``) with :class:`_QuietConsole` inside the block."""
    quiet = _QuietConsole()
    # Prefect's background services log "Still processing items: N items remaining..." while they drain at exit,
    # after this context has ended (their loggers are named after the class): only their errors are shown
    for service in PREFECT_SERVICE_LOGGERS:
        logging.getLogger(service).setLevel(logging.ERROR)
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in ("uvicorn", "fastapi"))]
    handlers = {h for lg in loggers for h in lg.handlers if isinstance(h, handler_class)}
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def _run_release(
    config: Path,
    *,
    view: RunView,
    dask: str | None = None,
    dask_insecure: bool = False,
    accept_low_utility: bool = False,
    seeded: bool = False,
) -> dict:
    """Start Prefect (the ``start`` stage), then run the release flow while ``view`` shows its stages."""
    from dqrelease.cli.server import started_server_notice
    from dqrelease.runtime import progress
    from dqrelease.runtime.prefect_server import prefect_api

    _prefect_environment()
    with view.showing(), ExitStack() as stack:
        # ends when the flow's first stage starts: Prefect's imports, its server, the flow run and its planning
        progress.emit(progress.StageEvent(stage="start", state="started"))
        api = prefect_api()  # a server started here starts while the flow's imports run
        if api.source == "started":
            view.notice(started_server_notice(api.record), style="yellow", quiet_too=True)
        from dqrelease.flows.release import run_release

        stack.enter_context(api.connected())
        stack.enter_context(_quiet_prefect_console())
        return run_release(
            str(config), dask_address=dask, dask_insecure=dask_insecure, accept_low_utility=accept_low_utility,
            seeded_test_or_audit=seeded,
        )


@app.command(cls=HelpConventions)
def run(
    config: Annotated[Path, typer.Argument(metavar="CONFIG", help="Release config (TOML).")],
    quiet: Annotated[
        bool, typer.Option("--quiet", help="No plan line and no progress (a refusal or the result is still printed).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Also print Prefect's run logs (task states, rounds) on stderr.")
    ] = False,
    dask: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Dask scheduler (tls://host:8786 with the config's [run.dask_tls] certificates, tcp:// on this "
            "machine), or 'local' / 'local:N' for N local worker processes. Needs the dask extra: "
            "pip install -e \".[dask]\".",
        ),
    ] = None,
    dask_insecure: Annotated[
        bool,
        typer.Option(
            "--dask-insecure",
            help="Allow a plain tcp:// Dask scheduler on another machine (run.dask_insecure = true in the config): "
            "the private data and the generator's key travel unencrypted. Without it such an address is refused "
            "(exit 2) before anything is read; use tls:// instead.",
        ),
    ] = False,
    accept_low_utility: Annotated[
        bool,
        typer.Option(
            "--accept-low-utility",
            help="Publish even when the utility forecast misses the config's [accuracy] targets or is no better than "
            "publishing zeros or uniform data (`dqrelease plan` shows it; without this flag such a release is "
            "refused before anything is read).",
        ),
    ] = False,
    seeded_test_or_audit: Annotated[
        bool,
        typer.Option(
            "--seeded-test-or-audit",
            help="Allow a seeded config (run.seed_mode = 'seeded') because this run is a test or an audit: anyone "
            "holding the seed can reproduce its noise, so never for production. Without this flag a seeded config "
            "is refused (exit 2) before anything is read; with it a warning is printed. A seed is charged once per "
            "dataset (the ledger refuses it for a second run).",
        ),
    ] = False,
) -> None:
    """Run a release: ingest, validate, charge the budget, synthesize, publish.

    Shows the plan, then one line or bar per stage (:mod:`dqrelease.cli.live`).
    """
    _state["verbose"] = verbose
    from dqrelease.cli.live import run_view

    view = run_view(console, quiet=quiet)
    with _exit_codes(), ExitStack() as stack:
        with view.checking(config):
            from dqrelease.runtime import side_process

            # Great Expectations and matplotlib are imported in the side process, on the other core, while this one
            # checks the config and starts the run (a refusal kills it at once)
            quiet_resource_tracker()
            stack.enter_context(side_process.running(SIDE_PROCESS_WARM_UP, when_idle=SIDE_PROCESS_WHEN_IDLE))
            loaded, schema, planned = _check_before_run(
                config, dask, dask_insecure=dask_insecure, accept_low_utility=accept_low_utility,
                seeded_test_or_audit=seeded_test_or_audit,
            )
        view.notice(_plan_line(loaded, planned), style="bold")
        from dqrelease.expectations.validate import prepare_raw_suite

        prepare_raw_suite(schema)  # built in the side process right after its imports, before the data is read
        summary = _run_release(
            config, view=view, dask=dask, dask_insecure=dask_insecure, accept_low_utility=accept_low_utility,
            seeded=seeded_test_or_audit,
        )
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
    if loaded.run.seed_mode == "seeded":  # with the release, so that a refusal stays one line
        from dqrelease.ledger.seeds import SEEDED_WARNING

        console.print(Text.assemble(("warning: ", "yellow"), SEEDED_WARNING.removeprefix("warning: ")),
                      highlight=False)


@app.command(cls=HelpConventions)
def plan(config: Annotated[Path, typer.Argument(help="Release config (TOML).")]) -> None:
    """Show the privacy cost, the mechanism parameters, the forecasts of utility, time and memory, without the data.

    A plan whose memory forecast exceeds ``run.memory_limit_gib`` is refused (exit 2), as ``run`` refuses it.
    """
    with _exit_codes():
        loaded, schema = _load(config)
        domain, workload, result = _plan_public(loaded, schema)
        if result is not None:  # refused as `run` refuses it, before anything is printed
            from dqrelease.plan import check_release_memory

            memory = check_release_memory(loaded, result, n=int(loaded.privacy.n), workload=workload)
    out = plan_console()
    if result is None:
        from dqrelease.plan import mechanism_budget

        epsilon, delta = mechanism_budget(loaded)
        out.print(
            f"release {loaded.name}: n is private (add/remove neighbours). The run first charges "
            f"a Laplace count (epsilon={loaded.privacy.n_epsilon}, delta={loaded.privacy.delta / 2:.3g}), then "
            f"plans {loaded.mechanism.name} within epsilon={epsilon}, delta={delta:.3g} using the count's "
            "lower bound; the number of rounds, the utility forecast and the time estimate are known only after the "
            "count (a release forecast to be no better than zeros or uniform is refused then, before its own charge, "
            "unless --accept-low-utility).", markup=False,
        )
        return
    from dqrelease.memory_estimate import memory_limit
    from dqrelease.time_estimate import estimate_release_time

    n = int(loaded.privacy.n)
    out.print(f"release {loaded.name}: {domain.n_bits} binary attributes from {len(domain)} columns, n = {n:,} "
              "(public)", markup=False)
    print_key_values(out, [("workload", f"{workload.description} ({len(workload):,} queries)")])
    out.print()
    out.print(f"mechanism {result.mechanism}: parameters", markup=False)
    print_key_values(out, [(key, shown_value(value)) for key, value in result.parameters.items()])
    out.print()
    out.print("privacy cost", markup=False)
    costs = Table("accounting", "epsilon", "delta", "rho", "analysis")
    costs.columns[-1].overflow = "fold"
    for mode, cost in result.costs.items():
        marker = " (charged)" if mode == result.mode else ""
        costs.add_row(mode + marker, f"{cost.epsilon:.5g}", f"{cost.delta:.3g}",
                      "" if cost.rho is None else f"{cost.rho:.5g}", Text(cost.method))
    out.print(costs)
    for note in result.notes:
        out.print(note, markup=False)
    estimate = estimate_release_time(result, n=n, columns=len(domain), queries=len(workload))
    out.print()
    limit = memory_limit(loaded.run.memory_limit_gib)
    print_key_values(out, [
        ("time estimate", f"{estimate.shown()} for `dqrelease run` ({estimate.basis})"),
        ("memory", f"{memory.shown()} at the peak; limit {limit.shown()}; the model and its measured peaks: "
                   "docs/benchmarks.md, 'Memory forecast'"),
    ])
    out.print()
    print_forecast(out, loaded, result, workload)


VERIFY_HELP = (
    "Check a release against its audit manifest: the published files, then its provenance or a byte-for-byte "
    "replay.\n\n"
    "An unseeded release (the default, run.seed_mode = 'secure') is verified by its hashes and provenance: the "
    "published files and release.json match the manifest, and the ledger holds the charges the manifest records "
    "(exit 0). A seeded release is also replayed with its recorded seed. Before it reads any data the replay "
    "checks that the config, schema, input files, code and package versions are the ones the manifest recorded, and "
    "that the config's ledger holds the release's charge (run id, mechanism, accounting mode, config hash, cost), "
    "and refuses otherwise (exit 6, naming what differs, a changed config by its keys). It charges nothing, the "
    "noisy count included, and publishes nothing. A published file, a charge or a replayed output that differs "
    "from the manifest is exit 5."
)


@app.command(cls=HelpConventions, help=VERIFY_HELP, epilog=EXIT_CODES_HELP)
def verify(
    manifest: Annotated[Path, typer.Argument(help="internal/<run_id>/manifest.json of the release.")],
    release: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Published release directory (default: <output.directory>/releases/<run_id>)."
        ),
    ] = None,
) -> None:
    """Check a release against its manifest: published files, then its charges or an uncharged replay (VERIFY_HELP)."""
    with _exit_codes():
        from dqrelease.ledger.grants import replay_charges
        from dqrelease.outputs.replay import check_published, compare_outputs, prepare_replay, read_manifest

        record = read_manifest(manifest)
        formats = check_published(record, release_dir=release)
        _stdout().print(f"published files match the manifest: {', '.join(formats)}", markup=False, highlight=False)
        if not record.seeded:
            _verified_unseeded(record)
            return
        replay_charges(prepare_replay(manifest))  # refuse before Prefect starts; the replay flow checks again
        from dqrelease.runtime import side_process
        from dqrelease.runtime.prefect_server import prefect_api

        # as for `run`: slow imports beside the replay's start
        quiet_resource_tracker()
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


SERVE_HELP = (
    "Serve a Prefect deployment that runs the release on a cron schedule (blocks; Ctrl-C stops and pauses the "
    "schedule).\n\n"
    "One release of a dataset at a time: a run due while the previous one runs waits (Prefect's deployment "
    "concurrency limit, and a global concurrency limit per ledger.dataset_id), and a missed run is caught up only if "
    "it is the latest one due; older ones are skipped (Cancelled, nothing read or charged). Scheduled releases are "
    "production releases: a seeded config is refused (exit 2)."
)


def _serving_lines(*, flow: str, deployment: str, api_url: str, cron: str, dataset_id: str) -> list[str]:
    """What ``serve`` prints once its deployment is registered: the commands that work against its server.

    Each carries ``PREFECT_API_URL``: a bare ``prefect`` command would start a temporary server of its own on the
    same database (``sqlite3.OperationalError: database is locked``).
    """
    from dqrelease.runtime.schedules import dataset_limit_name

    deployment = f"{flow}/{deployment}"
    return [
        f"serving deployment '{deployment}' on the Prefect server at {api_url.removesuffix('/api')} "
        f"(cron '{cron}'; one release of dataset '{dataset_id}' at a time: "
        f"concurrency limit '{dataset_limit_name(dataset_id)}')",
        "  run it now, from another shell:",
        f"    PREFECT_API_URL={api_url} prefect deployment run '{deployment}'",
        "  its runs, and the limit:",
        f"    PREFECT_API_URL={api_url} prefect flow-run ls --flow-name {flow}",
        f"    PREFECT_API_URL={api_url} prefect gcl inspect {dataset_limit_name(dataset_id)}",
        "  Ctrl-C stops serving and pauses the schedule (runs missed meanwhile are not made up).",
    ]


def _verified_unseeded(record: Any) -> None:
    """What ``verify`` checks of an unseeded release (its files and charges) and says it verified (exit 0)."""
    from dqrelease.ledger.grants import check_recorded_charges
    from dqrelease.ledger.seeds import SEEDED_FLAG

    charges = check_recorded_charges(record)
    out = _stdout()
    out.print(f"ledger charges that paid for run {record.run_id} match the manifest: {', '.join(charges)}",
              markup=False, highlight=False)
    out.print(Text.assemble(
        ("verified", "green"),
        f": release {record.release} (run {record.run_id}) is unseeded, so its hashes and provenance were checked; "
        f"a byte-for-byte replay needs a seeded release (run.seed_mode = 'seeded', `dqrelease run {SEEDED_FLAG}`)",
    ), highlight=False)


@app.command(cls=HelpConventions, help=SERVE_HELP)
def serve(
    config: Annotated[Path, typer.Argument(help="Release config (TOML).")],
    cron: Annotated[str, typer.Option(help="Cron schedule, e.g. '0 6 1 * *' (06:00 on the 1st).")],
    name: Annotated[str | None, typer.Option(help="Deployment name (default: the release name).")] = None,
) -> None:
    """Serve a Prefect deployment that runs the release on a cron schedule (see SERVE_HELP)."""
    with _exit_codes():
        check_cron(cron)
        loaded, _ = _load(config)
        from dqrelease.ledger.seeds import refuse_seeded

        refuse_seeded(loaded, fix="`dqrelease serve` schedules production releases only: set run.seed_mode = "
                                  "'secure' and remove run.seed (run a test or an audit once with `dqrelease run "
                                  "--seeded-test-or-audit`)")
        _prefect_environment()
        from dqrelease.runtime.prefect_server import prefect_api, shared_api

        api = prefect_api()
        import asyncio

        from prefect.deployments.runner import EntrypointType
        from prefect.exceptions import TerminationSignal
        from prefect.runner import Runner

        from dqrelease.flows.release import release
        from dqrelease.runtime.schedules import deployment_limit, ensure_dataset_limit

        # the deployment and its runs live in the same server as `dqrelease run`'s; shared_api names its URL (and
        # starts Prefect's temporary server when DQRELEASE_PREFECT_SERVER=ephemeral)
        with api.connected(), shared_api(api.url) as url:
            deployment = name or loaded.name
            ensure_dataset_limit(loaded.ledger.dataset_id)
            runner = Runner(name=deployment, pause_on_shutdown=True)
            runner.add_flow(
                release, name=deployment, cron=cron, parameters={"config_path": str(Path(config).resolve())},
                concurrency_limit=deployment_limit(), entrypoint_type=EntrypointType.MODULE_PATH,
            )
            lines = _serving_lines(flow=release.name, deployment=deployment, api_url=url, cron=cron,
                                   dataset_id=loaded.ledger.dataset_id)
            _stdout().print("\n".join(lines), markup=False, highlight=False)
            with contextlib.suppress(KeyboardInterrupt, TerminationSignal):
                asyncio.run(runner.start())
