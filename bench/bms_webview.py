"""Real sparse high-dimensional data: DualQuery on BMS-WebView-1 (497 items) and BMS-WebView-2 (3,340 items).

Data: the folder ``bms_webview`` of the shared data directory (DQRELEASE_DATA or ../shared/data; see its
SOURCE.md), one basket per line (FIMI format). Every basket is a record, every item a natively binary attribute
(1 = the session viewed that page). Item ids are mapped to columns in increasing id order; the item universe is
the set of ids in the file (documented in SOURCE.md). Records are held as a sparse CSC bit matrix
(:meth:`dq_engine.Dataset.from_sparse`), built straight from the basket lists (no dense ``n × d`` array is ever
made): 149,639 and 358,278 ones.

Workload: 100,000, 300,000 and 1,000,000 random 3-way queries (``random_queries``: positive conjunctions
``x_a ∧ x_b ∧ x_c`` of distinct items, seeded), the same seed for every size.

DualQuery with the DualQuery paper's rule for sparse real data (§6, "Setting free attributes" and the parameter
discussion): η = 2.0, free attributes set to 0, s of the order of the number of attributes: s = 1,000 for
BMS-WebView-1 and s = 5,000 (the paper's Netflix choice) for BMS-WebView-2; T = the largest number of rounds
with (ε, δ) = (1, 10⁻³) in the chosen accounting (tight by default), default ``OracleConfig``.

Every run (data set × query count) is its own subprocess, so its peak RSS (``ru_maxrss``) is its own. Reported
per run: max / mean / RMSE error of DualQuery and of the zeros and uniform baselines and their ratios, the
mean true answer and the share of queries with a non-zero answer, times (load, workload, query evaluation,
the DualQuery run split into sampling, oracle, MW update and other), oracle median / p95 per call and the
CP-SAT optimality gap ``(bound − objective) / max(1, |bound|)`` over rounds that report a bound, peak RSS.

``--pipeline`` also runs BMS-WebView-1 with 100,000 queries through ``dqrelease run`` with a
``format = "transactions"`` source (schema: one binary column per item id, generated into the scratch
directory) and records its wall time, peak RSS and the error report of the release.

Usage::

    .venv/bin/python bench/bms_webview.py --out bench/results/bms_webview.json [--pipeline]

``--smoke``: the first 3,000 baskets of BMS-WebView-1, 2,000 queries, s = 50, capped rounds (seconds; run by
tests/bench/test_scale_smoke.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).parent))

from scale_common import (
    errors_against_baselines,
    machine,
    peak_rss_gb,
    public_text,
    run_dualquery_timed,
    save_plot,
    save_report,
)

from dq_engine.data.answers import answer_workload
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.workload import random_queries
from dq_engine.mechanisms.dualquery import DualQueryConfig
from dq_engine.oracle import OracleConfig
from dq_engine.privacy.calibration import calibrate_rounds, mechanism_cost
from dq_engine.privacy.rng import make_rng
from dqrelease.inputs.data_home import require_shared_data_dir

ROOT = Path(__file__).resolve().parents[1]
FILES = {"bms1": "bms_webview/BMS-WebView-1.dat", "bms2": "bms_webview/BMS-WebView-2.dat"}
"""Basket files, relative to the shared data directory (:func:`basket_file`)."""
SAMPLES = {"bms1": 1_000, "bms2": 5_000}
QUERY_COUNTS = (100_000, 300_000, 1_000_000)
ETA = 2.0
EPSILON, DELTA = 1.0, 1e-3
WORKLOAD_SEED = 5_000


def read_baskets(path: Path, *, limit: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Baskets of a FIMI file as CSR parts: ``(item ids sorted, row pointers, column indices)``.

    A repeated item within a basket counts once; blank lines are not baskets (as ``dqrelease`` ingestion).
    """
    items: list[np.ndarray] = []
    with path.open() as handle:
        for line in handle:
            fields = line.split()
            if fields:
                items.append(np.unique(np.array(fields, dtype=np.int64)))
                if limit is not None and len(items) == limit:
                    break
    lengths = np.fromiter((len(b) for b in items), dtype=np.int64, count=len(items))
    flat = np.concatenate(items)
    universe, columns = np.unique(flat, return_inverse=True)
    pointers = np.concatenate([[0], np.cumsum(lengths)])
    return universe, pointers, columns.astype(np.int32)


def basket_file(name: str) -> Path:
    """The basket file of data set ``name`` (``bms1`` or ``bms2``) in the shared data directory."""
    return require_shared_data_dir() / FILES[name]


def load_bms(name: str, *, limit: int | None = None) -> tuple[Dataset, np.ndarray]:
    """BMS-WebView data set as a sparse binary :class:`Dataset` (one attribute per item) and its item ids."""
    universe, pointers, columns = read_baskets(basket_file(name), limit=limit)
    matrix = sp.csr_array(
        (np.ones(len(columns), dtype=np.bool_), columns, pointers), shape=(len(pointers) - 1, len(universe))
    )
    domain = Domain.binary([str(item) for item in universe])
    return Dataset.from_sparse(domain, matrix), universe


def run_one(name: str, queries: int, *, seed: int, mode: str, oracle: OracleConfig, smoke: bool) -> dict:
    """One data set and query count: load, workload, true answers, DualQuery with phase times, errors."""
    times = {}
    began = time.perf_counter()
    data, _ = load_bms(name, limit=3_000 if smoke else None)
    times["load"] = time.perf_counter() - began
    d = len(data.domain)
    began = time.perf_counter()
    count = min(queries, math.comb(d, 3))
    workload = random_queries(data.domain, 3, count, make_rng(WORKLOAD_SEED))
    times["workload"] = time.perf_counter() - began
    began = time.perf_counter()
    truth = answer_workload(data, workload)
    times["query_evaluation"] = time.perf_counter() - began
    samples = 50 if smoke else SAMPLES[name]
    rounds = calibrate_rounds("dualquery", epsilon=EPSILON, delta=DELTA, eta=ETA, samples=samples, n=data.n, mode=mode)
    if smoke:
        rounds = min(rounds, 5)
    config = DualQueryConfig(
        eta=ETA, samples=samples, rounds=rounds, delta=DELTA, free_policy="zero", oracle=oracle, track_error=False
    )
    records, timing = run_dualquery_timed(data, workload, truth, config, seed=seed)
    began = time.perf_counter()
    errors = errors_against_baselines(workload, truth, records)
    times["error_evaluation"] = time.perf_counter() - began
    costs = {
        m: mechanism_cost("dualquery", mode=m, delta=DELTA, eta=ETA, samples=samples, rounds=rounds, n=data.n)
        for m in ("paper", "tight")
    }
    return {
        "dataset": name,
        "n": data.n,
        "attributes": d,
        "ones": int(data.bits.nnz),
        "queries": count,
        "mean_true_answer": float(truth.mean()),
        "max_true_answer": float(truth.max()),
        "nonzero_share": float(np.mean(truth > 0)),
        "seed": seed,
        "samples": samples,
        "rounds": rounds,
        "eta": ETA,
        "accounting": mode,
        "epsilon": costs,
        "delta": DELTA,
        "times": times,
        **timing,
        "errors": errors,
        "peak_rss_gb": peak_rss_gb(),
    }


def _child(args: argparse.Namespace, name: str, queries: int, seed: int, out: Path) -> dict:
    command = [sys.executable, __file__, "--one", name, "--one-queries", str(queries), "--seed", str(seed),
               "--accounting", args.accounting, "--one-out", str(out)]
    if args.smoke:
        command.append("--smoke")
    began = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"dataset": name, "queries": queries, "seed": seed, "failed": True, "returncode": None,
                "stderr": f"timed out after {args.timeout} s", "wall_seconds": time.perf_counter() - began}
    if completed.returncode != 0:
        return {"dataset": name, "queries": queries, "seed": seed, "failed": True,
                "returncode": completed.returncode, "stderr": completed.stderr[-2000:],
                "wall_seconds": time.perf_counter() - began}
    result = json.loads(out.read_text())
    result["wall_seconds"] = time.perf_counter() - began
    return result


# ---------------------------------------------------------------------- the same release through the pipeline
def write_pipeline_config(work: Path, *, name: str, queries: int, universe: np.ndarray, n: int) -> Path:
    """Schema (one binary column per item id) and release config with a ``transactions`` source."""
    schema = ["# BMS-WebView item universe: one binary column per item id (bench/bms_webview.py)."]
    schema += [f'[[columns]]\nname = "{item}"\ntype = "binary"\n' for item in universe]
    (work / "schema.toml").write_text("\n".join(schema))
    config = f"""name = "{name}-bench"
description = "Bench: {name}, {queries:,} random 3-way queries, DualQuery (eta {ETA}, s {SAMPLES[name]})."
schema_file = "{work / 'schema.toml'}"

[source]
format = "transactions"
paths = ["{basket_file(name)}"]

[privacy]
n = {n}
epsilon = {EPSILON}
delta = {DELTA}
accounting = "tight"

[workload]
kind = "random_queries"
k = 3
count = {queries}
seed = 0

[mechanism]
name = "dualquery"
eta = {ETA}
samples = {SAMPLES[name]}
free_policy = "zero"

[mechanism.oracle]
time_limit = 1.0
num_workers = 3
max_presolve_iterations = 0
local_time_limit = 0.25
local_restarts = 300

[ledger]
path = "{work / 'ledger.duckdb'}"
dataset_id = "{name}-bench"
initial_cap_epsilon = 1000.0
initial_cap_delta = 0.5

[output]
directory = "{work / 'out'}"
formats = ["parquet"]
"""
    path = work / "release.toml"
    path.write_text(config)
    return path


def run_pipeline(args: argparse.Namespace, *, name: str = "bms1", queries: int = 100_000) -> dict:
    """``dqrelease run`` on the transactions file: wall time, peak RSS (process tree), the release's errors."""
    from scale_common import TreeMemory

    work = Path(tempfile.gettempdir()) / "dqrelease-bms-bench" / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    universe, pointers, _ = read_baskets(basket_file(name))
    config = write_pipeline_config(work, name=name, queries=queries, universe=universe, n=len(pointers) - 1)
    command = [str(ROOT / ".venv" / "bin" / "dqrelease"), "run", "--quiet", str(config)]
    began = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    memory = TreeMemory(child.pid)
    try:
        output, _ = child.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        output, _ = child.communicate()
    wall = time.perf_counter() - began
    memory.stop()
    result = {"dataset": name, "queries": queries, "command": public_text(" ".join(command)),
              "returncode": child.returncode, "wall_seconds": wall, "peak_rss_main_gb": memory.peak_main / 2**30,
              "peak_rss_tree_gb": memory.peak_tree / 2**30, "config": public_text(config.read_text()),
              "log_tail": public_text(output[-3000:])}
    reports = sorted((work / "out").rglob("error_report.json"))
    if reports:
        report = json.loads(reports[-1].read_text())
        result["errors"] = report["errors"]
        result["parameters"] = report["parameters"]
        result["privacy"] = report["privacy"]
    return result


# ---------------------------------------------------------------------- outputs
def plot(rows: list[dict], path: Path) -> None:
    ok = [r for r in rows if not r.get("failed")]

    def draw(figure):
        left, middle, right = figure.subplots(1, 3)
        for name, marker in (("bms1", "o"), ("bms2", "s")):
            mine = sorted((r for r in ok if r["dataset"] == name), key=lambda r: r["queries"])
            if not mine:
                continue
            sizes = [r["queries"] for r in mine]
            for method, style in (("dualquery", "-"), ("zeros", "--"), ("uniform", ":")):
                left.plot(sizes, [r["errors"][method]["mean_error"] for r in mine], marker + style,
                          label=f"{name} {method}")
                middle.plot(sizes, [r["errors"][method]["max_error"] for r in mine], marker + style,
                            label=f"{name} {method}")
            right.plot(sizes, [r["phases"]["total"] for r in mine], marker + "-", label=f"{name} DualQuery run")
            right.plot(sizes, [r["times"]["query_evaluation"] for r in mine], marker + "--",
                       label=f"{name} query evaluation")
        for axis, title in ((left, "average error"), (middle, "max error"), (right, "seconds")):
            axis.set_xscale("log")
            axis.set_xlabel("queries")
            axis.set_title(title, fontsize=9)
        left.set_yscale("log")
        left.legend(fontsize=6)
        right.legend(fontsize=6)

    save_plot(path, draw, size=(11, 3.6))


def write_csv(rows: list[dict], path: Path) -> None:
    fields = ["dataset", "n", "attributes", "queries", "samples", "rounds", "epsilon_tight", "epsilon_paper",
              "mean_true_answer", "nonzero_share", "dq_mean", "dq_max", "zeros_mean", "zeros_max", "uniform_mean",
              "uniform_max", "ratio_zeros_mean", "ratio_uniform_mean", "ratio_zeros_max", "ratio_uniform_max",
              "load_s", "workload_s", "query_eval_s", "run_s", "sampling_s", "oracle_s", "mw_update_s", "other_s",
              "oracle_median_s", "oracle_p95_s", "oracle_median_gap", "oracle_max_gap", "peak_rss_gb", "failed"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            if r.get("failed"):
                writer.writerow({"dataset": r["dataset"], "queries": r["queries"], "failed": True})
                continue
            e, p, o = r["errors"], r["phases"], r["oracle"]
            writer.writerow({
                "dataset": r["dataset"], "n": r["n"], "attributes": r["attributes"], "queries": r["queries"],
                "samples": r["samples"], "rounds": r["rounds"], "epsilon_tight": r["epsilon"]["tight"],
                "epsilon_paper": r["epsilon"]["paper"], "mean_true_answer": r["mean_true_answer"],
                "nonzero_share": r["nonzero_share"],
                "dq_mean": e["dualquery"]["mean_error"], "dq_max": e["dualquery"]["max_error"],
                "zeros_mean": e["zeros"]["mean_error"], "zeros_max": e["zeros"]["max_error"],
                "uniform_mean": e["uniform"]["mean_error"], "uniform_max": e["uniform"]["max_error"],
                "ratio_zeros_mean": e["zeros"]["mean_error"] / e["dualquery"]["mean_error"],
                "ratio_uniform_mean": e["uniform"]["mean_error"] / e["dualquery"]["mean_error"],
                "ratio_zeros_max": e["zeros"]["max_error"] / e["dualquery"]["max_error"],
                "ratio_uniform_max": e["uniform"]["max_error"] / e["dualquery"]["max_error"],
                "load_s": r["times"]["load"], "workload_s": r["times"]["workload"],
                "query_eval_s": r["times"]["query_evaluation"], "run_s": p["total"], "sampling_s": p["sampling"],
                "oracle_s": p["oracle"], "mw_update_s": p["mw_update"], "other_s": p["other"],
                "oracle_median_s": o["median_seconds"], "oracle_p95_s": o["p95_seconds"],
                "oracle_median_gap": o["median_gap"], "oracle_max_gap": o["max_gap"],
                "peak_rss_gb": r["peak_rss_gb"], "failed": False,
            })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/bms_webview.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    parser.add_argument("--datasets", default="bms1,bms2")
    parser.add_argument("--queries", default=",".join(str(q) for q in QUERY_COUNTS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--accounting", choices=("tight", "paper"), default="tight")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--pipeline", action="store_true", help="also run BMS-WebView-1, 100,000 queries, via the CLI")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--one-queries", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--one-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    oracle = OracleConfig(time_limit=0.2, local_time_limit=0.05) if args.smoke else OracleConfig()
    if args.one is not None:
        result = run_one(args.one, args.one_queries, seed=args.seed, mode=args.accounting, oracle=oracle,
                         smoke=args.smoke)
        args.one_out.write_text(json.dumps(result, default=float))
        return
    if args.smoke:
        args.datasets, args.queries = "bms1", "2000"
    report = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(), "smoke": args.smoke,
              "eta": ETA, "samples": SAMPLES, "epsilon": EPSILON, "delta": DELTA, "accounting": args.accounting,
              "free_policy": "zero", "rows": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scratch = args.out.with_suffix(".part.json")
    for name in args.datasets.split(","):
        for queries in (int(q) for q in args.queries.split(",")):
            for seed in range(args.seeds):
                row = _child(args, name, queries, seed, scratch)
                report["rows"].append(row)
                if row.get("failed"):
                    print(f"{name} q={queries} seed={seed}: FAILED {row['stderr'][-300:]}", flush=True)
                    continue
                e = row["errors"]
                print(f"{name} q={queries:>8} s={row['samples']} T={row['rounds']} mean "
                      f"{e['dualquery']['mean_error']:.2e} (zeros {e['zeros']['mean_error']:.2e}, "
                      f"uniform {e['uniform']['mean_error']:.2e}) max "
                      f"{e['dualquery']['max_error']:.4f} (zeros {e['zeros']['max_error']:.4f}) run "
                      f"{row['phases']['total']:.1f} s answers {row['times']['query_evaluation']:.2f} s "
                      f"peak {row['peak_rss_gb']:.2f} GB", flush=True)
                args.out.write_text(json.dumps(report, indent=1, default=float))
    scratch.unlink(missing_ok=True)
    if args.pipeline:
        report["pipeline"] = run_pipeline(args)
        print({k: report["pipeline"].get(k) for k in ("returncode", "wall_seconds", "peak_rss_main_gb", "errors")},
              flush=True)
    save_report(report, args.out, write_csv=write_csv, plot=plot)


if __name__ == "__main__":
    main()
