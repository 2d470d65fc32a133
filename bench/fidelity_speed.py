"""Speed of the fidelity evaluation and of the whole error report against the release: 200,000 rows, 25 columns.

Target (issue 13): evaluating a 200,000-row, 25-column release takes at most 10 % of the release's wall time.

One command (about 10 minutes on 2 cores):

    .venv/bin/python bench/fidelity_speed.py

The table is public and synthetic (a seeded chain: each column depends on the previous one, so pairs are
correlated): 200,000 rows, 25 columns of 2 to 42 values. The workload is the release default (all 1-way and
all 2-way marginals plus 64 random 3-way ones). For each mechanism (MWEM on particles with its default rule;
DualQuery with the examples' eta = 1, samples = 300) at epsilon = 1, delta = 1e-9 it times, in one process:

* ``mechanism``: the planned mechanism's run through the registry (what the release's synthesize task does);
  the release's wall time is longer (ingest, validation, discretization, decoding, writing), so the ratios
  below are upper bounds of the share of the release;
* ``fidelity``: the evaluation of :mod:`dq_engine.evaluation.fidelity` as the report runs it -- the true tables, the
  synthetic distribution, the published rows and the zeros / uniform baselines;
* ``report_numbers``: :func:`dqrelease.outputs.report.build_error_report` (the fidelity evaluation, the noisy-marginal
  baselines, per-part and per-marginal errors), given the true workload answers the release computed already;
* ``report_files``: :func:`dqrelease.outputs.report.write_error_report` (JSON, Markdown, HTML with its plots).

``--smoke`` runs tiny sizes in seconds. Output: ``bench/results/fidelity_speed.json`` (with the machine, the
load averages at the start and the end, and every time).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from scale_common import machine, study_grant

from dq_engine import Dataset, Domain, answer_workload, make_rng
from dq_engine.evaluation.fidelity import evaluate_baselines, evaluate_rows, fidelity_reference
from dq_engine.privacy.public import PublicQuantities
from dqrelease.inputs.config import WorkloadConfig, default_workload
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism
from dqrelease.outputs.report import build_error_report, n_status, write_error_report
from dqrelease.plan import build_workload

SIZES = (9, 16, 7, 14, 6, 5, 2, 12, 42, 2, 8, 10, 3, 4, 11, 5, 6, 2, 20, 9, 3, 7, 15, 4, 2)
"""25 public column sizes (2 to 42 values, like Adult's)."""

MECHANISM_KEYS = {"mwem-particles": {}, "dualquery": {"eta": 1.0, "samples": 300}}


def chain_table(sizes: tuple[int, ...], n: int, seed: int) -> Dataset:
    """A public synthetic table: column j copies column j-1's value (mod its size) with probability 0.6."""
    rng = make_rng(seed)
    columns = [rng.integers(0, sizes[0], n)]
    for size in sizes[1:]:
        skew = rng.dirichlet(np.full(size, 0.7))
        fresh = rng.choice(size, size=n, p=skew)
        columns.append(np.where(rng.random(n) < 0.6, columns[-1] % size, fresh))
    domain = Domain.categorical({f"c{j:02d}": size for j, size in enumerate(sizes)})
    return Dataset.from_codes(domain, np.stack(columns, axis=1))


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - start


def run(mechanism: str, data: Dataset, workload, truth: np.ndarray, *, smoke: bool) -> dict:
    public = PublicQuantities(n=data.n, epsilon=1.0, delta=1e-9, domain=data.domain, n_queries=len(workload),
                              n_marginals=workload.n_marginals)
    keys = dict(MECHANISM_KEYS[mechanism])
    if smoke:
        keys["rounds"] = 3
    plan = plan_mechanism(MECHANISMS[mechanism].keys(**keys), PlanInputs(public=public, mode="tight",
                                                                         deterministic=False))
    result, mechanism_seconds = timed(
        run_mechanism, study_grant(plan), RunInputs(data=data, workload=workload, rng=make_rng(1), true_answers=truth)
    )
    # the published rows as the pipeline evaluates them: how many copy each record
    published = np.bincount(result.sample_index(data.n, make_rng(2)), minlength=len(result.records))

    def fidelity() -> None:
        reference = fidelity_reference(data, workload=workload, true_answers=truth)
        evaluate_rows(reference, result.records, result.weights, label="synthetic")
        evaluate_rows(reference, result.records, counts=published, label="published rows")
        evaluate_baselines(reference)

    _, fidelity_seconds = timed(fidelity)
    report, numbers_seconds = timed(
        build_error_report, data=data, workload=workload, result=result, costs=plan.costs, published_counts=published,
        rng=make_rng(3), release_name="bench", run_id="bench", delta=1e-9, accounting=plan.mode, true_answers=truth,
        neighbouring="replace-one", n_status=n_status(data.n),
    )
    with tempfile.TemporaryDirectory() as directory:
        _, files_seconds = timed(write_error_report, report, pathlib.Path(directory))
    return {
        "mechanism": mechanism,
        "rounds": plan.parameters.get("rounds"),
        "synthetic_records": int(result.records.shape[0]),
        "seconds": {"mechanism": mechanism_seconds, "fidelity": fidelity_seconds, "report_numbers": numbers_seconds,
                    "report_files": files_seconds},
        "fidelity_share_of_mechanism": fidelity_seconds / mechanism_seconds,
        "report_share_of_mechanism": (numbers_seconds + files_seconds) / mechanism_seconds,
        "headline": report["summary"]["headline"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument("--out", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent / "results" / "fidelity_speed.json")
    args = parser.parse_args(argv)
    info = machine()
    n, sizes = (2_000, SIZES[:6]) if args.smoke else (200_000, SIZES)
    data = chain_table(sizes, n, seed=13)
    settings = default_workload() if not args.smoke else WorkloadConfig(
        parts=[{"kind": "all_kway", "k": 1}, {"kind": "all_kway", "k": 2}, {"kind": "random_marginals", "k": 3,
                                                                            "count": 4}])
    workload = build_workload(settings, data.domain)
    truth, truth_seconds = timed(answer_workload, data, workload)
    runs = []
    for mechanism in MECHANISM_KEYS:
        runs.append(run(mechanism, data, workload, truth, smoke=args.smoke))
        print(json.dumps(runs[-1]), flush=True)
    result = {
        "command": " ".join([pathlib.Path(sys.executable).name, *sys.argv]),
        "smoke": args.smoke,
        "rows": n,
        "columns": len(sizes),
        "workload": {"description": workload.description, "queries": len(workload), "marginals": workload.n_marginals},
        "true_answers_seconds": truth_seconds,
        "runs": runs,
        "machine": {**info, "load_average_end": os.getloadavg()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
