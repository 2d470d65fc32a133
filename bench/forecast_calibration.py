"""Calibration runs of the utility forecast (dq_engine/evaluation/forecast.py): measured against forecast, on public
shapes.

One command (about 20 minutes on 2 cores; each run is one mechanism at one epsilon, one seed):

    .venv/bin/python bench/forecast_calibration.py [--only SHAPE ...]

Shapes: the shipped Adult example (examples/adult: its schema and its data, 48,842 rows x 15 columns), a public
5,000-row subsample of it, the private-pgm Adult encoding (14 columns), KDD99 (bench/engine_data.py's encoding,
42 columns, 494,021 rows) and a "German credit"-like synthetic table (1,000 rows, 21 columns of German credit's
sizes, each column correlated with the previous one). Workload: the release default (all 1-way and 2-way
marginals, 64 random 3-way ones). Mechanisms through the registry with their default keys at delta = 1e-9:
MWEM on particles, DualQuery with its table fit (the default) and DualQuery's raw records (fit disabled; on the
German shape also with s = 300, the issue's case).

For every run the published rows (n of them, drawn from the synthetic distribution as the release does) are
evaluated with dq_engine.evaluation.fidelity, and the forecast's noise terms are evaluated with every calibrated scale
set to 1 and every floor to 0 (columns ``base_*``). One CSV row per run in ``bench/results/forecast_calibration.csv``
(appended as runs finish), the machine in the JSON beside it. ``--fit`` prints the constants fitted on the runs of
both calibration passes (:func:`fit_constants`; what dq_engine/evaluation/forecast.py holds), ``--markdown`` the
forecast against the measured values, ``--against-fidelity bench/results/fidelity.csv`` the forecast against the
medians of ``bench/fidelity.py``'s seeds (out of sample; docs/benchmarks.md, "Forecast").
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from scale_common import machine, study_grant

from dq_engine import Dataset, Domain, answer_workload, make_rng
from dq_engine.evaluation import forecast
from dq_engine.evaluation.fidelity import evaluate_rows, fidelity_reference
from dq_engine.privacy.public import PublicQuantities
from dqrelease.inputs.config import default_workload
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism
from dqrelease.mechanisms.utility import forecast_plan, forecast_shape
from dqrelease.plan import build_workload

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DELTA = 1e-9
GERMAN_SIZES = (4, 10, 5, 10, 10, 5, 5, 4, 4, 3, 4, 4, 10, 3, 3, 4, 4, 2, 2, 2, 2)
"""Column sizes of a German-credit-like table (its 21 columns; numeric ones in 10 buckets)."""

RUNS = (
    ("german", (1.0, 0.1), ("mwem-particles", "dualquery", "dualquery-raw", "dualquery-raw-s300")),
    ("adult-5000", (1.0,), ("mwem-particles", "dualquery")),
    ("adult", (1.0, 0.1), ("mwem-particles", "dualquery", "dualquery-raw")),
    ("adult-pgm", (1.0,), ("mwem-particles",)),
    ("kdd99", (1.0,), ("mwem-particles",)),
)
KEYS = {"mwem-particles": ("mwem-particles", {}), "dualquery": ("dualquery", {}),
        "dualquery-raw": ("dualquery", {"fit": {"enabled": False}}),
        "dualquery-raw-s300": ("dualquery", {"samples": 300, "fit": {"enabled": False}})}
"""Variants: ``dualquery-raw-s300`` is the issue's German-credit case (the examples' s = 300: T = 7 at epsilon 1)."""


def adult_shipped() -> Dataset:
    """The shipped example's table, discretized by its schema (DuckDB, as the release does)."""
    import duckdb

    from dqrelease.inputs.config import load_config
    from dqrelease.inputs.discretize import discretize
    from dqrelease.inputs.ingest import ingest_source
    from dqrelease.inputs.schema import load_schema

    config = load_config(ROOT / "examples" / "adult" / "release.toml")
    schema = load_schema(config.schema_file)
    with duckdb.connect() as con:
        ingest_source(con, config.source, schema)
        return discretize(con, "raw", schema)


def german_like(n: int = 1_000, seed: int = 7) -> Dataset:
    """A public synthetic table of German credit's shape: column j copies column j-1 (mod size) w.p. 0.5."""
    rng = make_rng(seed)
    columns = [rng.integers(0, GERMAN_SIZES[0], n)]
    for size in GERMAN_SIZES[1:]:
        fresh = rng.choice(size, size=n, p=rng.dirichlet(np.full(size, 0.7)))
        columns.append(np.where(rng.random(n) < 0.5, columns[-1] % size, fresh))
    domain = Domain.categorical({f"c{j:02d}": size for j, size in enumerate(GERMAN_SIZES)})
    return Dataset.from_codes(domain, np.stack(columns, axis=1))


def load(shape: str) -> Dataset:
    """The dataset of ``shape``."""
    if shape == "german":
        return german_like()
    if shape in ("adult", "adult-5000"):
        data = adult_shipped()
        if shape == "adult":
            return data
        keep = np.sort(make_rng(5).choice(data.n, size=5_000, replace=False))
        return Dataset.from_codes(data.domain, data.to_codes()[keep])
    from engine_data import load_adult, load_kdd99

    return load_adult() if shape == "adult-pgm" else load_kdd99()


CONSTANTS = ("PRIOR_FIT_FACTOR", "ONE_WAY_FIT_FLOOR", "WORKLOAD_FIT_FACTOR", "WORKLOAD_FIT_FLOOR",
             "RAW_RECORDS_FACTOR", "RAW_RECORDS_WORKLOAD_FACTOR")


def bases(plan, shape) -> dict[str, float]:
    """The forecast's noise terms with every scale 1 and every floor 0 (the workload's noise part alone)."""
    saved = {name: getattr(forecast, name) for name in CONSTANTS}
    try:
        for name in CONSTANTS:
            setattr(forecast, name, 0.0 if name.endswith("FLOOR") else 1.0)
        one = forecast_plan(plan, shape)
        forecast.PRIOR_FIT_FACTOR = 0.0
        noise = forecast_plan(plan, shape)
    finally:
        for name, value in saved.items():
            setattr(forecast, name, value)
    return {"base_one_way": one.worst_one_way_cell.value, "base_workload_noise": noise.workload_max.value}


def unmeasured_scales(frame) -> np.ndarray:
    """``√(M/T)`` of each run (:func:`dq_engine.evaluation.forecast.unmeasured_scale`).

    ``M`` is the release default's marginals (every one-way and two-way, 64 three-way) of its columns, ``T`` its
    MWEM rounds (the table fit's for DualQuery).
    """
    columns = frame["columns"].to_numpy(dtype=np.float64)
    marginals = columns + columns * (columns - 1) / 2 + 64
    rounds = np.where(frame.mechanism == "mwem-particles", frame.rounds, frame.fit_rounds).astype(np.float64)
    return np.sqrt(marginals / rounds)


CALIBRATIONS = (RESULTS / "forecast_calibration.csv", RESULTS / "forecast_calibration_refit.csv")
"""Both calibration passes (2026-11-24: before and after the fit's changes); the constants are fitted on all their
runs (docs/decisions.md, "The forecast's workload floor grows with the marginals left unmeasured")."""


def fit_constants(paths: tuple[pathlib.Path, ...] | list[pathlib.Path]) -> dict[str, float]:
    """The calibrated constants from the runs of the CSVs (what dq_engine/evaluation/forecast.py holds).

    Particles and table fit: the scales and floors that minimise the largest factor between forecast and measured
    over both figures of every run (ties: the smallest mean squared log error), on a grid. Raw records: the median
    of measured x √R per figure.
    """
    import pandas as pd

    frame = pd.concat([pd.read_csv(path) for path in paths], ignore_index=True)
    raw = frame[frame.mechanism.str.startswith("dualquery-raw")]
    fitted = frame[~frame.mechanism.str.startswith("dualquery-raw")]
    b1, bw = fitted.base_one_way.to_numpy(), fitted.base_workload_noise.to_numpy()
    m1, mw = fitted.measured_one_way.to_numpy(), fitted.measured_workload.to_numpy()
    scale = unmeasured_scales(fitted)
    grid = np.meshgrid(np.arange(0.3, 1.5, 0.02), np.arange(0.05, 1.0, 0.02), np.arange(0.0, 0.03, 0.001),
                       np.arange(0.0, 0.02, 0.0005), indexing="ij", sparse=True)
    c1, c2, f1, fw = (g[..., None] for g in grid)
    one = np.minimum(1.0, np.hypot(c1 * b1, f1))
    workload = np.minimum(1.0, np.maximum(one, np.hypot(c2 * bw, fw * scale)))
    errors = np.concatenate([np.broadcast_to(np.log(one / m1), workload.shape), np.log(workload / mw)], axis=-1)
    score = np.round(np.abs(errors).max(axis=-1), 2) * 1000 + (errors**2).mean(axis=-1)
    best = np.unravel_index(np.argmin(score), score.shape)
    values = [g.ravel()[i] for g, i in zip(grid, best, strict=True)]
    records = np.sqrt(raw.records.to_numpy())
    return {
        "PRIOR_FIT_FACTOR": round(float(values[0]), 2), "WORKLOAD_FIT_FACTOR": round(float(values[1]), 2),
        "ONE_WAY_FIT_FLOOR": round(float(values[2]), 3), "WORKLOAD_FIT_FLOOR": round(float(values[3]), 4),
        "RAW_RECORDS_FACTOR": round(float(np.median(raw.measured_one_way.to_numpy() * records)), 2),
        "RAW_RECORDS_WORKLOAD_FACTOR": round(float(np.median(raw.measured_workload.to_numpy() * records)), 2),
    }


def markdown_table(path: pathlib.Path) -> str:
    """Forecast (the constants of dq_engine/evaluation/forecast.py, recomputed from the bases) against measured."""
    import pandas as pd

    frame = pd.read_csv(path)
    frame["unmeasured"] = np.where(frame.mechanism.str.startswith("dualquery-raw"), 1.0, 0.0)
    fitted = ~frame.mechanism.str.startswith("dualquery-raw")
    frame.loc[fitted, "unmeasured"] = unmeasured_scales(frame[fitted])
    lines = ["| shape | n | mechanism | epsilon | worst one-way: forecast / measured | workload max: forecast / "
             "measured |", "|---|---|---|---|---|---|"]
    for row in frame.itertuples():
        if row.mechanism.startswith("dualquery-raw"):
            one = min(1.0, forecast.RAW_RECORDS_FACTOR * row.base_one_way)
            workload = min(1.0, max(one, forecast.RAW_RECORDS_WORKLOAD_FACTOR * row.base_workload_noise))
        else:
            one = min(1.0, float(np.hypot(forecast.PRIOR_FIT_FACTOR * row.base_one_way, forecast.ONE_WAY_FIT_FLOOR)))
            workload = min(1.0, max(one, float(np.hypot(forecast.WORKLOAD_FIT_FACTOR * row.base_workload_noise,
                                                        forecast.WORKLOAD_FIT_FLOOR * row.unmeasured))))
        lines.append(
            f"| {row.shape} | {row.n:,} | {row.mechanism} | {row.epsilon:g} | {one:.3g} / {row.measured_one_way:.3g} "
            f"({one / row.measured_one_way:.2f}x) | {workload:.3g} / {row.measured_workload:.3g} "
            f"({workload / row.measured_workload:.2f}x) |"
        )
    return "\n".join(lines)


def run_one(shape_name: str, data: Dataset, workload, truth, epsilon: float, variant: str, seed: int) -> dict:
    """Plan, forecast, run and evaluate one mechanism at one epsilon."""
    name, keys = KEYS[variant]
    public = PublicQuantities(n=data.n, epsilon=epsilon, delta=DELTA, domain=data.domain, n_queries=len(workload),
                              n_marginals=workload.n_marginals)
    inputs = PlanInputs(public=public, mode="tight", deterministic=False, workload=workload)
    plan = plan_mechanism(MECHANISMS[name].keys(**keys), inputs)
    shape = forecast_shape(inputs)
    predicted = forecast_plan(plan, shape)
    grant = study_grant(plan)
    start = time.perf_counter()
    result = run_mechanism(grant, RunInputs(data=data, workload=workload, rng=make_rng(seed), true_answers=truth))
    seconds = time.perf_counter() - start
    published = result.sample_rows(data.n, make_rng(seed + 1000))
    reference = fidelity_reference(data, workload=workload, true_answers=truth)
    measured = evaluate_rows(reference, published, label="published rows").figures()
    return {
        "shape": shape_name, "n": data.n, "columns": len(data.domain), "one_way_cells": shape.one_way_cells,
        "workload_cells": shape.workload_cells, "mechanism": variant, "epsilon": epsilon, "seed": seed,
        "rounds": plan.parameters.get("rounds"), "fit_rounds": None if plan.fit is None else plan.fit.rounds,
        "records": int(result.records.shape[0]),
        "forecast_one_way": predicted.worst_one_way_cell.value, "forecast_workload": predicted.workload_max.value,
        **bases(plan, shape),
        "measured_one_way": measured["worst_one_way_cell"], "measured_workload": measured["workload_max_error"],
        "measured_distinct": int(np.unique(published, axis=0).shape[0]), "seconds": round(seconds, 1),
        "load": round(os.getloadavg()[0], 1),
    }


def against_fidelity(path: pathlib.Path) -> str:
    """Forecast against the median of ``bench/fidelity.py``'s seeds, per setting, mechanism and epsilon (Markdown).

    Each row's plan is made as bench/fidelity.py makes it (its settings and keys); only the public shape is used.
    """
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from bench.fidelity import SETTINGS, _public, mechanism_keys

    frame = pd.read_csv(path)
    frame = frame[(frame.kind == "dqrelease") & (frame.status == "ok")]
    groups = frame.groupby(["setting", "mechanism", "epsilon"], sort=False)
    lines = ["| setting | mechanism | epsilon | seeds | worst one-way: forecast / median measured (range) | "
             "workload max: forecast / median measured (range) |", "|---|---|---|---|---|---|"]
    loaded = {}
    ratios = []
    particles = []  # the particles forecast's ratios (MWEM on particles, a table fit): FIT_FORECAST_RATIOS
    for (setting, name, epsilon), rows in groups:
        if setting not in loaded:
            loaded[setting] = SETTINGS[setting].load(False)
        data = loaded[setting]
        inputs = PlanInputs(public=_public(data, float(epsilon)), mode="tight", deterministic=True,
                            constraints=data.constraints, workload=data.workload)
        plan = plan_mechanism(mechanism_keys(name, data, smoke=False), inputs)
        predicted = forecast_plan(plan, forecast_shape(inputs))
        if predicted is None:
            continue
        cells = []
        for figure, column in ((predicted.worst_one_way_cell, "worst_one_way_cell"),
                               (predicted.workload_max, "workload_max_error")):
            values = rows[column].astype(float)
            median = float(values.median())
            ratios.append(figure.value / median)
            if plan.mechanism == "mwem-particles" or plan.fit is not None:
                particles.append(figure.value / median)
            cells.append(f"{figure.value:.3g} / {median:.3g} ({values.min():.3g}-{values.max():.3g}; "
                         f"{figure.value / median:.2f}x)")
        lines.append(f"| {setting} | {plan.mechanism}{' + fit' if plan.fit is not None else ''} | {epsilon:g} | "
                     f"{len(rows)} | {cells[0]} | {cells[1]} |")
    within = sum(0.5 <= r <= 2.0 for r in ratios)
    lines.append("")
    lines.append(f"{within} of {len(ratios)} forecasts within a factor of 2 of the median measured value "
                 f"(ratios {min(ratios):.2f}-{max(ratios):.2f}).")
    if particles:
        lines.append(f"The particles forecast (MWEM on particles, the table fit): {len(particles)} figures, ratios "
                     f"{min(particles):.2f}-{max(particles):.2f} (FIT_FORECAST_RATIOS is "
                     f"{forecast.FIT_FORECAST_RATIOS}).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the calibration runs and append their rows to the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="shapes to run (default: all)")
    parser.add_argument("--variants", nargs="*", help="mechanism variants to run (default: each shape's)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "forecast_calibration.csv")
    parser.add_argument("--fit", nargs="*", type=pathlib.Path, metavar="CSV",
                        help="print the constants fitted on the runs of the CSVs (default: both calibration passes) "
                             "and exit")
    parser.add_argument("--markdown", action="store_true", help="print forecast against measured and exit")
    parser.add_argument("--against-fidelity", type=pathlib.Path, metavar="CSV",
                        help="print the forecast against bench/fidelity.py's medians (e.g. bench/results/fidelity.csv)")
    args = parser.parse_args(argv)
    if args.fit is not None:
        print(json.dumps(fit_constants(args.fit or CALIBRATIONS), indent=2))
        return 0
    if args.against_fidelity is not None:
        print(against_fidelity(args.against_fidelity))
        return 0
    if args.markdown:
        print(markdown_table(args.out))
        return 0
    info = {"command": " ".join([pathlib.Path(sys.executable).name, *sys.argv]), "machine": machine()}
    args.out.with_suffix(".json").write_text(json.dumps(info, indent=2, default=str) + "\n")
    for shape_name, epsilons, variants in RUNS:
        if args.only and shape_name not in args.only:
            continue
        data = load(shape_name)
        workload = build_workload(default_workload(), data.domain)
        truth = answer_workload(data, workload)
        for epsilon in epsilons:
            for variant in variants:
                if args.variants and variant not in args.variants:
                    continue
                row = run_one(shape_name, data, workload, truth, epsilon, variant, args.seed)
                print(json.dumps(row), flush=True)
                new = not args.out.exists()
                with args.out.open("a", newline="") as handle:
                    writer = csv.DictWriter(handle, fieldnames=list(row))
                    if new:
                        writer.writeheader()
                    writer.writerow(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
