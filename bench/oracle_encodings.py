"""Oracle study on real DualQuery best-response instances (results summarised in docs/oracle.md).

Steps (``--step``; ``all`` runs them in order):

1. ``capture``: run DualQuery's round loop on Adult (64 random 3-way marginals; 500,000 random 3-way queries)
   and KDD99 (2,000,000 random 3-way queries) for s in {300, 1000, 1750, 5000} (and 20,000 on the random-query
   workloads, for model-building and presolve times), with T calibrated to ε = 1, δ = 1/n² (tight), and save
   the best-response problems of rounds 2, T/2 and T under ``bench/results/instances``; BMS-WebView-2 (3,340
   binary items, 500,000 random 3-way queries, s in {1000, 5000}) for the batch moves of the local search.
   Only missing (dataset, workload, s) combinations are captured.
2. ``study``: solve every instance with each configuration of each experiment; one row per
   (experiment, configuration, instance, repetition) goes to ``<out stem>_rows.jsonl`` (resumable: rows
   already there are skipped).
3. ``summary``: aggregate the rows into ``<out>`` (JSON), ``<out stem>.csv`` (every row) and two plots.

Usage (one command, about 80 minutes on 2 cores)::

    .venv/bin/python bench/oracle_encodings.py --out bench/results/oracle_study.json

``--smoke`` runs a tiny version (one small captured run, short limits) in a few seconds.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from engine_data import (
    DATASETS,
    INSTANCES,
    Instance,
    build_workload,
    capture_instances,
    load_instance,
)

from dq_engine.oracle import OracleConfig, best_response
from dq_engine.oracle.cpsat import ENCODINGS, solve_cpsat
from dq_engine.oracle.local_search import local_search
from dq_engine.privacy.calibration import calibrate_rounds
from dq_engine.privacy.rng import make_rng

ETA = {"adult": 2.0, "kdd99": 1.2, "bms2": 2.0}
WORKLOADS = {"adult": ["marginals64", "queries500000"], "kdd99": ["queries2000000"], "bms2": ["queries500000"]}
SAMPLES = (300, 1000, 1750, 5000)
BINARY_SAMPLES = (1000, 5000)
"""BMS-WebView-2 (3,340 binary items): instances for the batch-move experiment of the local search."""
STRESS_SAMPLES = 20_000
"""Extra instances (random-query workloads) with 20,000 samples, for model-building and presolve times."""
CAPTURE_ORACLE = OracleConfig(kind="local", local_time_limit=0.3)
HINT_LOCAL_SECONDS = 0.5
REFERENCE_SECONDS = 20.0
SEED = 12345


# ---------------------------------------------------------------------- capture
def capture(out: Path, *, smoke: bool) -> None:
    """Capture every (dataset, workload, s) whose instances are not in ``out`` yet."""
    for dataset_name, kinds in WORKLOADS.items():
        if smoke and dataset_name != "adult":
            continue
        dataset = None
        for kind in kinds[:1] if smoke else kinds:
            kind = "queries20000" if smoke else kind
            if smoke:
                sizes = (300,)
            elif dataset_name == "bms2":
                sizes = BINARY_SAMPLES
            else:
                sizes = SAMPLES + ((STRESS_SAMPLES,) if kind.startswith("queries") else ())
            sizes = tuple(s for s in sizes if not any(out.glob(f"{dataset_name}-{kind}-s{s}-t*.npz")))
            if not sizes:
                continue
            dataset = dataset if dataset is not None else DATASETS[dataset_name]()
            workload = build_workload(dataset, kind)
            for samples in sizes:
                rounds = 4 if smoke else calibrate_rounds(
                    "dualquery", epsilon=1.0, delta=1.0 / dataset.n**2, eta=ETA[dataset_name], samples=samples,
                    n=dataset.n)
                began = time.perf_counter()
                paths = capture_instances(
                    dataset_name, kind, samples, eta=ETA[dataset_name], rounds=rounds, seed=samples,
                    oracle=CAPTURE_ORACLE, out=out, dataset=dataset, workload=workload)
                print(f"captured {len(paths)} instances {dataset_name}/{kind}/s={samples} T={rounds} "
                      f"in {time.perf_counter() - began:.1f}s", flush=True)


def load_all(directory: Path) -> list[Instance]:
    names = sorted(directory.glob("*.npz"))
    datasets = {p.name.split("-")[0] for p in names}
    domains = {name: DATASETS[name]().domain for name in datasets}
    return [load_instance(p, domains) for p in names]


def is_stress(instance: Instance) -> bool:
    return instance.samples >= STRESS_SAMPLES


def density_class(instance: Instance) -> str:
    cpv = instance.clauses_per_variable
    return "sparse (<=1)" if cpv <= 1.0 else "medium (1-4)" if cpv < 4.0 else "dense (>=4)"


# ---------------------------------------------------------------------- runners
class Runner:
    """Solves instances with one configuration and returns study rows."""

    def __init__(self, instances: list[Instance], *, smoke: bool) -> None:
        self.instances = instances
        self.smoke = smoke
        self._local_hints: dict[str, np.ndarray] = {}

    def _random_start(self, instance: Instance, rng: np.random.Generator) -> np.ndarray:
        domain = instance.problem.domain
        return (rng.random(len(domain)) * domain.sizes).astype(np.int64)

    def _starts(self, instance: Instance, rng: np.random.Generator) -> list[np.ndarray]:
        random_start = self._random_start(instance, rng)
        return [random_start] if instance.previous is None else [instance.previous, random_start]

    def local_hint(self, instance: Instance) -> np.ndarray:
        """The record of a deterministic local search (200 restarts), cached; the 'local' hint."""
        if instance.name not in self._local_hints:
            rng = make_rng(SEED)
            result = local_search(instance.problem, self._starts(instance, rng), rng, max_restarts=200,
                                  time_limit=None)
            self._local_hints[instance.name] = result.codes
        return self._local_hints[instance.name]

    def cpsat(self, instance: Instance, *, encoding: str = "indicator", workers: int = 8, time_limit: float = 2.0,
              presolve: int | None = 1, hint: str = "none", deterministic: bool = False,
              deterministic_time: float = 1.0, seed: int = SEED) -> dict:
        hint_codes = {"none": None, "previous": instance.previous, "local": None}[hint]
        if hint == "local":
            hint_codes = self.local_hint(instance)
        config = OracleConfig(kind="cpsat", time_limit=time_limit, num_workers=workers,
                              max_presolve_iterations=presolve, deterministic=deterministic,
                              deterministic_time_limit=deterministic_time)
        began = time.perf_counter()
        result = solve_cpsat(instance.problem, config, hint=hint_codes, seed=seed, encoding=encoding,
                             record_progress=True)
        total = time.perf_counter() - began
        objective = result.objective  # exact objective of the decoded record
        if result.status == "OPTIMAL":  # at the optimum CP-SAT's own value must agree
            assert abs(result.solver_objective - objective) < 1e-6, (instance.name, result.solver_objective, objective)
        best_seconds = result.progress[-1][0] if result.progress else None
        return {"objective": objective, "bound": result.bound, "status": result.status,
                "solve_seconds": result.seconds, "build_seconds": result.build_seconds, "total_seconds": total,
                "best_seconds": best_seconds, "deterministic_time": result.deterministic_time,
                "solver_objective": result.solver_objective,
                "codes": None if result.codes is None else result.codes.tolist()}

    def local(self, instance: Instance, *, time_limit: float | None, restarts: int = 10**9,
              seed: int = SEED, batch: bool | None = None) -> dict:
        rng = make_rng(seed)
        began = time.perf_counter()
        result = local_search(instance.problem, self._starts(instance, rng), rng, max_restarts=restarts,
                              time_limit=time_limit, batch=batch)
        total = time.perf_counter() - began
        return {"objective": result.objective, "bound": None, "status": "LOCAL", "solve_seconds": result.seconds,
                "build_seconds": 0.0, "total_seconds": total, "best_seconds": result.best_seconds,
                "restarts": result.restarts, "steps": result.steps, "codes": result.codes.tolist()}

    def portfolio(self, instance: Instance, *, local_seconds: float, cpsat_seconds: float, workers: int = 8,
                  presolve: int | None = 1) -> dict:
        began = time.perf_counter()
        local = self.local(instance, time_limit=local_seconds)
        config = OracleConfig(kind="cpsat", time_limit=cpsat_seconds, num_workers=workers,
                              max_presolve_iterations=presolve)
        cp = solve_cpsat(instance.problem, config, hint=np.asarray(local["codes"]), seed=SEED, record_progress=True)
        total = time.perf_counter() - began
        objective = max(local["objective"], cp.objective if cp.objective is not None else -np.inf)
        improved = cp.objective is not None and cp.objective > local["objective"]
        best_seconds = local["total_seconds"] + cp.build_seconds + cp.progress[-1][0] if improved and cp.progress \
            else local["best_seconds"]
        return {"objective": objective, "bound": cp.bound, "status": cp.status, "solve_seconds": cp.seconds,
                "build_seconds": cp.build_seconds, "total_seconds": total, "best_seconds": best_seconds,
                "local_objective": local["objective"], "codes": None}


    def oracle(self, instance: Instance, config: OracleConfig) -> dict:
        """The public entry point, as DualQuery calls it (previous round's record as start and fallback)."""
        began = time.perf_counter()
        response = best_response(instance.problem, config, make_rng(SEED), previous=instance.previous)
        total = time.perf_counter() - began
        return {"objective": response.objective, "bound": response.bound, "status": response.status,
                "solve_seconds": response.solver_seconds, "build_seconds": response.build_seconds,
                "total_seconds": total, "best_seconds": None, "source": response.source,
                "local_objective": response.local_objective, "local_seconds": response.local_seconds,
                "codes": response.codes.tolist()}


PREVIOUS_DEFAULTS = OracleConfig(time_limit=2.0, num_workers=8, max_presolve_iterations=1, local_time_limit=0.5,
                                 local_restarts=20, skip_cpsat_when_dense=False)
"""OracleConfig defaults before this study (run with the new local search)."""

DEFAULT_CANDIDATES = {
    "previous defaults (ls0.5/20 restarts + cp2 w8 p1)": PREVIOUS_DEFAULTS,
    "ls0.25/300 + cp1 w3 p0 skip-dense": OracleConfig(
        local_time_limit=0.25, local_restarts=300, time_limit=1.0, num_workers=3, max_presolve_iterations=0),
    "ls0.25/300 + cp1 w3 p1 skip-dense": OracleConfig(
        local_time_limit=0.25, local_restarts=300, time_limit=1.0, num_workers=3, max_presolve_iterations=1),
    "ls0.25/300 + cp1 w3 p0 no-skip": OracleConfig(
        local_time_limit=0.25, local_restarts=300, time_limit=1.0, num_workers=3, max_presolve_iterations=0,
        skip_cpsat_when_dense=False),
    "ls0.25/300 + cp0.75 w8 p0 skip-dense": OracleConfig(
        local_time_limit=0.25, local_restarts=300, time_limit=0.75, num_workers=8, max_presolve_iterations=0),
    "ls0.25/unlimited + cp1 w3 p0 skip-dense": OracleConfig(
        local_time_limit=0.25, local_restarts=10**9, time_limit=1.0, num_workers=3, max_presolve_iterations=0),
    "deterministic: 300 restarts + det0.25 w3 p0 skip-dense": OracleConfig(
        local_time_limit=0.25, local_restarts=300, time_limit=1.0, num_workers=3, max_presolve_iterations=0,
        deterministic=True, deterministic_time_limit=0.25),
}


def experiments(runner: Runner, *, smoke: bool) -> list[tuple[str, str, Callable[[Instance], dict], str, int]]:
    """(experiment, configuration, run, instance subset, repetitions)."""
    short = 0.05 if smoke else None
    t = (lambda seconds: short or seconds)  # noqa: E731
    plan: list[tuple[str, str, Callable[[Instance], dict], str, int]] = []
    for encoding in ENCODINGS:
        plan.append(("encoding", encoding, lambda i, e=encoding: runner.cpsat(i, encoding=e, time_limit=t(2.0)),
                     "regular", 1))
    for workers in (1, 2, 3, 8):
        plan.append(("workers", f"w{workers}", lambda i, w=workers: runner.cpsat(i, workers=w, time_limit=t(2.0)),
                     "regular", 1))
    for hint in ("none", "previous", "local"):
        plan.append(("hint", hint, lambda i, h=hint: runner.cpsat(i, hint=h, time_limit=t(2.0)), "regular", 1))
    for presolve in (None, 1, 0):
        name = "default" if presolve is None else str(presolve)
        plan.append(("presolve", name, lambda i, p=presolve: runner.cpsat(i, presolve=p, hint="local",
                                                                            time_limit=t(2.0)), "all", 1))
    for limit in (0.5, 1.0, 2.0, 5.0):
        plan.append(("cpsat_time", f"{limit:g}s", lambda i, s=limit: runner.cpsat(i, hint="local", time_limit=t(s)),
                     "regular", 1))
    for limit in (0.05, 0.1, 0.25, 0.5, 1.0, 2.0):
        plan.append(("local_time", f"{limit:g}s", lambda i, s=limit: runner.local(i, time_limit=t(s)), "all", 2))
    for local_seconds, cpsat_seconds in ((0.25, 0.75), (0.5, 1.5), (0.5, 0.5), (1.0, 1.0)):
        plan.append(("portfolio", f"ls{local_seconds:g}+cp{cpsat_seconds:g}",
                     lambda i, a=local_seconds, b=cpsat_seconds: runner.portfolio(i, local_seconds=t(a),
                                                                                  cpsat_seconds=t(b)), "regular", 1))
    for workers in (1, 3):
        plan.append(("portfolio", f"ls0.5+cp1.5 w{workers}",
                     lambda i, w=workers: runner.portfolio(i, local_seconds=t(0.5), cpsat_seconds=t(1.5), workers=w),
                     "regular", 1))
    plan.append(("determinism", "w8 2s (default mode)",
                 lambda i: runner.cpsat(i, hint="local", time_limit=t(2.0)), "late", 2))
    for workers in (1, 8):
        for limit in (0.25, 1.0):
            plan.append(("determinism", f"w{workers} det{limit:g}",
                         lambda i, w=workers, d=limit: runner.cpsat(i, hint="local", workers=w, deterministic=True,
                                                                    deterministic_time=short or d), "late", 2))
    plan.append(("determinism", "local 500 restarts",
                 lambda i: runner.local(i, time_limit=None, restarts=20 if smoke else 500), "late", 2))
    plan.append(("reference", f"w8 {REFERENCE_SECONDS:g}s default presolve",
                 lambda i: runner.cpsat(i, hint="local", presolve=None, time_limit=t(REFERENCE_SECONDS)), "all", 1))
    for name, candidate in DEFAULT_CANDIDATES.items():
        if smoke:
            candidate = OracleConfig(time_limit=0.05, local_time_limit=0.05, local_restarts=20)
        plan.append(("defaults", name, lambda i, c=candidate: runner.oracle(i, c), "regular", 1))
    for batch in (False, True):
        for limit in (0.25, 1.0):
            plan.append(("batch", f"{'batch' if batch else 'single'} {limit:g}s",
                         lambda i, b=batch, s=limit: runner.local(i, time_limit=t(s), batch=b), "binary", 1))
    plan.append(("batch", "cpsat w8 2s local hint",
                 lambda i: runner.cpsat(i, hint="local", time_limit=t(2.0)), "binary", 1))
    plan.append(("batch", f"reference w8 {REFERENCE_SECONDS:g}s",
                 lambda i: runner.cpsat(i, hint="local", presolve=None, time_limit=t(REFERENCE_SECONDS)), "binary", 1))
    return plan


def select(instances: list[Instance], subset: str) -> list[Instance]:
    if subset == "binary":
        return [i for i in instances if i.dataset == "bms2"]
    instances = [i for i in instances if i.dataset != "bms2"]
    if subset == "all":
        return instances
    regular = [i for i in instances if not is_stress(i)]
    if subset == "regular":
        return regular
    return [i for i in regular if i.round == i.rounds]  # "late": the last round of each captured run


def study(instances: list[Instance], rows_path: Path, *, smoke: bool) -> None:
    done = set()
    if rows_path.exists():
        for line in rows_path.read_text().splitlines():
            row = json.loads(line)
            done.add((row["experiment"], row["config"], row["instance"], row["repetition"]))
    runner = Runner(instances, smoke=smoke)
    plan = experiments(runner, smoke=smoke)
    if smoke:  # one configuration per experiment, one instance
        plan = [entry for number, entry in enumerate(plan) if entry[0] not in {e[0] for e in plan[:number]}]
    with rows_path.open("a") as sink:
        for experiment, config, run, subset, repetitions in plan:
            began = time.perf_counter()
            chosen = select(instances, subset) or (instances if smoke else [])  # smoke has no binary instances
            for instance in chosen[: 1 if smoke else None]:
                for repetition in range(repetitions):
                    if (experiment, config, instance.name, repetition) in done:
                        continue
                    row = run(instance)
                    row.update(experiment=experiment, config=config, instance=instance.name,
                               repetition=repetition, dataset=instance.dataset, workload=instance.workload,
                               samples=instance.samples, round=instance.round, rounds=instance.rounds,
                               clauses=instance.problem.n_clauses, density=density_class(instance),
                               clauses_per_variable=instance.clauses_per_variable, stress=is_stress(instance),
                               load=os.getloadavg()[0])
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
            print(f"{experiment:12s} {config:28s} {time.perf_counter() - began:7.1f}s", flush=True)


# ---------------------------------------------------------------------- summary
def summarise(rows_path: Path, out: Path) -> dict:
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    best: dict[str, float] = {}
    bound: dict[str, float] = {}
    for row in rows:
        if row["objective"] is not None:
            best[row["instance"]] = max(best.get(row["instance"], -np.inf), row["objective"])
        if row.get("bound") is not None:
            bound[row["instance"]] = min(bound.get(row["instance"], np.inf), row["bound"])
    for row in rows:
        objective = row["objective"]
        reference = best.get(row["instance"])
        row["regret_pct"] = (None if objective is None or reference is None
                             else 100.0 * (reference - objective) / max(1.0, reference))
        row["hit_best"] = objective is not None and reference is not None and objective >= reference - 1e-9
        own = row.get("bound")
        row["own_gap_pct"] = None if own is None or objective is None else 100.0 * (own - objective) / max(1.0, own)
        proven = bound.get(row["instance"])
        row["gap_to_best_bound_pct"] = (None if proven is None or objective is None
                                        else 100.0 * (proven - objective) / max(1.0, proven))
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["experiment"], row["config"]), []).append(row)

    def aggregate(members: list[dict]) -> dict:
        totals = np.array([m["total_seconds"] for m in members])
        regrets = [m["regret_pct"] for m in members if m["regret_pct"] is not None]
        gaps = [m["own_gap_pct"] for m in members if m["own_gap_pct"] is not None]
        best_times = [m["best_seconds"] for m in members if m["best_seconds"] is not None]
        return {
            "runs": len(members),
            "no_solution": sum(m["objective"] is None for m in members),
            "mean_regret_pct": float(np.mean(regrets)) if regrets else None,
            "max_regret_pct": float(np.max(regrets)) if regrets else None,
            "best_known_hits": int(sum(m["hit_best"] for m in members)),
            "optimal_proven": int(sum(m["status"] == "OPTIMAL" for m in members)),
            "mean_own_gap_pct": float(np.mean(gaps)) if gaps else None,
            "median_seconds": float(np.median(totals)),
            "p95_seconds": float(np.percentile(totals, 95)),
            "median_best_seconds": float(np.median(best_times)) if best_times else None,
            "median_build_seconds": float(np.median([m["build_seconds"] for m in members])),
        }

    summary: dict = {"configs": [], "instances": {}, "determinism": []}
    for (experiment, config), members in groups.items():
        entry = {"experiment": experiment, "config": config, **aggregate(members), "by_density": {}}
        for density in sorted({m["density"] for m in members}):
            entry["by_density"][density] = aggregate([m for m in members if m["density"] == density])
        summary["configs"].append(entry)
    for name in sorted(best):
        sample = next(r for r in rows if r["instance"] == name)
        summary["instances"][name] = {"best_known": best[name], "best_bound": bound.get(name),
                                      "clauses": sample["clauses"], "density": sample["density"],
                                      "clauses_per_variable": sample["clauses_per_variable"]}
    for (experiment, config), members in groups.items():
        if experiment != "determinism":
            continue
        by_instance: dict[str, list[dict]] = {}
        for m in members:
            by_instance.setdefault(m["instance"], []).append(m)
        identical = sum(len({json.dumps(m["codes"]) for m in ms}) == 1 and len({m["objective"] for m in ms}) == 1
                        for ms in by_instance.values())
        summary["determinism"].append({"config": config, "instances": len(by_instance),
                                       "identical_repeats": identical,
                                       "median_seconds": float(np.median([m["total_seconds"] for m in members])),
                                       "max_seconds": float(np.max([m["total_seconds"] for m in members])),
                                       "mean_regret_pct": float(np.mean([m["regret_pct"] for m in members
                                                                         if m["regret_pct"] is not None]))})
    summary["machine"] = {"cores": os.cpu_count(), "mean_load_during_study": float(np.mean([r["load"] for r in rows]))}
    out.write_text(json.dumps(summary, indent=1))
    columns = [k for k in rows[0] if k != "codes"]
    with out.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    plot(summary, rows, out)
    out.with_name(out.stem + "_tables.md").write_text(markdown_tables(summary))
    return summary


def _cell(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown_tables(summary: dict) -> str:
    """Markdown tables of every experiment (pasted into docs/oracle.md)."""
    lines = []
    order = ["encoding", "workers", "hint", "presolve", "cpsat_time", "local_time", "portfolio", "reference",
             "defaults", "batch"]
    for experiment in order:
        entries = [e for e in summary["configs"] if e["experiment"] == experiment]
        if not entries:
            continue
        densities = sorted({d for e in entries for d in e["by_density"]})
        lines += [f"### {experiment}", "",
                  "| config | runs | no solution | mean regret % | max regret % | best-known hits | proven optimal | "
                  "median s | p95 s | median time-to-best s | median build s | "
                  + " | ".join(f"regret % {d}" for d in densities) + " |",
                  "|---" * (11 + len(densities)) + "|"]
        for e in entries:
            per_density = [_cell(e["by_density"].get(d, {}).get("mean_regret_pct"), 3) for d in densities]
            lines.append(
                f"| {e['config']} | {e['runs']} | {e['no_solution']} | {_cell(e['mean_regret_pct'], 3)} | "
                f"{_cell(e['max_regret_pct'])} | {e['best_known_hits']} | {e['optimal_proven']} | "
                f"{_cell(e['median_seconds'])} | {_cell(e['p95_seconds'])} | {_cell(e['median_best_seconds'])} | "
                f"{_cell(e['median_build_seconds'], 3)} | " + " | ".join(per_density) + " |")
        lines.append("")
    if summary["determinism"]:
        lines += ["### determinism", "",
                  "| config | instances | identical repeats | median s | max s | mean regret % |",
                  "|---|---|---|---|---|---|"]
        for d in summary["determinism"]:
            lines.append(f"| {d['config']} | {d['instances']} | {d['identical_repeats']} | "
                         f"{_cell(d['median_seconds'])} | {_cell(d['max_seconds'])} | "
                         f"{_cell(d['mean_regret_pct'], 3)} |")
        lines.append("")
    return "\n".join(lines)


def plot(summary: dict, rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    densities = ["sparse (<=1)", "medium (1-4)", "dense (>=4)"]
    for axis, density in zip(axes, densities, strict=True):
        for experiment, label, style in (("local_time", "local search alone", "o-"),
                                         ("cpsat_time", "CP-SAT w8, local hint", "s-"),
                                         ("portfolio", "portfolio", "^")):
            points = []
            for entry in summary["configs"]:
                if entry["experiment"] != experiment or density not in entry["by_density"]:
                    continue
                if experiment == "portfolio" and " w" in entry["config"]:
                    continue
                values = entry["by_density"][density]
                if values["mean_regret_pct"] is not None:
                    points.append((values["median_seconds"], values["mean_regret_pct"]))
            if points:
                points.sort()
                axis.plot(*zip(*points, strict=True), style, label=label)
        axis.set_xscale("log")
        axis.set_title(f"{density} instances")
        axis.set_xlabel("median wall seconds per call")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("mean regret vs best known (%)")
    axes[0].legend()
    figure.tight_layout()
    figure.savefig(out.with_name(out.stem + "_time_quality.png"), dpi=110)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(8, 4.2))
    labels, regrets, medians = [], [], []
    for entry in summary["configs"]:
        if entry["experiment"] in ("encoding", "workers", "hint", "presolve"):
            labels.append(f"{entry['experiment']}:{entry['config']}")
            regrets.append(entry["mean_regret_pct"])
            medians.append(entry["median_seconds"])
    positions = np.arange(len(labels))
    axis.bar(positions, [np.nan if r is None else r for r in regrets], color="tab:blue")
    axis.set_xticks(positions, labels, rotation=60, ha="right", fontsize=8)
    axis.set_ylabel("mean regret vs best known (%)")
    twin = axis.twinx()
    twin.plot(positions, medians, "ko", label="median seconds")
    twin.set_ylabel("median wall seconds")
    axis.set_title("CP-SAT settings, 2 s limit (presolve rows: local hint)")
    figure.tight_layout()
    figure.savefig(out.with_name(out.stem + "_cpsat_settings.png"), dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/oracle_study.json"))
    parser.add_argument("--instances", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and short limits (seconds)")
    parser.add_argument("--step", choices=["capture", "study", "summary", "all"], default="all")
    args = parser.parse_args()
    directory = args.instances or (args.out.parent / "smoke_instances" if args.smoke else INSTANCES)
    rows_path = args.out.with_name(args.out.stem + "_rows.jsonl")
    if args.step in ("capture", "all"):
        capture(directory, smoke=args.smoke)
    if args.step in ("study", "all"):
        study(load_all(directory), rows_path, smoke=args.smoke)
    if args.step in ("summary", "all"):
        summary = summarise(rows_path, args.out)
        print(json.dumps({c["experiment"] + ":" + c["config"]: round(c["mean_regret_pct"] or 0, 3)
                          for c in summary["configs"]}, indent=0))


if __name__ == "__main__":
    main()
