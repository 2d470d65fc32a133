"""DualQuery paper, Figure 2: max error versus ε on Adult and KDD99, paper-mode and tight-mode accounting.

Data (``bench/engine_data.py``): Adult as the private-pgm codes (48,842 rows, 14 attributes, 588 bits; the
paper's own 30,162-row binarisation into 235 bits was done by OCaml code that is not public, see
``adult_dualquery/SOURCE.md`` in the shared data directory (DQRELEASE_DATA or ../shared/data)) and KDD Cup 99
10 % (494,021 rows, 403 bits, public bucketing).

Workload: 500,000 random 3-way queries per dataset (``random_queries``, seed ``WORKLOAD_SEED``), the size of
§6.1 ("500,000 3-way marginals").

DualQuery with the paper's public rule for Adult and KDD99 (§6.1): η = 2.0, s = 1000, free attributes
``zero``, and T the largest number of rounds whose cost is at most (ε, 10⁻³) for ε ∈ {0.25, 0.5, 1, 2, 3, 5}
(:func:`dq_engine.privacy.calibration.calibrate_rounds`), once with the paper's accounting (Theorems 4.2/4.3, as the
paper did) and once with tight accounting: the same algorithm, more rounds for the same ε. The cost of every run
in both modes is recorded.

Oracle: ``OracleConfig(time_limit=0.25, local_time_limit=0.1)`` (CP-SAT capped at 0.25 s per call instead of
the default 1 s, local search at 0.1 s instead of 0.25 s) so that the 24 runs (≈ 3,700 oracle calls) fit in
about half an hour on 2 shared cores. One seed per point (the paper averaged 5 runs).

Reported per run: max / mean error of DualQuery and of the zeros and uniform baselines, T, ε in both modes,
run time split (sampling, oracle, MW update, other), oracle median / p95 per call and median gap of the
rounds that ran CP-SAT.

Usage::

    .venv/bin/python bench/fig2_accuracy.py --out bench/results/fig2_accuracy.json

``--smoke``: 2,000 queries, KDD99 first 5,000 rows, ε = 0.25 only, oracle capped at 0.02 s local search + 0.1 s
CP-SAT (tests/bench/test_scale_smoke_fig23.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from engine_data import WORKLOAD_SEED, load_adult, load_kdd99
from scale_common import cpsat_calls, errors_against_baselines, machine, peak_rss_gb, run_dualquery_timed, save_plot

from dq_engine.data.answers import answer_workload
from dq_engine.data.workload import random_queries
from dq_engine.mechanisms.dualquery import DualQueryConfig
from dq_engine.oracle import OracleConfig
from dq_engine.privacy.calibration import calibrate_rounds, mechanism_cost
from dq_engine.privacy.rng import make_rng

EPSILONS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
MODES = ("paper", "tight")
ETA, SAMPLES, DELTA = 2.0, 1000, 1e-3
QUERIES = 500_000
ORACLE = OracleConfig(time_limit=0.25, local_time_limit=0.1)


def run_dataset(name: str, *, queries: int, epsilons: tuple[float, ...], samples: int, seed: int,
                oracle: OracleConfig, rows: int | None, report: dict, save) -> None:
    """All (ε, mode) runs on one dataset; appends a row to ``report["rows"]`` and calls ``save()`` after each."""
    began = time.perf_counter()
    data = load_adult() if name == "adult" else load_kdd99(rows)
    load_seconds = time.perf_counter() - began
    began = time.perf_counter()
    workload = random_queries(data.domain, 3, queries, make_rng(WORKLOAD_SEED))
    workload_seconds = time.perf_counter() - began
    began = time.perf_counter()
    truth = answer_workload(data, workload)
    answer_seconds = time.perf_counter() - began
    report["datasets"][name] = {"n": data.n, "attributes": len(data.domain), "bits": data.domain.n_bits,
                                "queries": len(workload), "load_seconds": load_seconds,
                                "workload_seconds": workload_seconds, "query_evaluation_seconds": answer_seconds}
    for epsilon in epsilons:
        for mode in MODES:
            rounds = calibrate_rounds("dualquery", epsilon=epsilon, delta=DELTA, eta=ETA, samples=samples, n=data.n,
                                      mode=mode)
            config = DualQueryConfig(eta=ETA, samples=samples, rounds=rounds, delta=DELTA, free_policy="zero",
                                     oracle=oracle, track_error=False)
            began = time.perf_counter()
            records, timing = run_dualquery_timed(data, workload, truth, config, seed=seed)
            wall = time.perf_counter() - began
            errors = errors_against_baselines(workload, truth, records)
            costs = {m: mechanism_cost("dualquery", mode=m, delta=DELTA, eta=ETA, samples=samples, rounds=rounds,
                                       n=data.n) for m in MODES}
            row = {"dataset": name, "target_epsilon": epsilon, "accounting": mode, "rounds": rounds,
                   "samples": samples, "eta": ETA, "seed": seed, "epsilon": costs, "wall_seconds": wall, **timing,
                   "errors": errors, "peak_rss_gb": peak_rss_gb(), "load_average": os.getloadavg()}
            report["rows"].append(row)
            save()
            print(f"{name:<5} ε={epsilon:<4} {mode:<5} T={rounds:>4} max {errors['dualquery']['max_error']:.4f} "
                  f"(zeros {errors['zeros']['max_error']:.4f}) mean {errors['dualquery']['mean_error']:.5f} "
                  f"{wall:.0f} s (oracle median {timing['oracle']['median_seconds']:.2f} s)", flush=True)


def plot(report: dict, path: Path) -> None:
    names = list(report["datasets"])

    def draw(figure):
        axes = figure.subplots(1, len(names), squeeze=False)[0]
        for axis, name in zip(axes, names, strict=True):
            rows = [r for r in report["rows"] if r["dataset"] == name]
            for mode, style in (("paper", "o-"), ("tight", "s-")):
                mine = sorted((r for r in rows if r["accounting"] == mode), key=lambda r: r["target_epsilon"])
                axis.plot([r["target_epsilon"] for r in mine], [r["errors"]["dualquery"]["max_error"] for r in mine],
                          style, label=f"DualQuery, {mode} accounting")
            if rows:
                for baseline, style in (("zeros", ":"), ("uniform", "--")):
                    axis.axhline(rows[0]["errors"][baseline]["max_error"], linestyle=style, color="grey",
                                 label=baseline)
            info = report["datasets"][name]
            axis.set_title(f"{name}: {info['queries']:,} random 3-way queries, n = {info['n']:,}", fontsize=9)
            axis.set_xlabel("ε (δ = 10⁻³)")
            axis.set_ylabel("max error")
            axis.set_ylim(bottom=0)
            axis.legend(fontsize=7)

    save_plot(path, draw, size=(10, 3.6))


CSV_FIELDS = ("dataset", "target_epsilon", "accounting", "rounds", "epsilon_paper", "epsilon_tight", "dq_max",
              "dq_mean", "zeros_max", "uniform_max", "run_s", "sampling_s", "oracle_s", "mw_update_s", "other_s",
              "oracle_median_s", "oracle_p95_s", "oracle_median_gap", "cpsat_calls", "load_average_1min")


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in rows:
            e, p, o = r["errors"], r["phases"], r["oracle"]
            writer.writerow({
                "dataset": r["dataset"], "target_epsilon": r["target_epsilon"], "accounting": r["accounting"],
                "rounds": r["rounds"], "epsilon_paper": r["epsilon"]["paper"], "epsilon_tight": r["epsilon"]["tight"],
                "dq_max": e["dualquery"]["max_error"], "dq_mean": e["dualquery"]["mean_error"],
                "zeros_max": e["zeros"]["max_error"], "uniform_max": e["uniform"]["max_error"], "run_s": p["total"],
                "sampling_s": p["sampling"], "oracle_s": p["oracle"], "mw_update_s": p["mw_update"],
                "other_s": p["other"] + p["setup"], "oracle_median_s": o["median_seconds"],
                "oracle_p95_s": o["p95_seconds"], "oracle_median_gap": o["median_gap"], "cpsat_calls": cpsat_calls(o),
                "load_average_1min": r["load_average"][0],
            })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/fig2_accuracy.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    parser.add_argument("--replot", action="store_true", help="only rewrite the CSV and PNG from the JSON in --out")
    parser.add_argument("--datasets", default="adult,kdd99")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.replot:
        report = json.loads(args.out.read_text())
        write_csv(report["rows"], args.out.with_suffix(".csv"))
        plot(report, args.out.with_suffix(".png"))
        return
    samples, oracle, rows = SAMPLES, ORACLE, None
    if args.smoke:
        args.queries, args.epsilons = 2_000, "0.25"
        oracle, rows = OracleConfig(time_limit=0.1, local_time_limit=0.02), 5_000
    report = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(), "smoke": args.smoke,
              "eta": ETA, "samples": samples, "delta": DELTA, "free_policy": "zero",
              "oracle": {"time_limit": oracle.time_limit, "local_time_limit": oracle.local_time_limit,
                         "num_workers": oracle.num_workers}, "datasets": {}, "rows": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=1, default=float))

    epsilons = tuple(float(e) for e in args.epsilons.split(","))
    for name in args.datasets.split(","):
        run_dataset(name, queries=args.queries, epsilons=epsilons, samples=samples, seed=args.seed, oracle=oracle,
                    rows=rows, report=report, save=save)
    report["machine"]["load_average_end"] = os.getloadavg()
    save()
    write_csv(report["rows"], args.out.with_suffix(".csv"))
    plot(report, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
