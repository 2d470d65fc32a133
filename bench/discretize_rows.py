"""Discretization of a KDD99-derived table of n rows: seconds and the memory it adds above the loaded table.

The table is built as ``bench/scale_rows.py`` builds it (the shared KDD99 10 % file repeated, plus a public-seeded
subset of its rows; one Parquet file, cached under ``--work``), loaded into an in-memory DuckDB table, then
:func:`dqrelease.inputs.discretize.discretize` runs on it. Measured: wall seconds of the call, and the process's peak
resident size (``ru_maxrss``) before and after it, so their difference is what discretization adds to the loaded
table. Whatever ``dqrelease`` the interpreter imports is measured: run it with another checkout's interpreter to
compare versions (the JSON records the commit of the imported package).

Command: ``.venv/bin/python bench/discretize_rows.py --rows 5000000 --label groupby`` (appends one line to
``bench/results/discretize_rows.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale_rows import build_table  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "discretize_rows.jsonl"


def main() -> None:
    """Build (once) and discretize the table; append the measurement."""
    import duckdb

    import dqrelease
    from dqrelease.inputs.config import load_source_section
    from dqrelease.inputs.discretize import discretize
    from dqrelease.inputs.schema import load_schema

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--label", required=True, help="what is measured (e.g. the branch)")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "results" / "tmp")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    example = ROOT / "examples" / "kdd99" / "release.toml"
    table = args.work / f"kdd99-{args.rows}.parquet"
    if not table.exists():
        args.work.mkdir(parents=True, exist_ok=True)
        build_table(example, args.rows, table)
    schema = load_schema(load_source_section(example).schema_file)
    package = Path(dqrelease.__file__).resolve().parents[1]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=package,
                            check=False).stdout.strip()
    con = duckdb.connect()
    con.execute("create table raw as select * from read_parquet($path)", {"path": str(table)})
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    began = time.perf_counter()
    dataset = discretize(con, "raw", schema)
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    record = {"label": args.label, "commit": commit, "rows": args.rows, "seconds": round(seconds, 1),
              "maxrss_loaded_mib": round(loaded), "maxrss_mib": round(peak), "added_mib": round(peak - loaded),
              "distinct_records": int(dataset.codes.shape[0]), "load_1min": round(os.getloadavg()[0], 2),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
