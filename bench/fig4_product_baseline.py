"""Figure 4 data, no DualQuery: records drawn from Gaussian noisy one-way marginals that spend the whole budget.

A reference point for ``fig4_attributes.py --free-policy dp-marginal-gaussian``: the Figure 4 data has
independent bits, so the product of its one-way marginals *is* its distribution, and a mechanism that only
measures one-way marginals is the natural competitor. Same data, workload and seeds as ``fig4_attributes.py``;
ρ = the whole zCDP budget of (ε, δ) = (1, 10⁻³) (tight conversion), noise from
:func:`dq_engine.oracle.free_attributes.gaussian_one_way_marginals`; ``records`` independent records drawn from
the noisy product (64 ≈ DualQuery's T at d = 100,000, and 500).

Usage::

    .venv/bin/python bench/fig4_product_baseline.py --sizes 5000,50000,100000 \\
        --out bench/results/fig4_product_baseline.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from fig4_attributes import DATA_SEED, DELTA, EPSILON, WORKLOAD_SEED, biased_bits, total_rho
from scale_common import errors_against_baselines, machine

from dq_engine.data.answers import answer_workload
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.workload import random_queries
from dq_engine.oracle.free_attributes import gaussian_marginal_sigma, gaussian_one_way_marginals
from dq_engine.privacy.rng import make_rng

NOISE_SEED, RECORDS_SEED = 4_100, 4_101


def run_one(d: int, *, n: int, queries: int, record_counts: tuple[int, ...]) -> dict:
    """Errors of ``records`` draws from the noisy product, and of the zeros / uniform baselines, at one size."""
    domain = Domain.binary(d)
    packed, _ = biased_bits(d, n, make_rng(DATA_SEED + d))
    data = Dataset.from_packed_bits(domain, packed, n)
    workload = random_queries(domain, 3, queries, make_rng(WORKLOAD_SEED))
    truth = answer_workload(data, workload)
    rho = total_rho("tight")
    marginals, _ = gaussian_one_way_marginals(data, rho=rho, rng=make_rng(NOISE_SEED))
    ones = np.array([p[1] for p in marginals])
    rng = make_rng(RECORDS_SEED)
    rows = {}
    for count in record_counts:
        records = (rng.random((count, d)) < ones).astype(np.int64)
        errors = errors_against_baselines(workload, truth, records)
        rows[str(count)] = {"product": errors.pop("dualquery"), **errors}  # the records are the product's
    return {"attributes": d, "n": n, "queries": queries, "rho": rho,
            "sigma": gaussian_marginal_sigma(domain, n=n, rho=rho), "errors_by_records": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,50000,100000")
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--records", default="64,500")
    parser.add_argument("--out", type=Path, default=Path("bench/results/fig4_product_baseline.json"))
    args = parser.parse_args()
    report = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(),
              "epsilon": EPSILON, "delta": DELTA, "rows": []}
    for d in (int(s) for s in args.sizes.split(",")):
        row = run_one(d, n=args.n, queries=args.queries, record_counts=tuple(int(r) for r in args.records.split(",")))
        report["rows"].append(row)
        for count, e in row["errors_by_records"].items():
            print(f"d={d:>7} records={count:>4} mean {e['product']['mean_error']:.4f} max "
                  f"{e['product']['max_error']:.3f} (zeros {e['zeros']['mean_error']:.4f}, "
                  f"uniform {e['uniform']['mean_error']:.4f})", flush=True)
    report["machine"]["load_average_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=float))


if __name__ == "__main__":
    main()
