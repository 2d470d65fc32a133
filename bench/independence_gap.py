"""How far a table of independent columns is from the truth when its noise vanishes: the forecast's ``g`` (issue 25).

The forecast of independent columns (:func:`dq_engine.evaluation.forecast.independent_forecast`) puts their workload
max at ``hypot(noise, g)``: ``g`` is the dependence the table does not publish, which only the data knows, so the
forecast uses one calibrated value, :data:`~dq_engine.evaluation.forecast.INDEPENDENCE_GAP`. This script measures
``g`` per table, so that the constant can be chosen on some tables and checked on others.

Per table (the benchmark settings of ``bench/fidelity.py`` and five bnlearn networks, each with the default
workload: all 1-way, all 2-way and 64 random 3-way marginals, seed 0; ADULT-64: 64 random 3-way marginals):

* ``exact_product``: the workload max error of the exact product of the table's own one-way marginals (no noise, no
  sampling, no rules): ``max |true answer - Π p_a(v_a)|`` over the workload's queries;
* ``mechanism``: the workload max error of the rows the registry's ``independent`` mechanism publishes at ε = 10,000
  (noise about 1/100 of ε = 1's; 5 seeds, the median and range), planned and run as ``bench/fidelity.py`` runs it:
  the schema's rules kept (rule components raked to the noisy one-way marginals, rows that break a rule redrawn),
  n rows published. This is what the forecast's ``g`` stands for: the mechanism's error with the noise gone.

Tables: ``adult`` (shipped, with its rules), ``adult-pgm``, ``adult-pgm-64`` and ``kdd99`` (with its rules) are the
tables the constant was first calibrated on; the bnlearn networks ``alarm``, ``child``, ``hailfinder``, ``hepar2``
and ``insurance`` (50,000 rows forward-sampled with the public seed of ``bench/bnlearn.py``; no rules) were never
used to choose it.

Usage (shared data needed; about a minute per table)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/independence_gap.py \
        --out bench/results/independence_gap.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fidelity import SETTINGS, bnlearn_setting, run_ours  # noqa: E402
from bench.scale_common import machine, save_json_and_markdown  # noqa: E402
from dq_engine.data.workload import Workload  # noqa: E402
from dq_engine.evaluation.fidelity import fidelity_reference  # noqa: E402

NETWORKS = ("alarm", "child", "hailfinder", "hepar2", "insurance")
"""The bnlearn networks of the shared data folder (out of sample: none was used to choose the constant)."""

CALIBRATION = ("adult", "adult-pgm", "adult-pgm-64", "kdd99")
"""The tables of bench/fidelity.py, on which the constant is chosen."""

NETWORK_ROWS = 50_000
EPSILON = 1e4
SEEDS = (0, 1, 2, 3, 4)


def product_answers(workload: Workload, one_way: list[np.ndarray]) -> np.ndarray:
    """Every workload query's answer under the product of the one-way marginals ``one_way`` (fractions)."""
    attributes = workload.marginals[workload.query_marginal]
    answers = np.ones(len(workload))
    for position in range(attributes.shape[1]):
        used = attributes[:, position] >= 0
        for a in np.unique(attributes[used, position]):
            rows = used & (attributes[:, position] == a)
            answers[rows] *= one_way[a][workload.query_values[rows, position]]
    return answers


def measure(name: str, loaded, seeds: tuple[int, ...]) -> dict:
    """``exact_product`` and the mechanism's workload max at a vanishing noise for one table."""
    reference = fidelity_reference(loaded.data, workload=loaded.workload)
    m = len(loaded.data.domain)
    product = product_answers(loaded.workload, [np.asarray(t, dtype=np.float64) for t in reference.tables[:m]])
    exact = float(np.abs(reference.answers - product).max())
    runs = []
    for seed in seeds:
        began = time.perf_counter()
        row = run_ours("independent", loaded, reference, EPSILON, seed, smoke=False)
        if row["status"] != "ok":
            raise SystemExit(f"{name}: the independent mechanism was {row['status']}: {row.get('note')}")
        runs.append({"seed": seed, "workload_max_error": row["workload_max_error"],
                     "violating_rows": row["violating_rows"], "seconds": round(time.perf_counter() - began, 2)})
    values = [r["workload_max_error"] for r in runs]
    return {"table": name, "description": loaded.description, "n": loaded.data.n, "columns": m,
            "queries": len(loaded.workload), "rules": 0 if loaded.constraints is None else len(loaded.constraints),
            "calibration": name in CALIBRATION, "exact_product": round(exact, 5),
            "mechanism_median": round(statistics.median(values), 5),
            "mechanism_range": [round(min(values), 5), round(max(values), 5)], "runs": runs}


def markdown(report: dict) -> str:
    """The table of ``g`` per table, and the constant's ratio to each."""
    g = report["constant"]
    lines = [f"Independent columns at ε = {EPSILON:g} (noise about 1/100 of ε = 1's), workload max error; "
             f"{len(report['seeds'])} seeds, median (range). Load {report['load_before']} → {report['load_after']}.",
             "", f"Constant g = {g:g}; ratio = g / mechanism median (the forecast's error when the noise vanishes).",
             "", "| table | chosen on it | rules | exact product, no rules | independent mechanism (rules kept) | "
             "ratio g / median | within 2× |", "|---|---|---:|---:|---:|---:|---|"]
    for entry in report["tables"]:
        low, high = entry["mechanism_range"]
        ratio = g / entry["mechanism_median"]
        lines.append(f"| {entry['table']} | {'yes' if entry['calibration'] else 'no'} | {entry['rules']} | "
                     f"{entry['exact_product']:.3f} | {entry['mechanism_median']:.3f} ({low:.3f}–{high:.3f}) | "
                     f"{ratio:.2f} | {'yes' if 0.5 <= ratio <= 2 else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "independence_gap.json")
    parser.add_argument("--tables", nargs="+", default=[*CALIBRATION, *NETWORKS],
                        choices=[*CALIBRATION, *NETWORKS])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    args = parser.parse_args()
    from dq_engine.evaluation.forecast import INDEPENDENCE_GAP

    report: dict = {"command": " ".join(["bench/independence_gap.py", *sys.argv[1:]]), "machine": machine(),
                    "epsilon": EPSILON, "seeds": args.seeds, "constant": INDEPENDENCE_GAP,
                    "load_before": round(os.getloadavg()[0], 2), "tables": []}
    for name in args.tables:
        loaded = (SETTINGS[name].load(False) if name in CALIBRATION
                  else bnlearn_setting(name, NETWORK_ROWS)(False))
        entry = measure(name, loaded, tuple(args.seeds))
        report["tables"].append(entry)
        print(f"{name}: exact product {entry['exact_product']:.4f}, mechanism {entry['mechanism_median']:.4f} "
              f"{entry['mechanism_range']}", flush=True)
    report["load_after"] = round(os.getloadavg()[0], 2)
    save_json_and_markdown(args.out, report, markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
