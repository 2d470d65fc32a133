"""Benchmark of every mechanism on ADULT: 64 random 3-way marginals, ε ∈ {0.1, 0.15, 0.2, 0.25, 0.5, 1}, δ = 1/n².

One command (full run, sequential; with the table fit of DualQuery, DQRS, FEM and sepFEM about an hour on 2 cores):

    .venv/bin/python bench/mechanisms.py

``--smoke`` runs tiny sizes (a 6-attribute slice, 8 marginals, one ε, capped rounds) in about a minute;
``--dataset kdd-proxy`` runs the *development proxy* (below) instead of ADULT.

Every mechanism is planned and run by the release pipeline's registry (:data:`dqrelease.mechanisms.MECHANISMS`,
through :func:`~dqrelease.mechanisms.plan_mechanism` and :func:`~dqrelease.mechanisms.run_mechanism`) with its
default keys, i.e. exactly as ``dqrelease run`` would with ``[mechanism] name = "..."`` and nothing else: the
parameter rules are the registry's (public quantities only: ``n``, the target (ε, δ), the domain, the number of
queries ``N`` and marginals ``M``), including the default table fit of DualQuery, DQRS, FEM and sepFEM. Smoke runs
override a few keys (:data:`SMOKE_KEYS`) to shrink the sizes; full runs override nothing. Selectors (``auto``)
are not run under their own name: they plan one of the others. Budgets are in tight mode (zCDP, optimal
conversion) with seeded (deterministic) oracles, so the charged tight cost never exceeds the target; the
paper-mode cost of the same plan is reported next to it. The error is that of the mechanism's synthetic
distribution (records and weights; randomized response: its proper unbiased estimator, eq. 14 of the paper "minimax
distortion of query-set-independent mechanisms").

The development proxy is a 48,842-row sample of KDD Cup 99 (DualQuery authors' encoding) with 14 attributes of
similar sizes, bucketed with fixed public edges.

Outputs: ``bench/results/mechanisms.csv`` (one row per mechanism and ε, appended and flushed as each run
finishes, so a crash loses at most the run in progress), ``bench/results/mechanisms.json`` (command, versions,
machine, load averages, start and end times) and ``bench/results/mechanisms.png``. ``--resume`` keeps the rows
already in the CSV and runs only the missing (mechanism, ε) pairs; seeds depend on the mechanism's name and ε
only, so a resumed run draws the same randomness as an uninterrupted one.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import pathlib
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dq_engine import Dataset, Domain, answer_workload, make_rng, random_marginals
from dq_engine.data.answers import uniform_answers
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.workload import Workload
from dq_engine.errors import DQEngineError
from dq_engine.evaluation.baselines import independent_gaussian_answers, independent_laplace_answers, zeros_answers
from dq_engine.mechanisms.randomized_response import estimate_answers
from dq_engine.privacy.accounting import approx_dp_from_zcdp
from dq_engine.privacy.public import PublicQuantities
from dq_engine.results import SynthesisResult
from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.data_home import require_shared_data_dir
from dqrelease.mechanisms import MECHANISMS, PlanInputs, ReleasePlan, RunInputs, plan_mechanism, run_mechanism

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script (bench/ first on the path) or imported as bench.mechanisms
    sys.path.insert(0, str(ROOT))
from bench.scale_common import study_grant  # noqa: E402

EPSILONS = (0.1, 0.15, 0.2, 0.25, 0.5, 1.0)
WORKLOAD_SEED = 0
TIME_BUDGET = 65.0
"""Seconds one run may take on this 2-core machine (issue 4's target; slower runs are marked ``over-time``)."""

SELECTORS = ("auto",)
"""Registry entries that choose another mechanism (not run under their own name)."""
RUN_ORDER = ("dualquery", "dqrs", "fem", "sepfem", "mwem", "mwem-particles", "randomized_response")
"""Mechanisms in the order of the first runs: a mechanism's seed offset is its place here (stable seeds)."""

SMOKE_FIT = {"particles": 1_000, "rounds": 2}
SMOKE_KEYS: dict[str, dict[str, Any]] = {
    "dualquery": {"samples": 20, "rounds": 4, "fit": SMOKE_FIT},
    "dqrs": {"samples": 20, "rounds": 4, "fit": SMOKE_FIT},
    "fem": {"samples": 3, "rounds": 3, "workers": 1, "fit": SMOKE_FIT},
    "sepfem": {"samples": 3, "rounds": 3, "workers": 1, "fit": SMOKE_FIT},
    "mwem-particles": {"rounds": 3},
}
"""Keys that smoke runs give (tiny sizes); full runs give none: every mechanism runs with its registry defaults."""


# ---------------------------------------------------------------------- data
def load_adult(columns: tuple[str, ...] | None = None) -> Dataset:
    """ADULT as preprocessed by private-pgm (48,842 rows, 14 attributes), optionally a column subset.

    Read from the shared data directory (DQRELEASE_DATA or ../shared/data).
    """
    data = require_shared_data_dir()
    sizes = json.loads((data / "adult_pgm" / "adult-domain.json").read_text())
    names = list(columns) if columns else list(sizes)
    frame = pd.read_csv(data / "adult_pgm" / "adult.csv", usecols=names)
    return Dataset.from_codes(Domain.categorical({k: sizes[k] for k in names}), frame[names].to_numpy())


def load_kdd_proxy(n: int = 48_842, seed: int = 0) -> Dataset:
    """Development proxy: ``n`` seeded rows of KDD Cup 99 (DualQuery encoding), 14 attributes.

    Fixed public bucketing: symbolic columns keep their schema codes; byte and duration columns get
    ``floor(log2(x + 1))`` buckets (capped); connection counts get width-6 (``count``, ``srv_count``) or
    width-3 (``dst_host_count``) buckets, capped at 86; ``same_srv_rate`` is rounded to whole percent.
    """
    path = require_shared_data_dir() / "kddcup99_dualquery" / "kdd99.clean.gz"
    frame = pd.read_csv(path, header=None, skipinitialspace=True)
    frame[41] = frame[41].astype(str).str.rstrip(".").astype(float).astype(int)
    frame = frame.iloc[np.sort(make_rng(seed).choice(len(frame), n, replace=False))]

    def log2_buckets(column: int, cap: int) -> np.ndarray:
        values = frame[column].to_numpy().astype(float)
        return np.minimum(np.floor(np.log2(values + 1)).astype(np.int64), cap - 1)

    columns = {
        "protocol_type": (frame[1].to_numpy(), 3),
        "service": (frame[2].to_numpy(), 66),
        "flag": (frame[3].to_numpy(), 11),
        "land": (frame[6].to_numpy(), 2),
        "logged_in": (frame[11].to_numpy(), 2),
        "is_guest_login": (frame[21].to_numpy(), 2),
        "attack": (frame[41].to_numpy(), 23),
        "duration": (log2_buckets(0, 16), 16),
        "src_bytes": (log2_buckets(4, 32), 32),
        "dst_bytes": (log2_buckets(5, 32), 32),
        "count": (np.minimum(frame[22].to_numpy() // 6, 85), 86),
        "srv_count": (np.minimum(frame[23].to_numpy() // 6, 85), 86),
        "dst_host_count": (np.minimum(frame[31].to_numpy() // 3, 85), 86),
        "same_srv_rate": (np.minimum(np.round(frame[28].to_numpy() * 100).astype(np.int64), 100), 101),
    }
    domain = Domain.categorical({name: size for name, (_, size) in columns.items()})
    return Dataset.from_codes(domain, np.stack([values for values, _ in columns.values()], axis=1))


# ---------------------------------------------------------------------- plans from the registry
@dataclass(frozen=True, kw_only=True)
class Public(PublicQuantities):
    """Everything a plan rule may look at (no private value), and whether this is a smoke run (tiny sizes)."""

    smoke: bool = False


def mechanism_names() -> list[str]:
    """The registry's mechanisms, selectors left out, in :data:`RUN_ORDER` (new ones after)."""
    names = [name for name in MECHANISMS if name not in SELECTORS]
    return sorted(names, key=lambda name: RUN_ORDER.index(name) if name in RUN_ORDER else len(RUN_ORDER))


def mechanism_keys(name: str, *, smoke: bool, **overrides: Any) -> Any:
    """The registry's keys model of ``name``: its defaults, :data:`SMOKE_KEYS` in smoke runs, then ``overrides``."""
    given = {**(SMOKE_KEYS.get(name, {}) if smoke else {}), **overrides}
    return MECHANISMS[name].keys.model_validate({"name": name, **given})


def plan(name: str, public: Public, **overrides: Any) -> ReleasePlan:
    """The registry's plan of ``name`` for these public quantities (tight accounting, seeded oracles)."""
    base = PublicQuantities(n=public.n, epsilon=public.epsilon, delta=public.delta, domain=public.domain,
                            n_queries=public.n_queries, n_marginals=public.n_marginals)
    inputs = PlanInputs(public=base, mode="tight", deterministic=True)
    return plan_mechanism(mechanism_keys(name, smoke=public.smoke, **overrides), inputs)


def rule_dualquery(public: Public):
    """DualQuery's raw-records config as the registry plans it (table fit off): for scripts that call the engine.

    ``bench/smartnoise_compare.py`` runs ``dq_engine.mechanisms.dualquery`` itself on this config, so it gets the
    paper's algorithm with the registry's parameter rule at the whole target (no budget set aside for a fit it would not
    run).
    """
    return plan("dualquery", public, fit={"enabled": False}).engine_config


def run_planned(planned: ReleasePlan, data: Dataset, workload: Workload,
                rng: np.random.Generator) -> tuple[np.ndarray, SynthesisResult, str]:
    """Run a registry plan; the synthetic distribution's answers on the workload, the result and a note."""
    name = planned.mechanism
    result = run_mechanism(study_grant(planned), RunInputs(data=data, workload=workload, rng=rng))
    if name == "randomized_response":
        estimator = "proper estimator (eq. 14 of minimax distortion of query-set-independent mechanisms)"
        return estimate_answers(result, workload, proper=True), result, estimator
    return MarginalIndex(workload).answers(result.records, result.weights), result, ""


# ---------------------------------------------------------------------- running
@dataclass
class Row:
    """One CSV row."""

    dataset: str
    mechanism: str
    epsilon: float
    delta: float
    status: str
    max_error: float | None
    mean_error: float | None
    seconds: float
    tight_epsilon: float | None
    paper_epsilon: float | None
    paper_delta: float | None
    records: int | None
    parameters: str
    note: str = ""
    load_1min: float | None = None
    """1-minute load average when the run started (other processes share the 2 cores)."""
    plan_seconds: float | None = None
    """Seconds of the registry's plan (``seconds`` is the run alone)."""


BASELINES = ("zeros", "uniform", "laplace-per-marginal", "gaussian-per-marginal")


def _baseline(name: str, data: Dataset, workload: Workload, truth: np.ndarray, public: Public, rng) -> tuple:
    if name == "zeros":
        return zeros_answers(workload), None, None
    if name == "uniform":
        return uniform_answers(workload), None, None
    if name == "laplace-per-marginal":
        answers, _ = independent_laplace_answers(data, workload, truth, epsilon=public.epsilon, rng=rng)
        return answers, public.epsilon, 0.0
    answers, _ = independent_gaussian_answers(data, workload, truth, rho=public.rho, rng=rng)
    return answers, approx_dp_from_zcdp(public.rho, public.delta), public.delta


def _seed(epsilon_index: int, offset: int) -> np.random.Generator:
    """The generator of one run: fixed by the ε index and the mechanism's place in the full list."""
    return make_rng(1000 * epsilon_index + offset)


class RowWriter:
    """Appends rows to the CSV and flushes after each one (a crash loses only the run in progress)."""

    FIELDS = tuple(Row.__dataclass_fields__)

    def __init__(self, path: pathlib.Path, *, resume: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.done: dict[tuple[str, float], Row] = {}
        if resume and path.exists():
            for record in csv.DictReader(path.open()):
                row = _row_from_csv(record)
                self.done[(row.mechanism, row.epsilon)] = row
        self.path = path
        self.handle = path.open("a" if resume and path.exists() else "w", newline="")
        self.writer = csv.DictWriter(self.handle, fieldnames=self.FIELDS)
        if not (resume and self.done):
            self.writer.writeheader()
            self.handle.flush()

    def write(self, row: Row) -> None:
        """Append one row and flush it to disk."""
        self.writer.writerow(row.__dict__)
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        """Close the file."""
        self.handle.close()


def _row_from_csv(record: dict[str, str]) -> Row:
    def number(key: str, kind: type = float):
        return kind(record[key]) if record.get(key) not in (None, "") else None

    return Row(
        record["dataset"], record["mechanism"], float(record["epsilon"]), float(record["delta"]), record["status"],
        number("max_error"), number("mean_error"), float(record["seconds"]), number("tight_epsilon"),
        number("paper_epsilon"), number("paper_delta"), number("records", int), record["parameters"],
        record.get("note", ""), number("load_1min"), number("plan_seconds"),
    )


def run_benchmark(dataset: str, smoke: bool, epsilons: tuple[float, ...], mechanisms: list[str],
                  writer: RowWriter) -> list[Row]:
    """Run every mechanism and baseline at every ε; one row each (failures are rows too), written as they finish."""
    if smoke:
        data = load_adult(("workclass", "education-num", "marital-status", "relationship", "race", "sex"))
        workload = random_marginals(data.domain, 3, 8, make_rng(WORKLOAD_SEED))
    else:
        data = load_adult() if dataset == "adult" else load_kdd_proxy()
        workload = random_marginals(data.domain, 3, 64, make_rng(WORKLOAD_SEED))
    truth = answer_workload(data, workload)
    delta = 1.0 / data.n**2
    rows: list[Row] = []

    def keep(row: Row) -> None:
        writer.write(row)
        rows.append(row)

    for epsilon in epsilons:
        e_index = epsilon_index(epsilon)
        public = Public(n=data.n, epsilon=epsilon, delta=delta, domain=data.domain, n_queries=len(workload),
                        n_marginals=workload.n_marginals, smoke=smoke)
        for b_index, name in enumerate(BASELINES):
            if (name, epsilon) in writer.done:
                rows.append(writer.done[(name, epsilon)])
                continue
            answers, tight, paper_delta = _baseline(name, data, workload, truth, public, _seed(e_index, b_index))
            error = np.abs(answers - truth)
            keep(Row(dataset, name, epsilon, delta, "ok", float(error.max()), float(error.mean()), 0.0,
                     tight, tight, paper_delta, None, "{}", load_1min=os.getloadavg()[0]))
        for name in mechanisms:
            if (name, epsilon) in writer.done:
                rows.append(writer.done[(name, epsilon)])
                continue
            load = os.getloadavg()[0]
            began = time.perf_counter()
            try:
                planned = plan(name, public)
                plan_seconds = time.perf_counter() - began
                began = time.perf_counter()
                rng = _seed(e_index, 100 + _seed_offset(name))
                answers, result, note = run_planned(planned, data, workload, rng)
            except (DQEngineError, ConfigInvalidError) as refusal:  # the plan refuses (e.g. MWEM's universe limit)
                keep(Row(dataset, name, epsilon, delta, "refused", None, None, time.perf_counter() - began,
                         None, None, None, None, "{}", str(refusal), load))
                print(f"eps={epsilon:<5} {name:<22} refused: {refusal}", flush=True)
                continue
            except Exception as failure:  # a failing mechanism is reported, the benchmark goes on
                traceback.print_exc()
                keep(Row(dataset, name, epsilon, delta, "failed", None, None, time.perf_counter() - began,
                         None, None, None, None, "{}", f"{type(failure).__name__}: {failure}", load))
                continue
            seconds = time.perf_counter() - began
            error = np.abs(answers - truth)
            status = "ok" if seconds <= TIME_BUDGET else "over-time"
            tight, paper = planned.costs["tight"], planned.costs["paper"]
            parameters = {k: v for k, v in planned.parameters.items() if k != "oracle"}
            keep(Row(
                dataset, name, epsilon, delta, status, float(error.max()), float(error.mean()), seconds,
                tight.epsilon, paper.epsilon, paper.delta, int(result.records.shape[0]),
                json.dumps(parameters, default=str), note, load, plan_seconds,
            ))
            print(f"eps={epsilon:<5} {name:<22} max={error.max():.4f} mean={error.mean():.6f} {seconds:6.1f}s "
                  f"tight={tight.epsilon:.4f} load={load:.2f}", flush=True)
    return rows


def _seed_offset(name: str) -> int:
    """A mechanism's place in :data:`RUN_ORDER` (mechanisms added later come after it, in registry order)."""
    if name in RUN_ORDER:
        return RUN_ORDER.index(name)
    return len(RUN_ORDER) + [m for m in MECHANISMS if m not in RUN_ORDER].index(name)


def epsilon_index(epsilon: float) -> int:
    """Position of ε in :data:`EPSILONS` (seeds depend on it), or a stable index above them for other values."""
    for index, known in enumerate(EPSILONS):
        if math.isclose(epsilon, known):
            return index
    return len(EPSILONS) + round(epsilon * 1000)


def environment(argv: list[str]) -> dict:
    """Command, versions and machine, recorded beside the CSV."""
    import ortools
    import scipy

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                                check=False).stdout.strip()
    except OSError:
        commit = ""
    return {
        "command": " ".join([".venv/bin/python", "bench/mechanisms.py", *argv]),
        "git_commit": commit,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "scipy": scipy.__version__,
        "ortools": ortools.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_start": os.getloadavg(),
    }


def markdown_tables(rows: list[Row]) -> str:
    """The docs tables: max error by mechanism and ε, then every row with mean error, time and costs."""
    epsilons = sorted({row.epsilon for row in rows})
    names = list(dict.fromkeys(row.mechanism for row in rows))
    by_key = {(row.mechanism, row.epsilon): row for row in rows}

    def cell(value: float | None, digits: int) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    lines = ["| mechanism | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |",
             "|---|" + "---|" * len(epsilons)]
    for name in names:
        cells = []
        for epsilon in epsilons:
            row = by_key.get((name, epsilon))
            cells.append("–" if row is None else row.status if row.max_error is None else cell(row.max_error, 4))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| mechanism | ε | max | mean | wall s | tight ε | paper ε (δ) | load 1 min |",
              "|---|---|---|---|---|---|---|---|"]
    for name in names:
        for epsilon in epsilons:
            row = by_key.get((name, epsilon))
            if row is None:
                continue
            paper = "–" if row.paper_epsilon is None else f"{row.paper_epsilon:.3f} ({row.paper_delta or 0:.2g})"
            seconds = "–" if name in BASELINES else f"{row.seconds:.1f}"
            lines.append(f"| {name} | {epsilon:g} | {row.status if row.max_error is None else cell(row.max_error, 4)} "
                         f"| {cell(row.mean_error, 7)} | {seconds} | {cell(row.tight_epsilon, 4)} | {paper} "
                         f"| {cell(row.load_1min, 1)} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], path: pathlib.Path, title: str) -> None:
    """Max error against ε, one line per mechanism, with the published reference points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 5.5))
    names = [name for name in dict.fromkeys(row.mechanism for row in rows) if name != "zeros"]
    colours = plt.get_cmap("tab10").colors
    for index, name in enumerate(names):
        points = sorted((r.epsilon, r.max_error) for r in rows if r.mechanism == name and r.max_error is not None)
        if not points:
            continue
        style = "--" if name in BASELINES else "-"
        axis.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", markersize=3, label=name,
                  color=colours[index % len(colours)])
    references = {  # (ε values, max errors, marker): numbers quoted in the issue, not run here
        "FEM authors (best of grid, tuned)": ([0.1, 1.0], [0.166, 0.0985], "x"),
        "AIM (smartnoise, ε = 0.1 only)": ([0.1], [0.132], "+"),
        "MST (smartnoise)": ([0.1, 1.0], [0.225, 0.164], "1"),
        "independent Laplace (issue)": ([0.1, 1.0], [0.203, 0.020], "^"),
        "target": ([0.1, 1.0], [0.12, 0.05], "*"),
    }
    for label, (xs, ys, marker) in references.items():
        axis.scatter(xs, ys, marker=marker, s=90, label=label, zorder=5, color="red" if label == "target" else "black")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("ε (δ = 1/n²)")
    axis.set_ylabel("max error over the workload")
    axis.set_title(title)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: 6-attribute slice, 8 marginals, ε = 1")
    parser.add_argument("--dataset", choices=("adult", "kdd-proxy"), default="adult")
    parser.add_argument("--epsilons", type=float, nargs="+", default=None)
    parser.add_argument("--mechanisms", nargs="+", choices=mechanism_names(), default=mechanism_names())
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench" / "results" / "mechanisms.csv")
    parser.add_argument("--plot", type=pathlib.Path, default=None, help="PNG path (default: beside the CSV)")
    parser.add_argument("--resume", action="store_true", help="keep the CSV's rows and run only the missing ones")
    parser.add_argument("--replot", action="store_true", help="only redraw the plot from the existing CSV")
    parser.add_argument("--markdown", action="store_true", help="only print the docs tables from the existing CSV")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    epsilons = tuple(args.epsilons) if args.epsilons else ((1.0,) if args.smoke else EPSILONS)
    title = "smoke run" if args.smoke else f"{args.dataset}: 64 random 3-way marginals"
    if args.markdown:
        print(markdown_tables([_row_from_csv(record) for record in csv.DictReader(args.out.open())]), end="")
        return 0
    if args.replot:
        plot([_row_from_csv(record) for record in csv.DictReader(args.out.open())],
             args.plot or args.out.with_suffix(".png"), title)
        return 0
    meta_path = args.out.with_suffix(".json")
    meta = environment(argv)
    writer = RowWriter(args.out, resume=args.resume)
    try:
        rows = run_benchmark(args.dataset, args.smoke, epsilons, args.mechanisms, writer)
    finally:
        writer.close()
    meta["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    meta["load_average_end"] = os.getloadavg()
    if args.resume and meta_path.exists():
        meta = {**json.loads(meta_path.read_text()), "resumed": meta}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    plot(rows, args.plot or args.out.with_suffix(".png"), title)
    return 0 if all(row.status in ("ok", "refused") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
