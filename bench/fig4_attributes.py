"""DualQuery paper, Figure 4: error and runtime versus the number of attributes, on synthetic binary data.

Data as in the paper (§6.3): each attribute ``i`` gets a bias ``p_i`` uniform on [0, 1] (on the grid of
multiples of 2⁻¹⁶: ``p_i = k_i / 65536`` with ``k_i`` uniform in 0..65535), and every record's bit ``i`` is 1
independently with probability ``p_i``. ``n`` records (default 50,000), held as packed bits
(:meth:`dq_engine.Dataset.from_packed_bits`, ``d · n / 8`` bytes).

Workload: 100,000 random 3-way queries, positive conjunctions ``x_a ∧ x_b ∧ x_c`` of distinct attributes
(``random_queries``); with fewer than 100,000 such conjunctions (d = 50: C(50, 3) = 19,600) all of them.

DualQuery: η = 0.4, free attributes ``random`` (the paper's choices for this data), s growing with the
dimension between the paper's end points, log-linearly: ``s(d) = 200 · (d/50)^(log 250 / log 10240)``, i.e.
200 at d = 50 and 50,000 at d = 512,000; T = the largest number of rounds with (ε, δ) = (1, 10⁻³) in the
chosen accounting (tight by default; the paper used Theorem 4.3), default ``OracleConfig``.

Every size runs in its own subprocess so that its peak RSS (``ru_maxrss``) is its own. Reported per size:
max / mean error of DualQuery and of the zeros and uniform baselines, times (data generation, workload, query
evaluation = true answers, then the DualQuery run split into sampling, oracle, MW update, other; the paper's
runtime excludes query evaluation), oracle median / p95 per call, peak RSS.

Usage::

    .venv/bin/python bench/fig4_attributes.py --out bench/results/fig4_attributes.json

``--smoke``: d = 50 and 300, n = 2,000, 2,000 queries (tests/bench/test_scale_smoke.py).

``--free-policy dp-marginal-gaussian --free-fraction f``: free attributes drawn from Gaussian noisy one-way
marginals (:func:`dq_engine.oracle.free_attributes.gaussian_one_way_marginals`) that spend the fraction ``f`` of
the total zCDP ρ the target (ε, δ) allows; T is then calibrated with that event included. Default: ``random``::

    .venv/bin/python bench/fig4_attributes.py --sizes 5000,50000,100000 --free-policy dp-marginal-gaussian \
        --free-fraction 0.1 --out bench/results/fig4_attributes_dp_marginal.json
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from scale_common import errors_against_baselines, machine, peak_rss_gb, run_dualquery_timed, save_plot, save_report

from dq_engine.data.answers import answer_workload
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.workload import random_queries
from dq_engine.mechanisms.dualquery import DualQueryConfig
from dq_engine.oracle import OracleConfig
from dq_engine.oracle.free_attributes import gaussian_marginal_sigma
from dq_engine.privacy.accounting import ZCDPEvent, compose
from dq_engine.privacy.calibration import calibrate_rounds, mechanism_cost
from dq_engine.privacy.rng import make_rng

SIZES = (50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 200_000, 512_000)
ETA = 0.4
EPSILON, DELTA = 1.0, 1e-3
DATA_SEED, WORKLOAD_SEED = 4_000, 4_001


def samples_for(d: int) -> int:
    """s(d): log-linear between the paper's end points (d = 50, s = 200) and (d = 512,000, s = 50,000)."""
    slope = math.log(250) / math.log(512_000 / 50)
    return round(200 * (d / 50) ** slope)


def total_rho(mode: str, *, epsilon: float = EPSILON, delta: float = DELTA) -> float:
    """Largest ρ (to 1e-9) whose (ε, δ) conversion in ``mode`` is at most the target: the whole zCDP budget."""
    low, high = 0.0, epsilon
    while high - low > 1e-9:
        middle = (low + high) / 2
        cost = compose([ZCDPEvent(rho=middle)], mode=mode, delta=delta, paper_analysis="zcdp").epsilon
        low, high = (middle, high) if cost <= epsilon else (low, middle)
    return low


def biased_bits(d: int, n: int, rng: np.random.Generator, *, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Packed columns ``(d, ceil(n/8))`` of independent bits, bit ``i`` = 1 with probability ``k_i / 65536``."""
    thresholds = rng.integers(0, 65536, size=d, dtype=np.uint32)
    packed = np.empty((d, (n + 7) // 8), dtype=np.uint8)
    for lo in range(0, d, block):
        hi = min(d, lo + block)
        draws = rng.integers(0, 65536, size=(hi - lo, n), dtype=np.uint16)
        packed[lo:hi] = np.packbits(draws < thresholds[lo:hi, None], axis=1)
    return packed, thresholds / 65536.0


def run_one(
    d: int,
    *,
    n: int,
    queries: int,
    seed: int,
    mode: str,
    oracle: OracleConfig,
    eta: float = ETA,
    samples: int | None = None,
    free_policy: str = "random",
    free_fraction: float = 0.0,
    rows_per_round: int = 1,
    free_scope: str = "untouched",
) -> dict:
    """One size: data, workload, true answers, DualQuery with phase times, errors, peak RSS."""
    times = {}
    began = time.perf_counter()
    domain = Domain.binary(d)
    packed, _ = biased_bits(d, n, make_rng(DATA_SEED + d))
    data = Dataset.from_packed_bits(domain, packed, n)
    times["data_generation"] = time.perf_counter() - began
    began = time.perf_counter()
    count = min(queries, math.comb(d, 3))
    workload = random_queries(domain, 3, count, make_rng(WORKLOAD_SEED))
    times["workload"] = time.perf_counter() - began
    began = time.perf_counter()
    truth = answer_workload(data, workload)
    times["query_evaluation"] = time.perf_counter() - began
    samples = samples or samples_for(d)
    free: dict = {"free_policy": "random"}
    if free_policy == "dp-marginal-gaussian":
        free = {"free_policy": "dp-marginal", "free_noise": "gaussian", "free_rho": free_fraction * total_rho(mode)}
    free_rho = free.get("free_rho", 0.0)
    rounds = calibrate_rounds(
        "dualquery", epsilon=EPSILON, delta=DELTA, eta=eta, samples=samples, n=n, mode=mode, free_rho=free_rho
    )
    config = DualQueryConfig(
        eta=eta, samples=samples, rounds=rounds, delta=DELTA, oracle=oracle, track_error=False,
        rows_per_round=rows_per_round, free_scope=free_scope, **free
    )
    records, timing = run_dualquery_timed(data, workload, truth, config, seed=seed)
    began = time.perf_counter()
    errors = errors_against_baselines(workload, truth, records)
    times["error_evaluation"] = time.perf_counter() - began
    costs = {
        m: mechanism_cost(
            "dualquery", mode=m, delta=DELTA, eta=eta, samples=samples, rounds=rounds, n=n, free_rho=free_rho
        )
        for m in ("paper", "tight")
    }
    return {
        "attributes": d,
        "n": n,
        "queries": count,
        "seed": seed,
        "samples": samples,
        "rounds": rounds,
        "eta": eta,
        "accounting": mode,
        "free_policy": free_policy,
        "free_fraction": free_fraction,
        "free_rho": free_rho,
        "free_sigma": gaussian_marginal_sigma(domain, n=n, rho=free_rho) if free_rho > 0 else None,
        "rows_per_round": rows_per_round,
        "free_scope": free_scope,
        "published_rows": int(records.shape[0]),
        "epsilon": costs,
        "delta": DELTA,
        "times": times,
        **timing,
        "errors": errors,
        "peak_rss_gb": peak_rss_gb(),
        "packed_data_gb": packed.nbytes / 2**30,
    }


def _child(args: argparse.Namespace, d: int, seed: int, out: Path) -> dict:
    command = [
        sys.executable,
        __file__,
        "--one",
        str(d),
        "--seed",
        str(seed),
        "--n",
        str(args.n),
        "--queries",
        str(args.queries),
        "--accounting",
        args.accounting,
        "--one-out",
        str(out),
        "--eta",
        str(args.eta),
        "--free-policy",
        args.free_policy,
        "--free-fraction",
        str(args.free_fraction),
        "--rows-per-round",
        str(args.rows_per_round),
        "--free-scope",
        args.free_scope,
    ]
    if args.samples:
        command += ["--samples", str(args.samples)]
    if args.smoke:
        command.append("--smoke")
    began = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, check=False)
    if completed.returncode != 0:
        return {
            "attributes": d,
            "seed": seed,
            "failed": True,
            "returncode": completed.returncode,
            "stderr": completed.stderr[-2000:],
            "wall_seconds": time.perf_counter() - began,
        }
    result = json.loads(out.read_text())
    result["wall_seconds"] = time.perf_counter() - began
    return result


def plot(rows: list[dict], path: Path) -> None:
    ok = [r for r in rows if not r.get("failed")]
    sizes = sorted({r["attributes"] for r in ok})

    def mean(key: str, name: str, d: int) -> float:
        return float(np.mean([r["errors"][name][key] for r in ok if r["attributes"] == d]))

    def draw(figure):
        left, middle, right = figure.subplots(1, 3)
        for name, style in (("dualquery", "o-"), ("zeros", "s--"), ("uniform", "^--")):
            left.plot(sizes, [mean("mean_error", name, d) for d in sizes], style, label=name)
            middle.plot(sizes, [mean("max_error", name, d) for d in sizes], style, label=name)
        for axis, title in ((left, "average error"), (middle, "max error")):
            axis.set_xscale("log")
            axis.set_xlabel("attributes")
            axis.set_title(title, fontsize=9)
        left.legend(fontsize=7)
        runtime = [np.mean([r["phases"]["total"] for r in ok if r["attributes"] == d]) for d in sizes]
        answers = [np.mean([r["times"]["query_evaluation"] for r in ok if r["attributes"] == d]) for d in sizes]
        right.plot(sizes, runtime, "o-", label="DualQuery run")
        right.plot(sizes, answers, "s--", label="query evaluation")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("attributes")
        right.set_ylabel("seconds")
        right.legend(fontsize=7)
        right.set_title("runtime", fontsize=9)

    save_plot(path, draw, size=(11, 3.4))


def write_csv(rows: list[dict], path: Path) -> None:
    fields = [
        "attributes",
        "seed",
        "n",
        "queries",
        "samples",
        "rounds",
        "epsilon_tight",
        "epsilon_paper",
        "dq_mean",
        "dq_max",
        "zeros_mean",
        "zeros_max",
        "uniform_mean",
        "uniform_max",
        "ratio_zeros_mean",
        "ratio_uniform_mean",
        "data_s",
        "query_eval_s",
        "run_s",
        "sampling_s",
        "oracle_s",
        "mw_update_s",
        "other_s",
        "oracle_median_s",
        "oracle_p95_s",
        "peak_rss_gb",
        "failed",
    ]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            if r.get("failed"):
                writer.writerow({"attributes": r["attributes"], "seed": r["seed"], "failed": True})
                continue
            e = r["errors"]
            writer.writerow(
                {
                    "attributes": r["attributes"],
                    "seed": r["seed"],
                    "n": r["n"],
                    "queries": r["queries"],
                    "samples": r["samples"],
                    "rounds": r["rounds"],
                    "epsilon_tight": r["epsilon"]["tight"],
                    "epsilon_paper": r["epsilon"]["paper"],
                    "dq_mean": e["dualquery"]["mean_error"],
                    "dq_max": e["dualquery"]["max_error"],
                    "zeros_mean": e["zeros"]["mean_error"],
                    "zeros_max": e["zeros"]["max_error"],
                    "uniform_mean": e["uniform"]["mean_error"],
                    "uniform_max": e["uniform"]["max_error"],
                    "ratio_zeros_mean": e["zeros"]["mean_error"] / e["dualquery"]["mean_error"],
                    "ratio_uniform_mean": e["uniform"]["mean_error"] / e["dualquery"]["mean_error"],
                    "data_s": r["times"]["data_generation"],
                    "query_eval_s": r["times"]["query_evaluation"],
                    "run_s": r["phases"]["total"],
                    "sampling_s": r["phases"]["sampling"],
                    "oracle_s": r["phases"]["oracle"],
                    "mw_update_s": r["phases"]["mw_update"],
                    "other_s": r["phases"]["other"],
                    "oracle_median_s": r["oracle"]["median_seconds"],
                    "oracle_p95_s": r["oracle"]["p95_seconds"],
                    "peak_rss_gb": r["peak_rss_gb"],
                    "failed": False,
                }
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/fig4_attributes.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--accounting", choices=("tight", "paper"), default="tight")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--eta", type=float, default=ETA, help="learning rate (default: the paper's 0.4)")
    parser.add_argument("--samples", type=int, default=None, help="fixed s for every size (default: s(d))")
    parser.add_argument("--free-policy", choices=("random", "dp-marginal-gaussian"), default="random",
                        help="free attributes: fair coins (the paper's choice) or Gaussian noisy one-way marginals")
    parser.add_argument("--free-fraction", type=float, default=0.1,
                        help="share of the total zCDP rho spent on the Gaussian marginals (dp-marginal-gaussian only)")
    parser.add_argument("--rows-per-round", type=int, default=1,
                        help="rows published per round, free attributes redrawn in each (default 1: the paper)")
    parser.add_argument("--free-scope", choices=("untouched", "slack"), default="untouched",
                        help="attributes the free policy fills: untouched by the samples (the paper) or also the "
                             "touched ones the record does not need (slack)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows of other sizes already in --out (add a size without re-running the rest)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--one-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    oracle = OracleConfig(time_limit=0.2, local_time_limit=0.05) if args.smoke else OracleConfig()
    if args.one is not None:
        result = run_one(
            args.one,
            n=args.n,
            queries=args.queries,
            seed=args.seed,
            mode=args.accounting,
            oracle=oracle,
            eta=args.eta,
            samples=args.samples,
            free_policy=args.free_policy,
            free_fraction=args.free_fraction,
            rows_per_round=args.rows_per_round,
            free_scope=args.free_scope,
        )
        args.one_out.write_text(json.dumps(result, default=float))
        return
    if args.smoke:
        args.sizes, args.n, args.queries = "50,300", 2_000, 2_000
    sizes = [int(s) for s in args.sizes.split(",")]
    report = {
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "machine": machine(),
        "smoke": args.smoke,
        "n": args.n,
        "queries": args.queries,
        "eta": args.eta,
        "samples_override": args.samples,
        "epsilon": EPSILON,
        "delta": DELTA,
        "accounting": args.accounting,
        "free_policy": args.free_policy,
        "free_fraction": args.free_fraction if args.free_policy != "random" else None,
        "rows_per_round": args.rows_per_round,
        "free_scope": args.free_scope,
        "total_rho": total_rho(args.accounting),
        "rows": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.merge and args.out.exists():
        previous = json.loads(args.out.read_text())
        report["merged_from"] = {"command": previous["command"], "machine": previous["machine"]}
        report["rows"] = [r for r in previous["rows"] if r["attributes"] not in sizes]
    scratch = args.out.with_suffix(".part.json")
    for d in sizes:
        for seed in range(args.seeds):
            row = _child(args, d, seed, scratch)
            report["rows"].append(row)
            if row.get("failed"):
                print(f"d={d} seed={seed}: FAILED ({row['returncode']}) {row['stderr'][-300:]}", flush=True)
                continue
            e = row["errors"]
            print(
                f"d={d:>7} s={row['samples']:>6} T={row['rounds']:>4} mean {e['dualquery']['mean_error']:.4f} "
                f"(zeros {e['zeros']['mean_error']:.4f}, uniform {e['uniform']['mean_error']:.4f}) "
                f"max {e['dualquery']['max_error']:.3f} run {row['phases']['total']:.1f} s "
                f"answers {row['times']['query_evaluation']:.1f} s peak {row['peak_rss_gb']:.2f} GB",
                flush=True,
            )
            args.out.write_text(json.dumps(report, indent=1, default=float))  # partial results survive a crash
    scratch.unlink(missing_ok=True)
    report["rows"].sort(key=lambda r: (r["attributes"], r["seed"]))
    save_report(report, args.out, write_csv=write_csv, plot=plot)


if __name__ == "__main__":
    main()
