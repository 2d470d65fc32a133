"""Engine benchmarks (results summarised in docs/benchmarks.md, section "Engine").

(a) one MW round on 2,000,000 random 3-way queries on KDD99 (sample s = 1750, merge into clauses, evaluate
    the record on every query, payoff, update), excluding the solver; target <= 50 ms;
(b) exact answers of 2,000,000 random 3-way queries on KDD99's 494,021 rows; target < 30 s;
(c) the default oracle (``OracleConfig()``) per round on captured Adult and KDD99 instances;
(d) a complete DualQuery run on Adult, 64 random 3-way marginals, ε = 1, δ = 1/n² (tight accounting), with
    max / mean error against the zeros and uniform baselines.

Usage::

    .venv/bin/python bench/engine.py --out bench/results/engine.json

``--smoke`` runs every part with tiny sizes in a few seconds (tests/bench/test_bench_smoke.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from engine_data import INSTANCES, build_workload, load_adult, load_instance, load_kdd99
from scale_common import benchmark_grant

import dq_engine
from dq_engine.data.answers import answer_workload, error_summary, uniform_answers
from dq_engine.data.workload import Workload
from dq_engine.evaluation.baselines import zeros_answers
from dq_engine.mechanisms.dualquery import DualQueryConfig, dualquery
from dq_engine.oracle import OracleConfig, best_response, problem_from_samples
from dq_engine.privacy.calibration import calibrate_rounds
from dq_engine.privacy.mw import QueryDistribution
from dq_engine.privacy.rng import make_rng

SEED = 2024


def _stats(seconds: list[float]) -> dict[str, float]:
    values = np.asarray(seconds) * 1000.0
    return {"median_ms": float(np.median(values)), "p95_ms": float(np.percentile(values, 95)),
            "min_ms": float(values.min()), "max_ms": float(values.max()), "repeats": len(values)}


def _random_records(domain: dq_engine.Domain, count: int, rng: np.random.Generator) -> np.ndarray:
    return (rng.random((count, len(domain))) * domain.sizes).astype(np.int64)


# ---------------------------------------------------------------------- legacy kernels (before this bench)
def _legacy_evaluate(workload: Workload, record_bits: np.ndarray) -> np.ndarray:
    """``Workload.evaluate_record`` as it was: gathers over all queries with int32 indices."""
    extended = np.empty(workload.domain.n_bits + 1, dtype=bool)
    extended[:-1] = record_bits
    extended[-1] = True
    columns = workload.query_bits
    result = extended[columns[0]]
    for column in columns[1:]:
        result &= extended[column]
    return result


def _legacy_sample(distribution: QueryDistribution, count: int, rng: np.random.Generator) -> np.ndarray:
    """``QueryDistribution.sample`` as it was: fresh arrays for every pass."""
    magnitude = np.abs(distribution.log_weight)
    weights = np.exp(magnitude - magnitude.max()) * (1.0 + np.exp(-2.0 * magnitude))
    cumulative = np.cumsum(weights)
    targets = rng.random(count) * cumulative[-1]
    index = np.minimum(np.searchsorted(cumulative, targets, side="right"), len(cumulative) - 1)
    positive_probability = 0.5 * (1.0 + np.tanh(distribution.log_weight[index]))
    rng.random(count) >= positive_probability  # noqa: B015 (same work as the original)
    return index


def _float_sample(distribution: QueryDistribution, count: int, rng: np.random.Generator) -> np.ndarray:
    """``QueryDistribution.sample`` before exact sampling: float64 cumulative sum, ``searchsorted`` of float
    uniforms, sign by a float comparison (same scratch buffers as the exact sampler, so only the kernel differs)."""
    weights = distribution._pair_weights_into(*distribution._scratch)
    cumulative = np.cumsum(weights, out=weights)
    targets = rng.random(count) * cumulative[-1]
    index = np.minimum(np.searchsorted(cumulative, targets, side="right"), len(cumulative) - 1)
    positive_probability = 0.5 * (1.0 + np.tanh(distribution.log_weight[index]))
    rng.random(count) >= positive_probability  # noqa: B015 (same work as the original)
    return index


# ---------------------------------------------------------------------- (a) MW round
def bench_mw_round(kdd: dq_engine.Dataset, workload: Workload, true_answers: np.ndarray, *, samples: int,
                   rounds: int, eta: float = 1.2) -> dict:
    rng = make_rng(SEED)
    distribution = QueryDistribution(len(workload), eta=eta)
    records = _random_records(kdd.domain, rounds + 5, rng)
    bits = kdd.domain.encode_records(records)
    for warm in range(5):  # a few updates so the distribution is not uniform
        distribution.update(true_answers - workload.evaluate_record(bits[warm]))
    workload.evaluate_record(bits[0])  # builds the cached first-literal index once (setup, not per round)
    parts: dict[str, list[float]] = {"sample": [], "clauses": [], "evaluate": [], "update": [], "round": []}
    legacy: dict[str, list[float]] = {"sample": [], "evaluate": [], "update": [], "round": []}
    float_kernel: dict[str, list[float]] = {"sample": [], "round": []}
    cpu: dict[str, list[float]] = {"exact_sample": [], "float_sample": []}  # process CPU time: less load-sensitive
    for t in range(rounds):
        record = bits[5 + t]
        c0 = time.process_time()
        t0 = time.perf_counter()
        drawn = distribution.sample(samples, rng)
        t1 = time.perf_counter()
        cpu["exact_sample"].append(time.process_time() - c0)
        problem_from_samples(workload, drawn)
        t2 = time.perf_counter()
        on_record = workload.evaluate_record(record)
        t3 = time.perf_counter()
        distribution.update(true_answers - on_record)
        t4 = time.perf_counter()
        for name, value in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0), strict=True):
            parts[name].append(value)
        # the same round with the previous kernels (sample, evaluate, update with fresh temporaries)
        l0 = time.perf_counter()
        _legacy_sample(distribution, samples, rng)
        l1 = time.perf_counter()
        legacy_on = _legacy_evaluate(workload, record)
        l2 = time.perf_counter()
        scratch = distribution.log_weight + eta * (true_answers - legacy_on)
        l3 = time.perf_counter()
        del scratch
        for name, value in zip(legacy, (l1 - l0, l2 - l1, l3 - l2, (l1 - l0) + (t2 - t1) + (l3 - l1)), strict=True):
            legacy[name].append(value)
        assert np.array_equal(legacy_on, on_record)
        # the same round with the float64 sampler that exact sampling replaced (interleaved: same load)
        c0 = time.process_time()
        f0 = time.perf_counter()
        _float_sample(distribution, samples, rng)
        f1 = time.perf_counter()
        cpu["float_sample"].append(time.process_time() - c0)
        float_kernel["sample"].append(f1 - f0)
        float_kernel["round"].append((f1 - f0) + (t4 - t1))
    return {"queries": len(workload), "samples": samples, "rounds_timed": rounds,
            "per_round": {name: _stats(values) for name, values in parts.items()},
            "float_sampler": {name: _stats(values) for name, values in float_kernel.items()},
            "cpu_seconds": {name: _stats(values) for name, values in cpu.items()},
            "legacy_kernels": {name: _stats(values) for name, values in legacy.items()},
            "target_ms": 50.0, "meets_target": bool(np.median(parts["round"]) * 1000 <= 50.0)}


# ---------------------------------------------------------------------- (b) answers
def bench_answers(kdd: dq_engine.Dataset, workload: Workload, *, repeats: int, checks: int) -> tuple[dict, np.ndarray]:
    times, answers = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        answers = answer_workload(kdd, workload)
        times.append(time.perf_counter() - began)
    # exactness: recount a random subset of queries directly on the expanded rows
    rng = make_rng(SEED + 1)
    rows = kdd.to_codes()
    picked = rng.choice(len(workload), size=min(checks, len(workload)), replace=False)
    worst = 0.0
    for q in picked:
        marginal = workload.marginals[workload.query_marginal[q]]
        attrs = marginal[marginal >= 0]
        values = workload.query_values[q, : len(attrs)]
        direct = np.all(rows[:, attrs] == values, axis=1).mean()
        worst = max(worst, abs(direct - answers[q]))
    return ({"queries": len(workload), "rows": kdd.n, "distinct_rows": int(kdd.codes.shape[0]),
             "seconds": [float(x) for x in times], "median_seconds": float(np.median(times)),
             "checked_queries": len(picked), "max_abs_difference_vs_direct_count": float(worst),
             "target_seconds": 30.0, "meets_target": bool(np.median(times) < 30.0)}, answers)


# ---------------------------------------------------------------------- (c) oracle per round
def bench_oracle(instances: list, config: OracleConfig, *, best_known: dict[str, float]) -> dict:
    rows = []
    for instance in instances:
        rng = make_rng(SEED)
        began = time.perf_counter()
        response = best_response(instance.problem, config, rng, previous=instance.previous)
        seconds = time.perf_counter() - began
        domain = instance.problem.domain
        codes = response.codes
        assert np.all((codes >= 0) & (codes < domain.sizes))
        reference = best_known.get(instance.name)
        rows.append({"instance": instance.name, "dataset": instance.dataset, "samples": instance.samples,
                     "clauses": instance.problem.n_clauses, "seconds": seconds, "objective": response.objective,
                     "source": response.source, "status": response.status, "bound": response.bound,
                     "local_seconds": response.local_seconds, "solver_seconds": response.solver_seconds,
                     "build_seconds": response.build_seconds,
                     "regret_pct": None if reference is None else
                     100.0 * (reference - response.objective) / max(1.0, reference)})
    summary = {}
    for dataset in sorted({r["dataset"] for r in rows}):
        for samples in sorted({r["samples"] for r in rows if r["dataset"] == dataset}):
            group = [r for r in rows if r["dataset"] == dataset and r["samples"] == samples]
            regrets = [r["regret_pct"] for r in group if r["regret_pct"] is not None]
            summary[f"{dataset} s={samples}"] = {
                "instances": len(group), **_stats([r["seconds"] for r in group]),
                "mean_regret_pct": float(np.mean(regrets)) if regrets else None,
                "sources": {s: sum(r["source"] == s for r in group) for s in {r["source"] for r in group}},
                "optimal_proven": sum(r["status"] == "OPTIMAL" for r in group)}
    return {"config": {k: getattr(config, k) for k in config.__dataclass_fields__}, "by_group": summary,
            "rows": rows}


# ---------------------------------------------------------------------- (d) DualQuery on Adult
def bench_dualquery(adult: dq_engine.Dataset, *, eta: float, samples: int, rounds: int | None,
                    oracle: OracleConfig) -> dict:
    workload = build_workload(adult, "marginals64")
    delta = 1.0 / adult.n**2
    if rounds is None:
        rounds = calibrate_rounds("dualquery", epsilon=1.0, delta=delta, eta=eta, samples=samples, n=adult.n)
    config = DualQueryConfig(eta=eta, samples=samples, rounds=rounds, delta=delta, free_policy="zero",
                             oracle=oracle, track_error=False)
    began = time.perf_counter()
    true_answers = answer_workload(adult, workload)
    answer_seconds = time.perf_counter() - began
    began = time.perf_counter()
    result = dualquery(adult, workload, config, grant=benchmark_grant(), rng=make_rng(SEED))
    run_seconds = time.perf_counter() - began
    codes = result.records
    synthetic = dq_engine.answer_records(workload, adult.domain.encode_records(codes))
    diagnostics = result.diagnostics
    oracle_seconds = [d.solver_seconds + d.local_seconds for d in diagnostics]
    round_seconds = [d.round_seconds for d in diagnostics]
    tight = result.costs["tight"]
    return {
        "workload": {"queries": len(workload), "marginals": workload.n_marginals},
        "parameters": {"eta": eta, "samples": samples, "rounds": rounds, "delta": delta, "free_policy": "zero"},
        "epsilon_tight": float(tight.epsilon), "epsilon_paper": float(result.costs["paper"].epsilon),
        "seconds": {"true_answers": answer_seconds, "dualquery_run": run_seconds,
                    "oracle_total": float(np.sum(oracle_seconds)),
                    "round_median": float(np.median(round_seconds)),
                    "non_oracle_per_round_median": float(np.median(np.subtract(round_seconds, oracle_seconds)))},
        "sources": {s: sum(d.source == s for d in diagnostics) for s in {d.source for d in diagnostics}},
        "error": {"dualquery": error_summary(true_answers, synthetic),
                  "zeros": error_summary(true_answers, zeros_answers(workload)),
                  "uniform": error_summary(true_answers, uniform_answers(workload))},
    }


# ---------------------------------------------------------------------- driver
def machine() -> dict:
    import ortools

    return {"cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "ortools": ortools.__version__, "platform": platform.platform(), "load_average_start": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/engine.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    parser.add_argument("--parts", default="abcd", help="which parts to run, e.g. 'ab'")
    args = parser.parse_args()
    smoke = args.smoke
    report: dict = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(), "smoke": smoke}
    began = time.perf_counter()

    if "a" in args.parts or "b" in args.parts:
        kdd = load_kdd99(rows=20_000 if smoke else None)
        kind = "queries20000" if smoke else "queries2000000"
        t0 = time.perf_counter()
        workload = build_workload(kdd, kind)
        report["setup_seconds"] = {"kdd99_workload": time.perf_counter() - t0}
        answers_report, true_answers = bench_answers(kdd, workload, repeats=1 if smoke else 3,
                                                     checks=50 if smoke else 300)
        if "b" in args.parts:
            report["b_answers"] = answers_report
            print("b", json.dumps({k: v for k, v in answers_report.items() if k != "seconds"}), flush=True)
        if "a" in args.parts:
            report["a_mw_round"] = bench_mw_round(kdd, workload, true_answers, samples=1750,
                                                  rounds=5 if smoke else 40)
            print("a", json.dumps(report["a_mw_round"]["per_round"]["round"]), flush=True)
            print("a float sampler", json.dumps(report["a_mw_round"]["float_sampler"]["round"]), flush=True)
        del workload, true_answers

    if "c" in args.parts:
        directory = INSTANCES
        names = sorted(directory.glob("*.npz"))
        best_known = {}
        study = args.out.with_name("oracle_study.json")
        if study.exists():
            best_known = {k: v["best_known"] for k, v in json.loads(study.read_text())["instances"].items()}
        if smoke or not names:
            instances = _smoke_instances()
        else:
            domains = {"adult": load_adult().domain, "kdd99": load_kdd99().domain}
            names = [p for p in names if p.name.split("-")[0] in domains]
            instances = [load_instance(p, domains) for p in names]
            instances = [i for i in instances if i.samples <= 5000]
        config = OracleConfig(time_limit=0.2, local_time_limit=0.05) if smoke else OracleConfig()
        report["c_oracle"] = bench_oracle(instances, config, best_known=best_known)
        print("c", json.dumps(report["c_oracle"]["by_group"]), flush=True)

    if "d" in args.parts:
        adult = load_adult()
        oracle = OracleConfig(time_limit=0.2, local_time_limit=0.05) if smoke else OracleConfig()
        report["d_dualquery_adult"] = bench_dualquery(adult, eta=2.0, samples=300 if smoke else 1000,
                                                      rounds=3 if smoke else None, oracle=oracle)
        print("d", json.dumps(report["d_dualquery_adult"]["error"]), flush=True)
        # the same run with the oracle defaults in force before docs/oracle.md (new local search and model)
        previous = (OracleConfig(time_limit=0.2, local_time_limit=0.05) if smoke else
                    OracleConfig(time_limit=2.0, num_workers=8, max_presolve_iterations=1, local_time_limit=0.5,
                                 local_restarts=20, skip_cpsat_when_dense=False))
        report["d_dualquery_adult_previous_oracle_defaults"] = bench_dualquery(
            adult, eta=2.0, samples=300 if smoke else 1000, rounds=3 if smoke else None, oracle=previous)

    report["total_seconds"] = time.perf_counter() - began
    report["machine"]["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=float))


def _smoke_instances() -> list:
    """Two small instances captured on the fly (Adult, 20,000 random queries, s = 300)."""
    from engine_data import Instance

    adult = load_adult()
    workload = build_workload(adult, "queries20000")
    rng = make_rng(SEED)
    distribution = QueryDistribution(len(workload), eta=2.0)
    instances = []
    for t in range(2):
        problem = problem_from_samples(workload, distribution.sample(300, rng))
        instances.append(Instance(name=f"smoke-{t}", dataset="adult", workload="queries20000", samples=300, round=t + 1,
                                  rounds=2, eta=2.0, problem=problem, previous=None))
    return instances


if __name__ == "__main__":
    main()
