"""``dqrelease budget show`` and ``dqrelease budget set-cap``: the ledger's caps, spending and charges."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dqrelease.cli.app import HelpConventions, _exit_codes, _load, _stdout, budget_app

DEFAULT_LEDGER = Path("dqrelease-out") / "ledger.duckdb"
"""The ledger read without ``--ledger`` or ``--config``: the one the shipped example configs name (``ledger.path``),
relative to the folder the README's commands run in (a test keeps the examples and this path in step)."""

DEFAULT_LEDGER_HELP = f"default: {DEFAULT_LEDGER} in the current folder, if it exists"

LEDGER_FLAGS = "give --ledger PATH, or --config CONFIG to read the ledger that release config names (ledger.path)"


def _ledger_path(ledger: Path | None, config: Path | None) -> Path:
    """The ledger file: ``--ledger``, else the ``ledger.path`` of ``--config``, else :data:`DEFAULT_LEDGER`.

    Raises:
        ConfigInvalidError: Neither flag is given and there is no :data:`DEFAULT_LEDGER` in the current folder.
    """
    from dqrelease.errors import ConfigInvalidError

    if ledger is not None:
        return ledger
    if config is not None:
        return _load(config)[0].ledger.path
    if not DEFAULT_LEDGER.is_file():
        raise ConfigInvalidError(
            f"no ledger at {DEFAULT_LEDGER}, where the examples' releases keep theirs (relative to the current "
            f"folder); {LEDGER_FLAGS}, or run this in the folder you ran `dqrelease run` in"
        )
    return DEFAULT_LEDGER


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


@budget_app.command("show", cls=HelpConventions)
def budget_show(
    dataset: Annotated[str | None, typer.Argument(help="Dataset id (default: all).")] = None,
    ledger: Annotated[
        Path | None, typer.Option(metavar="PATH", help=f"Ledger DuckDB file ({DEFAULT_LEDGER_HELP}).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(metavar="CONFIG", help="Take the ledger path from this config.")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print JSON instead: every charge, amounts as decimal numbers, and under 'exact' each amount's "
            "exact value as the ledger compares it (a fraction).",
        ),
    ] = False,
) -> None:
    """Show each dataset's cap, spent and remaining budget (and its charges when DATASET is given)."""
    from dqrelease.ledger import Ledger

    with _exit_codes():
        path = _ledger_path(ledger, config)
        if not path.is_file():  # showing never creates a ledger
            _missing_ledger(path, from_config=ledger is None)
        store = Ledger(path)
        budgets = store.budgets(dataset)
    if as_json:
        typer.echo(json.dumps([budget.as_dict() for budget in budgets], indent=2, default=str))
        return
    out = _stdout()
    if not budgets:
        which = f"dataset {dataset!r}" if dataset is not None else "any dataset"
        hint = ""
        if dataset is not None:
            from dqrelease.inputs.toml_input import did_you_mean

            hint = did_you_mean(dataset, [budget.dataset_id for budget in store.budgets()])
        out.print(f"ledger {path} has no cap or charge for {which}{hint}", markup=False, highlight=False)
        return
    if ledger is None:  # the path came from the config or the default: say which file this is
        out.print(f"ledger {path}", markup=False, highlight=False)
    out.print(_budget_table(budgets))
    if dataset is not None and budgets[0].charges:
        out.print(_charges_table(budgets[0].charges))
    if any(budget.cap is None for budget in budgets):
        out.print("a dataset without a cap refuses every charge: set one with `dqrelease budget set-cap`",
                  markup=False, highlight=False)


def _missing_ledger(path: Path, *, from_config: bool) -> None:
    """Refuse to show a ledger file that does not exist (exit 2), with the fix.

    Raises:
        ConfigInvalidError: Always.
    """
    from dqrelease.errors import ConfigInvalidError

    if from_config:
        raise ConfigInvalidError(
            f"no ledger at {path} yet: nothing was charged to it (the config's first `dqrelease run` creates it)"
        )
    raise ConfigInvalidError(
        f"no ledger at {path}; check the path (a release's ledger is its config's ledger.path, which --config CONFIG "
        "reads)"
    )


@budget_app.command("set-cap", cls=HelpConventions)
def budget_set_cap(
    dataset: Annotated[str, typer.Argument(help="Dataset id.")],
    epsilon: Annotated[float, typer.Option(help="Cap on the total epsilon.")],
    delta: Annotated[float, typer.Option(help="Cap on the total delta.")],
    rho: Annotated[float | None, typer.Option(help="Optional zCDP cap.")] = None,
    ledger: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help=f"Ledger DuckDB file, created if new ({DEFAULT_LEDGER_HELP})."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(metavar="CONFIG", help="Take the ledger path from this config.")
    ] = None,
) -> None:
    """Create or change a dataset's budget cap (never below what the dataset already spent)."""
    from dqrelease.ledger import Ledger

    with _exit_codes():
        Ledger(_ledger_path(ledger, config)).set_cap(dataset, epsilon=epsilon, delta=delta, rho=rho)
    _stdout().print(
        f"cap of {dataset}: epsilon={epsilon}, delta={delta}" + (f", rho={rho}" if rho is not None else ""),
        markup=False, highlight=False,
    )
