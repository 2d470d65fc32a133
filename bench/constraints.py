"""Benchmark: every mechanism on Adult with the example's public rules against the same run without them.

Adult as shipped (``examples/adult``: 48,842 rows, 15 columns, the release config's workload), each mechanism
planned by the pipeline's registry at the example's target (ε = 1, δ = 10⁻⁹, tight accounting, seeded and
therefore deterministic oracles), run with and without the rules of ``examples/adult/schema.toml`` on the same
seeds. Per run it records the mechanism's wall time (and its CPU time, less sensitive to other load on the
machine), the published rows that break a rule (the ``n`` rows the
pipeline would publish, drawn from the result as ``decode_synthetic`` does) and the max workload error of those
rows. Targets (issue 10): 0 violating rows with rules; wall time with rules ≤ 1.3× without.

MWEM over the whole universe cannot hold Adult's 2^60 records (refused at plan time); it runs on the seven
rule columns that fit its 2^24 limit (relationship, sex, marital-status, workclass, occupation, education,
education-num: 2.9 M records), with the rules on those columns and a workload of all their 1- and 2-way
marginals. Randomized response cannot keep rules and is refused while they are declared, so it is not run.

Runs alternate the order (without first on even seeds, with first on odd ones) so that drifting machine load
does not favour one side; the 1-minute load average is recorded before each run.

Command (holds the shared benchmark lock since wall times are quoted):

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/constraints.py

``--smoke`` runs a 2,000-row slice with DualQuery and MWEM (on three columns), one seed: it checks the script, not
the times.
Output: ``bench/results/constraints.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale_common import machine, study_grant  # noqa: E402
from dq_engine import Dataset, all_kway_marginals, answer_workload, make_rng  # noqa: E402
from dq_engine.data.answers import answer_records  # noqa: E402
from dq_engine.data.workload import concatenate_workloads  # noqa: E402
from dq_engine.privacy.public import PublicQuantities  # noqa: E402
from dqrelease.inputs.config import load_config  # noqa: E402
from dqrelease.inputs.discretize import discretize  # noqa: E402
from dqrelease.inputs.encoding import domain_from_columns  # noqa: E402
from dqrelease.inputs.ingest import ingest_source  # noqa: E402
from dqrelease.inputs.rules import constraints_from_rules  # noqa: E402
from dqrelease.inputs.schema import Schema, load_schema, schema_constraints  # noqa: E402
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism  # noqa: E402
from dqrelease.plan import build_workload  # noqa: E402
from dqrelease.warehouse import connect  # noqa: E402

CONFIG = ROOT / "examples" / "adult" / "release.toml"
OUT = ROOT / "bench" / "results" / "constraints.json"
FULL_MECHANISMS = ("dualquery", "dqrs", "fem", "sepfem", "mwem-particles")
MWEM_COLUMNS = ("workclass", "education", "education-num", "marital-status", "occupation", "relationship", "sex")
MWEM_SMOKE_COLUMNS = ("marital-status", "relationship", "sex")
TIME_RATIO_TARGET = 1.3


def load_adult(config_path: Path, *, rows: int | None) -> tuple[object, Schema, Dataset]:
    """The example config, its schema and the discretized Adult table (the first ``rows`` lines when given)."""
    config = load_config(config_path)
    schema = load_schema(config.schema_file)
    source = config.source
    if rows is not None:  # smoke: a slice of adult.data
        lines = Path(source.paths[0]).read_text().splitlines()[:rows]
        path = Path("/tmp") / f"dqrelease-bench-constraints-{os.getpid()}.csv"
        path.write_text("\n".join(lines) + "\n")
        source = source.model_copy(update={"paths": [path]})
    with connect(None) as con:
        ingest_source(con, source, schema, table="raw")
        data = discretize(con, "raw", schema)
    return config, schema, data


def mechanism_keys(name: str, config: object) -> object:
    """The keys a release would give: the example's DualQuery keys for DualQuery and DQRS, the defaults otherwise."""
    keys_model = MECHANISMS[name].keys
    if name in ("dualquery", "dqrs"):
        given = config.mechanism.model_dump(exclude={"name"}, exclude_unset=True)
        return keys_model.model_validate({"name": name, **given})
    return keys_model.model_validate({"name": name})


def one_run(
    name: str, keys: object, data: Dataset, workload: object, truth: np.ndarray, constraints: object,
    *, use_rules: bool, seed: int, epsilon: float, delta: float,
) -> dict:
    """Plan and run one mechanism; time the run; count published rows breaking a rule; max error of those rows."""
    public = PublicQuantities(
        n=data.n, epsilon=epsilon, delta=delta, domain=data.domain, n_queries=len(workload),
        n_marginals=workload.n_marginals,
    )
    inputs = PlanInputs(public=public, mode="tight", deterministic=True, constraints=constraints if use_rules else None)
    plan = plan_mechanism(keys, inputs)
    load = os.getloadavg()[0]
    grant = study_grant(plan)
    cpu_before = _cpu_seconds()
    began = time.perf_counter()
    result = run_mechanism(grant, RunInputs(data=data, workload=workload, rng=make_rng(seed)))
    seconds = time.perf_counter() - began
    cpu = _cpu_seconds() - cpu_before
    published = result.sample_rows(data.n, make_rng(10_000 + seed))
    answers = answer_records(workload, data.domain.encode_records(published))
    return {
        "mechanism": name, "rules": use_rules, "seed": seed, "seconds": seconds, "cpu_seconds": cpu,
        "load_1min_before": load,
        "published_rows": len(published),
        "violating_published_rows": int((~constraints.feasible(published)).sum()),
        "violations_by_rule": constraints.violations_by_rule(published),
        "distinct_records": len(result.records),
        "max_error": float(np.max(np.abs(answers - truth))),
        "parameters": {k: v for k, v in plan.parameters.items() if k != "oracle"},
    }


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its threads (CP-SAT's workers included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def mwem_slice(schema: Schema, data: Dataset, names: tuple[str, ...]) -> tuple[Dataset, object, object]:
    """Rule columns MWEM's universe holds (``names``), their rules, and all their 1- and 2-way marginals."""
    columns = [c for c in schema.columns if c.name in names]
    kept = [r for r in schema.rules if _rule_columns(r) <= set(names)]
    constraints = constraints_from_rules(columns, kept)
    positions = [schema.names.index(c.name) for c in columns]
    codes = np.repeat(data.codes[:, positions], data.counts, axis=0)
    sliced = Dataset.from_codes(constraints.domain, codes)
    workload = concatenate_workloads([all_kway_marginals(sliced.domain, 1), all_kway_marginals(sliced.domain, 2)])
    return sliced, workload, constraints


def _rule_columns(rule: object) -> set[str]:
    if rule.recode is not None:
        return {rule.recode.source, rule.recode.to}
    parts = [rule.forbid or {}, rule.condition or {}, rule.then or {}]
    return {column for part in parts for column in part}


def summarise(runs: list[dict]) -> dict:
    """Per mechanism: violating rows with and without rules, time ratio per seed and its median."""
    summary = {}
    for name in dict.fromkeys(r["mechanism"] for r in runs):
        with_rules = {r["seed"]: r for r in runs if r["mechanism"] == name and r["rules"]}
        without = {r["seed"]: r for r in runs if r["mechanism"] == name and not r["rules"]}
        paired = [s for s in sorted(with_rules) if s in without]
        ratios = [with_rules[s]["seconds"] / without[s]["seconds"] for s in paired]
        cpu_ratios = [with_rules[s]["cpu_seconds"] / without[s]["cpu_seconds"] for s in paired]
        violating = {side: [runs_[s]["violating_published_rows"] for s in sorted(runs_)]
                     for side, runs_ in (("with", with_rules), ("without", without))}
        summary[name] = {
            "violating_published_rows_with_rules": violating["with"],
            "violating_published_rows_without_rules": violating["without"],
            "seconds_with_rules": [round(with_rules[s]["seconds"], 2) for s in sorted(with_rules)],
            "seconds_without_rules": [round(without[s]["seconds"], 2) for s in sorted(without)],
            "time_ratio_per_seed": [round(x, 3) for x in ratios],
            "time_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
            "cpu_ratio_per_seed": [round(x, 3) for x in cpu_ratios],
            "cpu_ratio_median": round(statistics.median(cpu_ratios), 3) if cpu_ratios else None,
            "max_error_with_rules_median": statistics.median(with_rules[s]["max_error"] for s in with_rules),
            "max_error_without_rules_median": statistics.median(without[s]["max_error"] for s in without),
            "zero_violations_with_rules": all(with_rules[s]["violating_published_rows"] == 0 for s in with_rules),
            "time_ratio_within_target": bool(ratios) and statistics.median(ratios) <= TIME_RATIO_TARGET,
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="Seeds per mechanism and side (>= 3 for the docs).")
    parser.add_argument("--mechanisms", nargs="*", default=[*FULL_MECHANISMS, "mwem"])
    parser.add_argument("--smoke", action="store_true", help="2,000 rows, dualquery and mwem, one seed.")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC).isoformat()
    config, schema, data = load_adult(CONFIG, rows=2000 if args.smoke else None)
    constraints = schema_constraints(schema)
    workload = build_workload(config.workload, domain_from_columns(schema.columns))
    truth = answer_workload(data, workload)
    names = ["dualquery", "mwem"] if args.smoke else args.mechanisms
    seeds = range(1 if args.smoke else args.seeds)
    epsilon, delta = config.privacy.epsilon, config.privacy.delta
    runs: list[dict] = []
    for name in names:
        if name == "mwem":
            sliced, slice_workload, slice_constraints = mwem_slice(
                schema, data, MWEM_SMOKE_COLUMNS if args.smoke else MWEM_COLUMNS
            )
            setting = (sliced, slice_workload, answer_workload(sliced, slice_workload), slice_constraints)
        else:
            setting = (data, workload, truth, constraints)
        keys = mechanism_keys(name, config)
        for seed in seeds:
            order = (False, True) if seed % 2 == 0 else (True, False)
            for use_rules in order:
                run = one_run(name, keys, *setting, use_rules=use_rules, seed=seed, epsilon=epsilon, delta=delta)
                runs.append(run)
                print(f"{name:15s} seed {seed} rules={use_rules!s:5s} {run['seconds']:7.1f} s  "
                      f"violating {run['violating_published_rows']:6d}  max error {run['max_error']:.3f}  "
                      f"load {run['load_1min_before']:.1f}", flush=True)
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "smoke": args.smoke,
        "started": started,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(),
        "machine": {**machine(), "load_average_end": os.getloadavg()},
        "data": {"rows": data.n, "columns": len(data.domain), "queries": len(workload),
                 "rules": list(constraints.rule_names), "forbidden_combinations": len(constraints),
                 "mwem_slice_columns": list(MWEM_SMOKE_COLUMNS if args.smoke else MWEM_COLUMNS)},
        "target": {"epsilon": epsilon, "delta": delta, "accounting": "tight", "time_ratio": TIME_RATIO_TARGET},
        "summary": summarise(runs),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=_json) + "\n")
    print(json.dumps(report["summary"], indent=2, default=_json))


def _json(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


if __name__ == "__main__":
    main()
