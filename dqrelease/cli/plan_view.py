"""What ``dqrelease plan`` prints besides its parameters: the console, key/value rows, the forecast and the targets.

Kept apart from :mod:`dqrelease.cli.release` (which registers the ``plan`` command) so that each module stays small;
nothing here reads data or imports Prefect.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["PLAN_WIDTH", "plan_console", "print_forecast", "print_key_values", "print_targets", "shown_value"]

PLAN_WIDTH = 120
"""Widest line of ``dqrelease plan``: the terminal's width when narrower, else 120 (also in a pipe or a log)."""


def plan_console() -> Console:
    """A console that wraps ``plan``'s text on word boundaries within :data:`PLAN_WIDTH` columns."""
    probe = Console()
    width = probe.width if probe.is_terminal or os.environ.get("COLUMNS") else PLAN_WIDTH
    return Console(width=min(width, PLAN_WIDTH), soft_wrap=False, highlight=False)


def print_key_values(out: Console, rows: list[tuple[str, str]]) -> None:
    """Print key / value rows without borders; long values wrap on word boundaries, lines carry no trailing blanks."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(Text(key), Text(value))
    with out.capture() as captured:
        out.print(table)
    out.print(Text("\n".join(line.rstrip() for line in captured.get().splitlines())))


def shown_value(value: Any) -> str:
    """A plan parameter as text: a group of keys as ``key = value`` pairs; floats to 6 significant digits."""
    if isinstance(value, dict):
        return ", ".join(f"{key} = {shown_value(item) if isinstance(item, float) else json.dumps(item)}"
                         for key, item in value.items())
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def print_forecast(out: Console, loaded: Any, result: Any, workload: Any) -> None:
    """The utility forecast next to the baselines', and a warning (with a passing choice) when it is no better."""
    from dqrelease.mechanisms.dispatch import recommendation
    from dqrelease.mechanisms.utility import ACCEPT_FLAG, assess_plan, forecast_shape
    from dqrelease.plan import mechanism_budget, plan_inputs

    n = int(loaded.privacy.n)
    inputs = plan_inputs(loaded, n=n, workload=workload)
    shape = forecast_shape(inputs, rows=loaded.output.rows or n)
    verdict = assess_plan(result, shape)
    if verdict is None:
        out.print(f"forecast: no model for {result.mechanism}; its utility is not checked", markup=False,
                  highlight=False)
        return
    table = Table("forecast (public quantities only)", "worst one-way cell", "workload max", "source")
    for row in (verdict.forecast, *verdict.baselines):
        cells = row.worst_one_way_cell, row.workload_max
        table.add_row(row.label, *(cell.shown() for cell in cells),
                      " / ".join(dict.fromkeys(cell.source for cell in cells)))
    out.print(table)
    out.print("theory: closed form of the mechanism's noise; calibrated: noise formula x constants fitted on "
              "benchmark runs; bound: a public lower bound (docs/engine.md, 'Forecast')", markup=False,
              highlight=False)
    out.print(error_bars(verdict.forecast), markup=False, highlight=False)
    for note in verdict.notes:
        out.print(Text.assemble(("note: ", "yellow"), f"{note}; mechanism.name = 'independent' (or 'auto', which "
                                "chooses them then) publishes them"), highlight=False)
    epsilon, _ = mechanism_budget(loaded)
    offset = 0.0 if epsilon is None else loaded.privacy.epsilon - epsilon
    if verdict.passes:
        print_targets(out, loaded, inputs, verdict.forecast, offset)
        return
    out.print(Text.assemble(
        ("warning: ", "yellow"),
        f"low utility: {'; '.join(verdict.failures)}. `dqrelease run` refuses this release unless {ACCEPT_FLAG} "
        f"is given; use {recommendation(inputs, epsilon_offset=offset)}",
    ), highlight=False)


def error_bars(forecast: Any) -> str:
    """One line: where the release's figures fell on the benchmark tables for such a forecast, or that it is unknown."""
    figures = {"worst one-way cell": forecast.worst_one_way_cell, "workload max": forecast.workload_max}
    ranges = {name: figure.expected_range() for name, figure in figures.items()}
    shown = [f"{name} {low:.3g} to {high:.3g}" for name, bounds in ranges.items() if bounds for low, high in [bounds]]
    if not shown:
        return (f"error bars: none measured for {forecast.label}'s forecast out of sample; docs/benchmarks.md "
                "('Forecast', 'Small tables') says how close such forecasts came")
    low, high = next(f.ratios for f in figures.values() if f.ratios)
    return (f"error bars: on the benchmark tables such forecasts were {low:g} to {high:g} times the measured median "
            f"(docs/benchmarks.md, 'Forecast'), so expect {'; '.join(shown)}; tables unlike them can fall outside")


def print_targets(out: Console, loaded: Any, inputs: Any, forecast: Any, offset: float) -> None:
    """The accuracy targets, whether the forecast meets them, and the smallest epsilon that does (mechanism, auto)."""
    from dqrelease.mechanisms.auto import AutoKeys
    from dqrelease.mechanisms.dispatch import smallest_epsilon
    from dqrelease.mechanisms.utility import ACCEPT_FLAG
    from dqrelease.plan import accuracy_targets

    targets = accuracy_targets(loaded)
    rows = loaded.output.rows or inputs.public.n
    misses = targets.misses(forecast)
    lines = [f"accuracy targets ([accuracy]): {targets.shown()}: "
             + ("met by the forecast" if not misses else "missed: " + "; ".join(misses))]
    for label, keys in ((loaded.mechanism.name, loaded.mechanism), ("auto", AutoKeys())):
        if label == "auto" and loaded.mechanism.name == "auto":
            continue
        found = smallest_epsilon(keys, inputs, targets, rows=rows)
        if found is None:
            lines.append(f"  {label}: no privacy.epsilon up to 64 meets them")
        else:
            chosen = "" if found[1].mechanism == label else f" (it chooses {found[1].mechanism})"
            lines.append(f"  {label}{chosen}: the smallest privacy.epsilon that meets them is {found[0] + offset:.3g}")
    if misses:
        lines.append(f"`dqrelease run` refuses this release unless {ACCEPT_FLAG} is given")
    out.print("\n".join(lines), markup=False, highlight=False)
