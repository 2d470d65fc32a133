"""DualQuery paper, Figure 3: error and runtime versus the number of queries, on KDD Cup 99.

Data: KDD Cup 99 10 % (494,021 rows) with the public bucketing of ``bench/engine_data.py`` (42 attributes,
403 bits). Workload: ``Q`` random 3-way queries (``random_queries``, seed ``WORKLOAD_SEED``) for ``Q`` from
40,000 to 2,000,000, as in §6.2 of the paper.

DualQuery with the paper's fixed settings η = 1.2, T = 170, s = 1750, free attributes ``zero`` (the paper's
choice for sparse real data), default ``OracleConfig``. The paper says these settings are (1, 10⁻³)-DP "by
Theorem 4.3"; evaluating the theorems gives ε ≈ 1.86 at δ = 10⁻³ (paper mode) and ≈ 0.32 in tight mode: both
are recorded per size (``epsilon``), T is *not* recalibrated.

Every size runs in its own subprocess so that its peak RSS (``ru_maxrss``) is its own. Reported per size:
max / mean error of DualQuery and of the zeros and uniform baselines; times: loading, workload generation,
query evaluation on the true data (``answer_workload``), then the run split into sampling from ``Q^t``, oracle
(local search + CP-SAT, model build included), MW update (evaluating the record on every query + the weight
update) and other; the record evaluation alone is re-timed after the run on the same ``T`` records
(``evaluate_record``), so ``weight update ≈ MW update − record evaluation``. Oracle median / p95 per call,
CP-SAT statuses and the median relative gap ``(bound − objective) / bound`` of the rounds that ran CP-SAT.

Usage::

    .venv/bin/python bench/fig3_queries.py --out bench/results/fig3_queries.json

``--smoke``: 2,000 and 5,000 queries on the first 20,000 rows, T = 5, s = 100 (tests/bench/test_scale_smoke_fig23.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from engine_data import WORKLOAD_SEED, load_kdd99
from scale_common import (
    cpsat_calls,
    errors_against_baselines,
    machine,
    peak_rss_gb,
    run_dualquery_timed,
    save_plot,
    save_report,
)

from dq_engine.data.answers import answer_workload
from dq_engine.data.workload import random_queries
from dq_engine.mechanisms.dualquery import DualQueryConfig
from dq_engine.oracle import OracleConfig
from dq_engine.privacy.calibration import mechanism_cost
from dq_engine.privacy.rng import make_rng

SIZES = (40_000, 100_000, 250_000, 500_000, 1_000_000, 2_000_000)
ETA, ROUNDS, SAMPLES = 1.2, 170, 1750
DELTA = 1e-3


def run_one(queries: int, *, rows: int | None, seed: int, rounds: int, samples: int, oracle: OracleConfig) -> dict:
    """One size: data, workload, true answers, DualQuery with phase times, record re-timing, errors, peak RSS."""
    times = {}
    began = time.perf_counter()
    data = load_kdd99(rows)
    times["load"] = time.perf_counter() - began
    began = time.perf_counter()
    workload = random_queries(data.domain, 3, queries, make_rng(WORKLOAD_SEED))
    times["workload"] = time.perf_counter() - began
    began = time.perf_counter()
    truth = answer_workload(data, workload)
    times["query_evaluation"] = time.perf_counter() - began
    config = DualQueryConfig(eta=ETA, samples=samples, rounds=rounds, delta=DELTA, free_policy="zero", oracle=oracle,
                             track_error=False)
    records, timing = run_dualquery_timed(data, workload, truth, config, seed=seed)
    bits = data.domain.encode_records(records)
    began = time.perf_counter()
    for record in bits:
        workload.evaluate_record(record)
    times["record_evaluation_retimed"] = time.perf_counter() - began
    began = time.perf_counter()
    errors = errors_against_baselines(workload, truth, records)
    times["error_evaluation"] = time.perf_counter() - began
    costs = {m: mechanism_cost("dualquery", mode=m, delta=DELTA, eta=ETA, samples=samples, rounds=rounds, n=data.n)
             for m in ("paper", "tight")}
    phases = timing["phases"]
    return {
        "queries": len(workload), "n": data.n, "bits": data.domain.n_bits, "seed": seed, "eta": ETA,
        "samples": samples, "rounds": rounds, "delta": DELTA, "epsilon": costs, "times": times, **timing,
        "mw_round_ms": 1000 * (phases["sampling"] + phases["mw_update"]) / rounds,
        "errors": errors, "peak_rss_gb": peak_rss_gb(),
    }


def _child(args: argparse.Namespace, queries: int, out: Path) -> dict:
    command = [sys.executable, __file__, "--one", str(queries), "--seed", str(args.seed), "--rounds", str(args.rounds),
               "--samples", str(args.samples), "--one-out", str(out)]
    if args.smoke:
        command.append("--smoke")
    began = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, check=False)
    if completed.returncode != 0:
        return {"queries": queries, "failed": True, "returncode": completed.returncode,
                "stderr": completed.stderr[-2000:], "wall_seconds": time.perf_counter() - began}
    result = json.loads(out.read_text())
    result["wall_seconds"] = time.perf_counter() - began
    return result


def plot(rows: list[dict], path: Path) -> None:
    ok = [r for r in rows if not r.get("failed")]
    sizes = [r["queries"] for r in ok]

    def draw(figure):
        left, right = figure.subplots(1, 2)
        for name, style in (("dualquery", "o-"), ("zeros", "s--"), ("uniform", "^--")):
            left.plot(sizes, [r["errors"][name]["max_error"] for r in ok], style, label=f"{name} max")
        left.plot(sizes, [r["errors"]["dualquery"]["mean_error"] for r in ok], "o:", label="dualquery mean")
        left.set_xscale("log")
        left.set_xlabel("queries")
        left.set_ylabel("error")
        left.set_title("error (η 1.2, T 170, s 1750)", fontsize=9)
        left.legend(fontsize=7)
        bottom = np.zeros(len(ok))
        parts = (("query evaluation", lambda r: r["times"]["query_evaluation"]),
                 ("sampling", lambda r: r["phases"]["sampling"]), ("MW update", lambda r: r["phases"]["mw_update"]),
                 ("oracle", lambda r: r["phases"]["oracle"]),
                 ("other", lambda r: r["phases"]["other"] + r["phases"]["setup"]))
        positions = np.arange(len(ok))
        for label, value in parts:
            heights = np.array([value(r) for r in ok])
            right.bar(positions, heights, bottom=bottom, label=label)
            bottom += heights
        right.set_xticks(positions, [f"{s // 1000:,}k" for s in sizes], fontsize=7)
        right.set_xlabel("queries")
        right.set_ylabel("seconds")
        right.set_title("runtime split (one seed)", fontsize=9)
        right.legend(fontsize=7)

    save_plot(path, draw, size=(10, 3.6))


CSV_FIELDS = ("queries", "seed", "n", "eta", "samples", "rounds", "epsilon_paper", "epsilon_tight", "dq_max", "dq_mean",
              "zeros_max", "zeros_mean", "uniform_max", "uniform_mean", "load_s", "workload_s", "query_eval_s",
              "run_s", "sampling_s", "mw_update_s", "record_eval_retimed_s", "oracle_s", "oracle_local_s",
              "oracle_cpsat_s", "other_s", "mw_round_ms", "oracle_median_s", "oracle_p95_s", "oracle_median_gap",
              "oracle_max_gap", "cpsat_calls", "peak_rss_gb", "load_average_end", "failed")


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in rows:
            if r.get("failed"):
                writer.writerow({"queries": r["queries"], "failed": True})
                continue
            e, p, o = r["errors"], r["phases"], r["oracle"]
            writer.writerow({
                "queries": r["queries"], "seed": r["seed"], "n": r["n"], "eta": r["eta"], "samples": r["samples"],
                "rounds": r["rounds"], "epsilon_paper": r["epsilon"]["paper"], "epsilon_tight": r["epsilon"]["tight"],
                "dq_max": e["dualquery"]["max_error"], "dq_mean": e["dualquery"]["mean_error"],
                "zeros_max": e["zeros"]["max_error"], "zeros_mean": e["zeros"]["mean_error"],
                "uniform_max": e["uniform"]["max_error"], "uniform_mean": e["uniform"]["mean_error"],
                "load_s": r["times"]["load"], "workload_s": r["times"]["workload"],
                "query_eval_s": r["times"]["query_evaluation"], "run_s": p["total"], "sampling_s": p["sampling"],
                "mw_update_s": p["mw_update"], "record_eval_retimed_s": r["times"]["record_evaluation_retimed"],
                "oracle_s": p["oracle"], "oracle_local_s": o["local_search_seconds"],
                "oracle_cpsat_s": o["cpsat_seconds"], "other_s": p["other"] + p["setup"],
                "mw_round_ms": r["mw_round_ms"], "oracle_median_s": o["median_seconds"],
                "oracle_p95_s": o["p95_seconds"], "oracle_median_gap": o["median_gap"], "oracle_max_gap": o["max_gap"],
                "cpsat_calls": cpsat_calls(o), "peak_rss_gb": r["peak_rss_gb"],
                "load_average_end": r.get("load_average_end"), "failed": False,
            })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/fig3_queries.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    parser.add_argument("--replot", action="store_true", help="only rewrite the CSV and PNG from the JSON in --out")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--one-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replot:
        rows = json.loads(args.out.read_text())["rows"]
        write_csv(rows, args.out.with_suffix(".csv"))
        plot(rows, args.out.with_suffix(".png"))
        return
    if args.smoke:
        args.sizes, args.rounds, args.samples = "2000,5000", 5, 100
    oracle = OracleConfig(time_limit=0.2, local_time_limit=0.05) if args.smoke else OracleConfig()
    if args.one is not None:
        result = run_one(args.one, rows=20_000 if args.smoke else None, seed=args.seed, rounds=args.rounds,
                         samples=args.samples, oracle=oracle)
        result["load_average_end"] = os.getloadavg()
        args.one_out.write_text(json.dumps(result, default=float))
        return
    report = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(), "smoke": args.smoke,
              "eta": ETA, "rounds": args.rounds, "samples": args.samples, "delta": DELTA, "free_policy": "zero",
              "oracle": "OracleConfig() defaults" if not args.smoke else "smoke", "rows": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    scratch = args.out.with_suffix(".part.json")
    for queries in (int(s) for s in args.sizes.split(",")):
        row = _child(args, queries, scratch)
        report["rows"].append(row)
        if row.get("failed"):
            print(f"Q={queries}: FAILED ({row['returncode']}) {row['stderr'][-300:]}", flush=True)
            continue
        e, p = row["errors"], row["phases"]
        print(f"Q={queries:>9,} max {e['dualquery']['max_error']:.4f} (zeros {e['zeros']['max_error']:.4f}) "
              f"mean {e['dualquery']['mean_error']:.5f} answers {row['times']['query_evaluation']:.2f} s "
              f"run {p['total']:.1f} s (sample {p['sampling']:.2f}, MW {p['mw_update']:.2f}, oracle {p['oracle']:.1f}) "
              f"MW round {row['mw_round_ms']:.1f} ms peak {row['peak_rss_gb']:.2f} GB", flush=True)
        args.out.write_text(json.dumps(report, indent=1, default=float))  # partial results survive a crash
    scratch.unlink(missing_ok=True)
    save_report(report, args.out, write_csv=write_csv, plot=plot)


if __name__ == "__main__":
    main()
