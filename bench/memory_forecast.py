"""The memory forecast of ``dqrelease plan`` against the measured peak, on generated binary schemas.

For each width (20, 50 and 100 binary columns; ``--smoke``: 8 and 12) a fresh process plans the default mechanism
(DualQuery with its table fit, default workload) on a generated schema, forecasts its memory
(:func:`dqrelease.plan.release_memory`), then runs it on random 0/1 data: the mechanism and the fit on a ledger-charged
study grant, the published rows sampled, decoded and written as CSV (one publishing chunk). It records the
process's peak resident set size (``ru_maxrss``) minus its resident size after the imports and a warm-up (the
interpreter, numpy, pandas, CP-SAT, which the forecast leaves to the limit's safety fraction). Each width runs in its
own process so that no peak carries over.

Sizes are small so that one run takes a few minutes on a shared 2-core machine: 20,000 rows, 10 DualQuery rounds, 8
fit rounds on 20,000 particles (the default is 200,000: the particles part is linear in them, tests/cli/
test_memory_forecast.py checks the formula). The forecast's target (issue 26) is within 2x of the measured peak.

Run: ``.venv/bin/python bench/memory_forecast.py`` (writes ``bench/results/memory_forecast.jsonl``; ``--smoke`` for
tiny sizes, ``--out`` for another file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scale_common import ROOT, machine

WIDTHS = (20, 50, 100)
SMOKE_WIDTHS = (8, 12)
ROWS = 20_000
PARTICLES = 20_000
SMOKE_PARTICLES = 2_000


UNREADABLE_SOURCE = "this,is,not,the,table\n"
"""The generated release's source file: reading it would fail the validation (the benchmark builds its data in memory;
the refusal tests check that a refused plan never opened it)."""


def binary_column_name(index: int) -> str:
    """The name of the generated schema's ``index``-th binary column."""
    return f"item{index}"


def write_binary_release(
    folder: Path, *, columns: int, n: int, mechanism: str = "", fit: str = "", run: str = "",
    parquet: Path | None = None,
) -> Path:
    """Write a schema of ``columns`` binary columns, its source file and a release config; returns the config's path.

    The config has the default mechanism and workload at ε = 1; ``mechanism``, ``fit`` and ``run`` are the bodies of
    ``[mechanism]``, ``[mechanism.fit]`` and ``[run]`` (TOML lines; an empty ``[mechanism.fit]`` or ``[run]`` is left
    out). The source is :data:`UNREADABLE_SOURCE` as CSV, or the Parquet file ``parquet`` (columns named by
    :func:`binary_column_name`).
    """
    (folder / "schema.toml").write_text(
        "".join(f'[[columns]]\nname = "{binary_column_name(i)}"\ntype = "binary"\n\n' for i in range(columns)))
    if parquet is None:
        (folder / "data.csv").write_text(UNREADABLE_SOURCE)
        source = 'format = "csv"\npaths = ["data.csv"]'
    else:
        source = f'format = "parquet"\npaths = [{json.dumps(str(parquet))}]'
    fit_section = f"[mechanism.fit]\n{fit}\n" if fit else ""
    run_section = f"[run]\n{run}\n" if run else ""
    config = folder / "release.toml"
    config.write_text(f"""name = "binary-{columns}"
schema_file = "schema.toml"

[source]
{source}

[privacy]
n = {n}
epsilon = 1.0
delta = 1e-6

[mechanism]
{mechanism}

{fit_section}
[accuracy]
worst_one_way_cell = 1.0

[ledger]
path = "ledger.duckdb"
dataset_id = "binary"
initial_cap_epsilon = 5.0
initial_cap_delta = 1e-5

[output]
directory = "out"

{run_section}""")
    return config


def measure_one(columns: int, particles: int, rows: int) -> dict:
    """Plan, forecast and run one width in this process; the forecast and the measured peak above the baseline."""
    import resource

    import numpy as np
    import psutil

    from bench.scale_common import study_grant
    from dq_engine.data.dataset import Dataset
    from dq_engine.privacy.rng import make_rng
    from dqrelease.inputs.config import load_config
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.inputs.schema import load_schema
    from dqrelease.mechanisms import RunInputs, run_mechanism
    from dqrelease.outputs.decode import decode_records
    from dqrelease.plan import build_workload, plan_release, release_memory

    folder = Path(tempfile.mkdtemp(prefix="dqrelease-memory-"))
    config = load_config(write_binary_release(folder, columns=columns, n=rows, mechanism="rounds = 10",
                                              fit=f"particles = {particles}\nrounds = 8"))
    schema = load_schema(config.schema_file)
    domain = domain_from_columns(schema.columns)
    workload = build_workload(config.workload, domain)
    plan = plan_release(config, n=rows, workload=workload)
    forecast = release_memory(config, plan, n=rows, workload=workload)
    grant = study_grant(plan)
    # warm-up: CP-SAT and pandas' writers loaded, so the baseline holds the imports and not the run's arrays
    decode_records(np.zeros((2, columns), dtype=np.int64), schema, numeric_values="bucket_label",
                   rng=make_rng(0)).to_csv(folder / "warm.csv", index=False)
    baseline = psutil.Process().memory_info().rss

    rng = make_rng(20261126)
    began = time.perf_counter()
    data = Dataset.from_codes(domain, rng.integers(0, 2, size=(rows, columns)))
    result = run_mechanism(grant, RunInputs(data=data, workload=workload, rng=rng))
    codes = result.sample_rows(config.output.rows or rows, rng)
    frame = decode_records(codes, schema, numeric_values="bucket_label", rng=rng)
    frame.to_csv(folder / "synthetic.csv", index=False)
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    measured = peak - baseline
    return {
        "columns": columns, "rows": rows, "particles": particles, "fit_rounds": plan.parameters["fit"]["rounds"],
        "dualquery_rounds": plan.parameters["rounds"], "queries": len(workload),
        "forecast_bytes": forecast.total, "forecast_parts": forecast.parts,
        "baseline_rss_bytes": baseline, "peak_rss_bytes": peak, "measured_bytes": measured,
        "forecast_over_measured": round(forecast.total / measured, 3), "seconds": round(seconds, 1),
    }


def main() -> None:
    """Measure every width in its own process and append the results (one JSON line each) to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes (a few seconds).")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "memory_forecast.jsonl")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process: measure this width
    parser.add_argument("--particles", type=int, default=PARTICLES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure_one(args.one, args.particles, ROWS)))
        return
    widths, particles = (SMOKE_WIDTHS, SMOKE_PARTICLES) if args.smoke else (WIDTHS, PARTICLES)
    context = machine()
    lines = []
    for columns in widths:
        completed = subprocess.run(
            [sys.executable, __file__, "--one", str(columns), "--particles", str(particles)],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )
        row = json.loads(completed.stdout.splitlines()[-1])
        lines.append({**row, "smoke": args.smoke, "cores": context["cores"], "memory_gb": context["memory_gb"],
                      "load_average": list(os.getloadavg()),
                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
        print(json.dumps(lines[-1]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
