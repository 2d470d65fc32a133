"""The ``dqrelease`` command line.

Commands: ``run CONFIG``, ``plan CONFIG``, ``budget show`` / ``budget set-cap``, ``verify MANIFEST`` and
``serve CONFIG --cron``. Exit codes (see :class:`dqrelease.errors.ExitCode`): 0 success, 1 internal error,
2 invalid config or schema, 3 validation failure, 4 budget refused, 5 verification mismatch, 6 replay refused,
7 nothing to verify.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dqrelease.errors import ExitCode, ReleaseError

EXIT_CODES_HELP = (
    "Exit codes: 0 success, 1 internal error, 2 invalid config or schema, 3 validation failure, 4 budget refused, "
    "5 verification mismatch (a published file or a replay's output differs from the manifest), 6 replay refused "
    "(config, schema, input files, code or package versions differ from the manifest; nothing was read), "
    "7 nothing to verify (an unseeded release cannot be replayed)."
)
app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Differentially private synthetic data releases.",
    epilog=EXIT_CODES_HELP,
)
budget_app = typer.Typer(no_args_is_help=True, help="Inspect and set privacy budgets in the ledger.")
app.add_typer(budget_app, name="budget")
console = Console(stderr=True)
_state = {"debug": False}


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="Print tracebacks of internal errors.")] = False,
) -> None:
    """Differentially private synthetic data releases."""
    _state["debug"] = debug
    if debug:
        os.environ["DQRELEASE_DEBUG"] = "1"

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "GX_ANALYTICS_ENABLED": "false",
}


def _prefect_environment() -> None:
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


def _fail(error: BaseException) -> None:
    if isinstance(error, ReleaseError):
        console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
        failures = getattr(error, "failures", None)
        for failure in failures or []:
            console.print(f"  - {failure.get('expectation')} on {failure.get('column')}", highlight=False)
        raise typer.Exit(int(error.exit_code))
    if _state["debug"]:
        console.print_exception()
    else:
        # the message of an unexpected error could quote a data value: shown only with --debug
        console.print(
            f"[red]internal error:[/red] {type(error).__name__}; rerun with --debug for the traceback", highlight=False
        )
    raise typer.Exit(int(ExitCode.INTERNAL_ERROR))


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
    from dqrelease.config import load_config
    from dqrelease.schema import load_schema

    loaded = load_config(config)
    return loaded, load_schema(loaded.schema_file)


def _run_release(config: Path, *, quiet: bool, dask: str | None = None) -> dict:
    _prefect_environment()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dqrelease import progress
    from dqrelease.flows.release import run_release

    bar = Progress(TextColumn("synthesizing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[status]}"), console=console, disable=quiet)
    handle = {}

    def sink(done: int, total: int, public: dict) -> None:
        if "task" not in handle:
            handle["task"] = bar.add_task("rounds", total=total, status="")
        bar.update(handle["task"], completed=done, status=f"oracle {public['source']} {public['status']}")

    progress.set_sink(sink)
    try:
        with bar:
            return run_release(str(config), dask_address=dask)
    finally:
        progress.clear_sink()


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="Release config (TOML).")],
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    dask: Annotated[
        str | None,
        typer.Option(help="Dask scheduler (tcp://host:8786), or 'local' / 'local:N' for N local worker processes."),
    ] = None,
) -> None:
    """Run a release: ingest, validate, charge the budget, synthesize, publish."""
    with _exit_codes():
        summary = _run_release(config, quiet=quiet, dask=dask)
    out = Console()
    out.print(f"[green]release {summary['run_id']} published[/green]")
    out.print(f"  synthetic table: {summary['release']}  ({', '.join(summary['outputs'])})")
    out.print(f"  INTERNAL error report + audit manifest: {summary['internal']}")
    cost = summary["privacy"][summary["accounting_mode"]]
    mode = summary["accounting_mode"]
    out.print(f"  privacy charged ({mode}): epsilon={cost['epsilon']:.4g}, delta={cost['delta']:.3g}")


@app.command()
def plan(config: Annotated[Path, typer.Argument(help="Release config (TOML).")]) -> None:
    """Show the privacy cost and the mechanism parameters without touching the data."""
    with _exit_codes():
        from dqrelease.discretize import domain_from_schema
        from dqrelease.plan import build_workload, plan_release

        loaded, schema = _load(config)
        domain = domain_from_schema(schema)
        workload = build_workload(loaded.workload, domain)
        if loaded.privacy.n == "noisy":
            from dqrelease.plan import mechanism_budget

            epsilon, delta = mechanism_budget(loaded)
            Console().print(
                f"release [bold]{loaded.name}[/bold]: n is private (add/remove neighbours). The run first charges "
                f"a Laplace count (epsilon={loaded.privacy.n_epsilon}, delta={loaded.privacy.delta / 2:.3g}), then "
                f"plans {loaded.mechanism.name} within epsilon={epsilon}, delta={delta:.3g} using the count's "
                "lower bound; the number of rounds is known only after the count."
            )
            return
        result = plan_release(loaded, n=int(loaded.privacy.n), workload=workload)
    out = Console()
    out.print(f"release [bold]{loaded.name}[/bold]: {domain.n_bits} binary attributes from {len(domain)} columns, "
              f"workload {workload.description} ({len(workload):,} queries)")
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
        out.print(note)


def _ledger(ledger: Path | None, config: Path | None):
    from dqrelease.ledger import Ledger

    if ledger is None and config is None:
        raise typer.BadParameter("give --ledger PATH or --config CONFIG")
    return Ledger(ledger if ledger is not None else _load(config)[0].ledger.path)


@budget_app.command("show")
def budget_show(
    dataset: Annotated[str | None, typer.Argument(help="Dataset id (default: all).")] = None,
    ledger: Annotated[Path | None, typer.Option(help="Ledger DuckDB file.")] = None,
    config: Annotated[Path | None, typer.Option(help="Take the ledger path from this config.")] = None,
) -> None:
    """Show caps, spent and remaining budget, and the charges."""
    with _exit_codes():
        rows = _ledger(ledger, config).show(dataset)
    Console().print_json(json.dumps(rows, default=str))


@budget_app.command("set-cap")
def budget_set_cap(
    dataset: Annotated[str, typer.Argument(help="Dataset id.")],
    epsilon: Annotated[float, typer.Option(help="Cap on the total epsilon.")],
    delta: Annotated[float, typer.Option(help="Cap on the total delta.")],
    rho: Annotated[float | None, typer.Option(help="Optional zCDP cap.")] = None,
    ledger: Annotated[Path | None, typer.Option(help="Ledger DuckDB file.")] = None,
    config: Annotated[Path | None, typer.Option(help="Take the ledger path from this config.")] = None,
) -> None:
    """Create or change a dataset's budget cap."""
    with _exit_codes():
        _ledger(ledger, config).set_cap(dataset, epsilon=epsilon, delta=delta, rho=rho)
    Console().print(f"cap of {dataset}: epsilon={epsilon}, delta={delta}" + (f", rho={rho}" if rho else ""))


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
        from dqrelease.replay import check_published, compare_outputs, prepare_replay, read_manifest

        record = read_manifest(manifest)
        formats = check_published(record, release_dir=release)
        Console().print(f"published files match the manifest: {', '.join(formats)}", markup=False, highlight=False)
        prepare_replay(manifest)  # refuse before Prefect starts; the replay flow checks again before reading
        _prefect_environment()
        from dqrelease.flows.release import replay_release

        summary = replay_release(str(manifest))
        expected = {fmt: output.model_dump() for fmt, output in record.outputs.items()}
        reproduced = compare_outputs(expected, summary["outputs"])
    Console().print(
        f"[green]verified[/green]: {', '.join(reproduced)} reproduced byte for byte by a replay "
        "(nothing charged, nothing published)", highlight=False,
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
        from dqrelease.flows.release import release

        release.serve(
            name=name or loaded.name, cron=cron, parameters={"config_path": str(Path(config).resolve())}
        )


def main() -> None:  # pragma: no cover - console entry point
    """Entry point."""
    sys.exit(app())


if __name__ == "__main__":  # pragma: no cover - `python -m dqrelease.cli`
    main()
