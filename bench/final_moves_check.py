"""Does resampling and moving the particles before rows are published (``final_moves``) change the published table?

A check of one hypothesis of issue 25: that MWEM on particles publishes copies of a few heavy particles (on
HAILFINDER, 50,000 rows at ε = 1, 38,990 distinct rows, one repeated 91 times, where the data has 50,000 distinct
rows) and that these copies are what makes its pairs further from the truth than independent columns. Runs the
independent-columns release and the named mechanism (``bench/small_tables.py``'s ``run_one``) with each value of
:data:`dq_engine.mechanisms.defaults.MWEM_PARTICLES_FINAL_MOVES`, one line of JSON per run.

Command: ``.venv/bin/python bench/final_moves_check.py hailfinder mwem-particles 0,3 0``
(setting, mechanism, comma-separated final moves, seed); results in ``bench/results/final_moves_check.jsonl``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dq_engine.mechanisms.defaults as defaults  # noqa: E402
from bench.fidelity import SETTINGS  # noqa: E402
from bench.small_tables import run_one  # noqa: E402
from dq_engine.evaluation.fidelity import fidelity_reference  # noqa: E402

FIGURES = ("worst_one_way_cell", "mean_two_way_tvd", "workload_max_error", "distinct_rows", "max_multiplicity",
           "seconds", "median_tvd_independent_pairs", "median_tvd_dependent_pairs")


def main(argv: list[str]) -> int:
    setting, mechanism, moves, seed = argv[0], argv[1], [int(m) for m in argv[2].split(",")], int(argv[3])
    loaded = SETTINGS[setting].load(False)
    reference = fidelity_reference(loaded.data, workload=loaded.workload)
    independent = run_one("independent", loaded, reference, 1.0, seed, smoke=False)
    base = np.array(independent["pair_tvd"])
    for final_moves in moves:
        defaults.MWEM_PARTICLES_FINAL_MOVES = final_moves
        row = run_one(mechanism, loaded, reference, 1.0, seed, smoke=False)
        tvd = np.array(row["pair_tvd"])
        print(json.dumps({"setting": setting, "mechanism": mechanism, "seed": seed, "final_moves": final_moves,
                          **{k: row.get(k) for k in FIGURES}, "pairs": len(tvd),
                          "better_than_independent": int((tvd < base).sum()),
                          "worse_by_0.02": int((tvd > base + 0.02).sum())}), flush=True)
    print(json.dumps({"setting": setting, "mechanism": "independent", "seed": seed,
                      **{k: independent.get(k) for k in FIGURES}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
