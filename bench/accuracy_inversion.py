"""The accuracy targets' inversion against measurement: the ε `plan` names for a target, and the smallest ε measured
to meet it.

``dqrelease plan`` prints the smallest ε whose *forecast* meets the ``[accuracy]`` targets
(:func:`dqrelease.mechanisms.dispatch.smallest_epsilon`, bisection). This benchmark checks that ε against the
published rows themselves, on Adult as shipped (``examples/adult``: its config, schema, rules and workload, loaded by
``bench/fidelity.py``'s ``adult`` setting), with the release's default mechanism for that config (DualQuery with its
table fit):

1. **Forecast.** For each target (one figure, one value; the other figure relaxed: ``worst_one_way_cell = 1`` for
   a workload target, no ``workload_max`` for a cell target), the config's ``[accuracy]`` set to it and
   :func:`~dqrelease.mechanisms.dispatch.smallest_epsilon` called as ``dqrelease plan`` calls it (the configured
   mechanism keys, :func:`dqrelease.plan.plan_inputs`, ``output.rows or n`` published rows).
2. **Measurement.** On an explicit ε grid (:data:`GRID`, the "ε steps"; docs/decisions.md, "The accuracy targets'
   inversion is checked on an ε grid"), 5 seeds per ε: the release's plan at that ε
   (:func:`dqrelease.plan.plan_release` of the config with ``privacy.epsilon`` replaced: mechanism, parameters and fit
   exactly as ``dqrelease run`` would plan them), run engine-level (no Prefect) on a throw-away ledger grant, and
   ``n`` published rows drawn as ``bench/fidelity.py`` draws them; the figures of those rows by
   ``bench/fidelity.py``'s :func:`published_figures` -- the figures the forecast forecasts (docs/engine.md,
   "Forecast": of the *published rows*, ``r = n`` of them, as ``evaluation/fidelity.py`` defines them).
3. **Comparison.** Per target, the smallest grid ε whose *median* over the seeds meets it, against the forecast's
   ε rounded up to the grid (the smallest grid ε whose forecast meets it, by monotonicity; the forecast at every grid
   ε is recorded to check that), and how many grid steps apart they are (the issue's target: within one).

Commands (the full run takes about 15 minutes on a quiet 2-core machine; hold the benchmark lock)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/accuracy_inversion.py
    .venv/bin/python bench/accuracy_inversion.py --report      # only the Markdown, from the JSON

``--smoke`` runs 2,000 rows of the shipped Adult with tiny mechanism sizes (``bench/fidelity.py``'s smoke keys;
tests/bench/test_accuracy_inversion.py). Every finished run is written to the JSON at once (``"complete": false``
until the end); ``--resume`` keeps the runs of an unfinished JSON with the same grid and data instead of running
them again.

Outputs: ``bench/results/accuracy_inversion.json`` (machine, commit, load average before and after, every run, the
medians and ranges per ε, the comparison per target) and ``accuracy_inversion.md`` (the tables quoted in
docs/benchmarks.md, "Accuracy targets: the inversion against measurement").
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fidelity import (  # noqa: E402
    PUBLISH_SEED_OFFSET,
    SETTINGS,
    Loaded,
    _git_commit,
    mechanism_keys,
    published_figures,
    summarise,
)
from bench.scale_common import machine, save_json_and_markdown, study_grant  # noqa: E402
from dq_engine import make_rng  # noqa: E402
from dq_engine.evaluation.fidelity import FidelityReference, fidelity_reference  # noqa: E402
from dqrelease.inputs.config import AccuracyConfig, ReleaseConfig, load_config  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CONFIG = ROOT / "examples" / "adult" / "release.toml"
SETTING = "adult"
"""``bench/fidelity.py``'s setting: the shipped Adult, its config's workload and rules."""

GRID = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
"""The ε steps (privacy.epsilon): roughly ×2–2.5 apart, covering the forecast's ε of every target of :data:`TARGETS`
with at least one step on either side (docs/decisions.md)."""

SEEDS = (0, 1, 2, 3, 4)

TARGETS = (("worst_one_way_cell", 0.05), ("worst_one_way_cell", 0.02), ("workload_max", 0.1), ("workload_max", 0.05))
"""``[accuracy]`` keys and values: the default cell target and a stricter one, two workload targets; their forecast ε
lie between 0.04 and 0.25 on the shipped Adult, where the forecast still falls with ε (it flattens above ε = 1)."""

MEASURED = {"worst_one_way_cell": "worst_one_way_cell", "workload_max": "workload_max_error"}
"""The ``[accuracy]`` key of each figure and its name in the published rows' figures (evaluation/fidelity.py)."""

MECHANISM_LABEL = "dqrelease (release plan)"
"""The ``mechanism`` of every run row (``bench/fidelity.py``'s summary groups by it)."""


# ---------------------------------------------------------------------- the release's config and plans
def release_config(loaded: Loaded, *, smoke: bool) -> ReleaseConfig:
    """The shipped Adult config; for a smoke run its ``n`` is the slice's and the mechanism's sizes are tiny."""
    config = load_config(CONFIG)
    if not smoke:
        if config.privacy.n != loaded.data.n:
            raise SystemExit(f"{CONFIG.relative_to(ROOT)} declares n = {config.privacy.n} but its source has "
                             f"{loaded.data.n} rows; restore the shipped example")
        return config
    privacy = config.privacy.model_copy(update={"n": loaded.data.n})
    keys = mechanism_keys(config.mechanism.name, loaded, smoke=True)
    return config.model_copy(update={"privacy": privacy, "mechanism": keys})


def at_epsilon(config: ReleaseConfig, epsilon: float) -> ReleaseConfig:
    """``config`` with ``privacy.epsilon = epsilon`` (everything else as configured)."""
    return config.model_copy(update={"privacy": config.privacy.model_copy(update={"epsilon": epsilon})})


def with_target(config: ReleaseConfig, key: str, value: float) -> ReleaseConfig:
    """``config`` whose ``[accuracy]`` asks ``key <= value`` and nothing of the other figure."""
    accuracy = AccuracyConfig(worst_one_way_cell=value) if key == "worst_one_way_cell" else AccuracyConfig(
        worst_one_way_cell=1.0, workload_max=value)
    return config.model_copy(update={"accuracy": accuracy})


def _epsilon_offset(config: ReleaseConfig) -> float:
    """``privacy.epsilon`` minus the mechanism's ε (the noisy count's share; 0 with a declared ``n``)."""
    from dqrelease.plan import mechanism_budget

    mechanism_epsilon, _ = mechanism_budget(config)
    return float(config.privacy.epsilon) - float(mechanism_epsilon)


def forecast_epsilon(config: ReleaseConfig, loaded: Loaded) -> float | None:
    """The smallest ``privacy.epsilon`` whose forecast meets ``config``'s targets, as ``dqrelease plan`` finds it.

    None when no ε up to the search's end meets them.
    """
    from dqrelease.mechanisms.dispatch import smallest_epsilon
    from dqrelease.plan import accuracy_targets, plan_inputs

    inputs = plan_inputs(config, n=loaded.data.n, workload=loaded.workload)
    found = smallest_epsilon(config.mechanism, inputs, accuracy_targets(config),
                             rows=config.output.rows or loaded.data.n)
    return None if found is None else found[0] + _epsilon_offset(config)


def forecast_at(config: ReleaseConfig, loaded: Loaded) -> dict[str, Any]:
    """The release plan's forecast of both figures at ``config``'s ε, and the plan's sizes."""
    from dqrelease.mechanisms.utility import forecast_plan, forecast_shape
    from dqrelease.plan import plan_inputs, plan_release

    n = loaded.data.n
    plan = plan_release(config, n=n, workload=loaded.workload)
    shape = forecast_shape(plan_inputs(config, n=n, workload=loaded.workload), rows=config.output.rows or n)
    predicted = forecast_plan(plan, shape)
    return {
        "worst_one_way_cell": predicted.worst_one_way_cell.value, "workload_max_error": predicted.workload_max.value,
        "label": predicted.label, "rounds": plan.parameters.get("rounds"),
        "fit_rounds": None if plan.fit is None else plan.fit.rounds,
        "charged_epsilon": plan.charged.epsilon,
    }


def measure(config: ReleaseConfig, loaded: Loaded, reference: FidelityReference, seed: int) -> dict[str, Any]:
    """Plan ``config`` as ``dqrelease run`` does, run it engine-level, and the figures of its published rows."""
    from dqrelease.mechanisms import RunInputs, run_mechanism
    from dqrelease.plan import plan_release

    n = loaded.data.n
    load = os.getloadavg()[0]
    plan = plan_release(config, n=n, workload=loaded.workload)
    began = time.perf_counter()
    result = run_mechanism(study_grant(plan), RunInputs(data=loaded.data, workload=loaded.workload,
                                                       rng=make_rng(seed), true_answers=reference.answers))
    seconds = time.perf_counter() - began
    published = result.sample_rows(config.output.rows or n, make_rng(PUBLISH_SEED_OFFSET + seed))
    figures = published_figures(reference, published, loaded.constraints)
    figures.pop("pair_tvd")
    return {
        "setting": SETTING, "mechanism": MECHANISM_LABEL, "epsilon": float(config.privacy.epsilon), "seed": seed,
        "status": "ok", "plan": plan.mechanism + (" + table fit" if plan.fit is not None else ""),
        **figures, "seconds": round(seconds, 2), "load_1min": load, "charged_epsilon": plan.charged.epsilon,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------- the comparison
def smallest_grid_epsilon(values: dict[float, float | None], target: float) -> float | None:
    """The smallest ε of ``values`` (ε -> figure; None: not measured) whose figure is at most ``target``."""
    meeting = [epsilon for epsilon, value in values.items() if value is not None and value <= target]
    return min(meeting) if meeting else None


def grid_ceiling(epsilon: float | None, grid: tuple[float, ...]) -> float | None:
    """The smallest grid ε at or above ``epsilon`` (None beyond the grid's end, or for None)."""
    if epsilon is None:
        return None
    above = [g for g in grid if g >= epsilon * (1 - 1e-9)]
    return min(above) if above else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Comparison:
    """One target: the forecast's ε and the measured one on the grid.

    Attributes:
        key: The ``[accuracy]`` key.
        target: Its value.
        forecast_epsilon: ``plan``'s smallest ``privacy.epsilon`` (None: no ε up to the search's end).
        forecast_grid_epsilon: That ε rounded up to the grid (None beyond the grid).
        forecast_grid_check: The smallest grid ε whose recorded forecast meets the target (equal to the above when
            the forecast falls with ε).
        measured_grid_epsilon: The smallest grid ε whose median measured figure meets the target (None: none does).
        steps: Grid steps from the measured ε to the forecast's (positive: the forecast asks for more ε than was
            needed), or None when either is off the grid.
        within_one_step: ``|steps| <= 1``; None when ``steps`` is None.
        note: Why ``steps`` is None, if it is.
    """

    key: str
    target: float
    forecast_epsilon: float | None
    forecast_grid_epsilon: float | None
    forecast_grid_check: float | None
    measured_grid_epsilon: float | None
    steps: int | None
    within_one_step: bool | None
    note: str = ""


def compare(key: str, target: float, forecast: float | None, forecasts: dict[float, float],
            medians: dict[float, float | None], grid: tuple[float, ...]) -> Comparison:
    """The comparison of one target (``forecasts`` and ``medians``: the figure per grid ε)."""
    forecast_grid = grid_ceiling(forecast, grid)
    measured = smallest_grid_epsilon(medians, target)
    note = ""
    if measured is None:
        unmeasured = [e for e in grid if medians.get(e) is None]
        note = (f"no measured grid epsilon meets it (not measured: {', '.join(f'{e:g}' for e in unmeasured)})"
                if unmeasured else f"no grid epsilon up to {grid[-1]:g} meets it when measured")
    elif forecast is None:
        note = "the forecast meets it at no epsilon up to the search's end"
    elif forecast_grid is None:
        note = f"the forecast's epsilon {forecast:.3g} is beyond the grid's end {grid[-1]:g}"
    elif any(medians.get(e) is None for e in grid if e < measured):
        note = "a smaller grid epsilon was not measured"
    steps = None if note else grid.index(forecast_grid) - grid.index(measured)
    return Comparison(
        key=key, target=target, forecast_epsilon=forecast, forecast_grid_epsilon=forecast_grid,
        forecast_grid_check=smallest_grid_epsilon(forecasts, target), measured_grid_epsilon=measured, steps=steps,
        within_one_step=None if steps is None else abs(steps) <= 1, note=note,
    )


def summary_by_epsilon(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``bench/fidelity.py``'s medians and ranges per ε (key ``f"{ε:g}"``) of the runs."""
    return summarise(runs).get(SETTING, {}).get(MECHANISM_LABEL, {})


def medians_of(summary: dict[str, Any], figure: str, grid: tuple[float, ...]) -> dict[float, float | None]:
    """The median of ``figure`` per grid ε (None where no run finished)."""
    return {epsilon: summary.get(f"{epsilon:g}", {}).get(figure, {}).get("median") for epsilon in grid}


# ---------------------------------------------------------------------- outputs
def _range(spread: dict[str, float] | None) -> str:
    if not spread:
        return "–"
    return f"{spread['median']:.4f} ({spread['min']:.4f}–{spread['max']:.4f})"


def markdown(result: dict[str, Any]) -> str:
    """The per-target comparison and the per-ε table."""
    grid = tuple(result["grid"])
    lines = [
        f"Data: {result['data']}; mechanism: {result['mechanism']}; ε grid {', '.join(f'{e:g}' for e in grid)}; "
        f"seeds {', '.join(map(str, result['seeds']))}; figures of the n published rows.", "",
        "| target | forecast's smallest ε | rounded up to the grid | measured smallest grid ε (median) | grid steps "
        "(forecast − measured) | within one step |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for item in result["targets"]:
        shown = {k: "–" if item[k] is None else f"{item[k]:g}" for k in (
            "forecast_epsilon", "forecast_grid_epsilon", "measured_grid_epsilon")}
        steps = item["note"] if item["steps"] is None else f"{item['steps']:+d}"
        within = "–" if item["within_one_step"] is None else ("yes" if item["within_one_step"] else "**no**")
        lines.append(f"| {item['key']} ≤ {item['target']:g} | {shown['forecast_epsilon']} | "
                     f"{shown['forecast_grid_epsilon']} | {shown['measured_grid_epsilon']} | {steps} | {within} |")
    lines += [
        "", "| ε | DualQuery T / fit T | worst 1-way cell: forecast | measured median (range) | workload max: forecast "
        "| measured median (range) | runs | wall s, median |",
        "|---:|---|---:|---|---:|---|---:|---:|",
    ]
    for epsilon in grid:
        forecast = result["forecast_by_epsilon"][f"{epsilon:g}"]
        entry = result["measured_by_epsilon"].get(f"{epsilon:g}", {})
        seconds = entry.get("seconds")
        runs = entry.get("worst_one_way_cell", {}).get("runs", 0)
        lines.append(
            f"| {epsilon:g} | {forecast['rounds']} / {forecast['fit_rounds']} | "
            f"{forecast['worst_one_way_cell']:.4f} | {_range(entry.get('worst_one_way_cell'))} | "
            f"{forecast['workload_max_error']:.4f} | {_range(entry.get('workload_max_error'))} | {runs} | "
            f"{'–' if not seconds else format(seconds['median'], '.0f')} |"
        )
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: Path) -> None:
    """The JSON and, beside it, the Markdown."""
    save_json_and_markdown(out, result, markdown(result), default=str)


def comparisons(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparison of every target of ``result`` from its forecasts and runs."""
    grid = tuple(result["grid"])
    summary = summary_by_epsilon(result["runs"])
    out = []
    for item in result["forecast_by_target"]:
        figure = MEASURED[item["key"]]
        forecasts = {e: result["forecast_by_epsilon"][f"{e:g}"][figure] for e in grid}
        out.append(dataclasses.asdict(compare(item["key"], item["target"], item["forecast_epsilon"], forecasts,
                                              medians_of(summary, figure, grid), grid)))
    return out


def finish(result: dict[str, Any], out: Path) -> None:
    """Recompute the summaries of ``result`` and write it."""
    result["measured_by_epsilon"] = summary_by_epsilon(result["runs"])
    result["targets"] = comparisons(result)
    write(result, out)


# ---------------------------------------------------------------------- command line
def _targets(values: list[str] | None) -> tuple[tuple[str, float], ...]:
    if not values:
        return TARGETS
    parsed = []
    for value in values:
        key, _, number = value.partition("=")
        if key not in MEASURED or not number:
            raise SystemExit(f"--targets {value!r}: write KEY=VALUE with KEY one of {', '.join(MEASURED)}")
        parsed.append((key, float(number)))
    return tuple(parsed)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", nargs="+", type=float, default=list(GRID), help="the ε steps (privacy.epsilon)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    default_targets = " ".join(f"{key}={value:g}" for key, value in TARGETS)
    parser.add_argument("--targets", nargs="+", metavar="KEY=VALUE",
                        help=f"[accuracy] targets, one figure each (default: {default_targets})")
    parser.add_argument("--smoke", action="store_true", help="2,000 rows of the shipped Adult, tiny mechanism sizes")
    parser.add_argument("--out", type=Path, default=RESULTS / "accuracy_inversion.json")
    parser.add_argument("--resume", action="store_true", help="keep the runs of an unfinished JSON at --out")
    parser.add_argument("--report", action="store_true", help="only write the Markdown from the JSON at --out")
    args = parser.parse_args(argv)
    if args.report:
        write(json.loads(args.out.read_text()), args.out)
        return 0
    grid = tuple(sorted(set(args.grid)))
    if min(grid) <= 0:
        raise SystemExit("--grid: every ε must be positive")
    targets = _targets(args.targets)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    environment = machine()  # its load_average_start is the load before the run

    loaded = SETTINGS[SETTING].load(args.smoke)
    config = release_config(loaded, smoke=args.smoke)
    reference = fidelity_reference(loaded.data, workload=loaded.workload)
    print(f"{loaded.description}: n = {loaded.data.n:,}, {len(loaded.data.domain)} columns, {len(loaded.workload):,} "
          f"queries; grid {', '.join(f'{e:g}' for e in grid)}; seeds {args.seeds}", flush=True)

    by_epsilon = {f"{e:g}": forecast_at(at_epsilon(config, e), loaded) for e in grid}
    by_target = []
    for key, value in targets:
        began = time.perf_counter()
        found = forecast_epsilon(with_target(config, key, value), loaded)
        by_target.append({"key": key, "target": value, "forecast_epsilon": found,
                          "search_seconds": round(time.perf_counter() - began, 1)})
        print(f"forecast: {key} <= {value:g} from privacy.epsilon = {found if found is None else f'{found:.3g}'}",
              flush=True)

    previous = json.loads(args.out.read_text()) if args.resume and args.out.exists() else None
    kept = []
    if previous and previous["grid"] == list(grid) and previous["smoke"] == args.smoke:
        kept = [run for run in previous["runs"] if run["epsilon"] in grid and run["seed"] in args.seeds]
    result = {
        "description": __doc__.splitlines()[0],
        "command": " ".join([".venv/bin/python", "bench/accuracy_inversion.py", *(argv or sys.argv[1:])]),
        "smoke": args.smoke, "git_commit": _git_commit(), "started": started, "machine": environment,
        "data": loaded.description + (" (smoke: a 2,000-row slice, tiny sizes)" if args.smoke else ""),
        "mechanism": f"{config.mechanism.name} with its default keys as the config gives them "
                     f"({by_epsilon[f'{grid[-1]:g}']['label']})",
        "figures": "of the n published rows (result.sample_rows), evaluated by bench/fidelity.py's published_figures",
        "grid": list(grid), "seeds": list(args.seeds), "forecast_by_epsilon": by_epsilon,
        "forecast_by_target": by_target, "runs": kept, "complete": False,
    }
    done = {(run["epsilon"], run["seed"]) for run in kept}
    for epsilon in grid:  # smallest first: the cheap runs finish first
        for seed in args.seeds:
            if (epsilon, seed) in done:
                continue
            run = measure(at_epsilon(config, epsilon), loaded, reference, seed)
            result["runs"].append(run)
            print(f"eps={epsilon:<6g} seed={seed} worst 1-way cell {run['worst_one_way_cell']:.4f} workload max "
                  f"{run['workload_max_error']:.4f} {run['seconds']:.0f} s load {run['load_1min']:.1f}", flush=True)
            finish(result, args.out)
    result["complete"] = True
    result["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    result["load_average_end"] = os.getloadavg()
    finish(result, args.out)
    for item in result["targets"]:
        steps = item["note"] if item["steps"] is None else f"{item['steps']:+d} steps"
        print(f"{item['key']} <= {item['target']:g}: forecast {item['forecast_grid_epsilon']}, measured "
              f"{item['measured_grid_epsilon']}: {steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
