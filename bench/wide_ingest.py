"""The ingest of a wide table: DuckDB's default layout against the wide layout, peak memory and time.

``dqrelease.inputs.ingest`` writes a source of more than 256 declared columns on one thread in row groups of 32,768
rows (:func:`dqrelease.inputs.ingest.ingest_database`); the memory forecast counts that stage as
:func:`dqrelease.memory_estimate.ingest_bytes`. This benchmark measures both, for each width (default 1,000 and
10,000 binary columns of 100,000 rows; ``--smoke``: 300 columns of 2,000 rows):

1. **Table.** ``bench/wide_columns.py``'s generated binary table (:func:`bench.wide_columns.write_table`), one
   Parquet file, and ``bench/memory_forecast.py``'s schema and release config for it.
2. **Ingest.** In a fresh child process per run (so that its peak resident memory, ``ru_maxrss``, is the ingest's):
   the imports, then :func:`dqrelease.inputs.ingest.ingest_source` into a new working database opened either with
   DuckDB's defaults (``default``: one thread per core, row groups of 122,880 rows: the layout before the change) or
   as a release opens it (``release``: :func:`~dqrelease.inputs.ingest.ingest_database`), or with the wide layout
   whatever the width (``wide``, with ``--layouts``: where the boundary was chosen). Recorded: the ingest's
   seconds, the peak, the resident memory after the imports, and the forecast's ingest bytes.

``--repeats`` runs each layout that many times (the data is fixed; the repeats show the spread). ``uptime`` is
recorded before and after (the machine is shared).

Output: ``--out`` (default ``bench/results/wide_ingest.json``) and a Markdown table beside it (``.md``).

Usage (one timed benchmark at a time on the shared machine)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/wide_ingest.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.memory_forecast import write_binary_release  # noqa: E402
from bench.scale_common import machine, save_json_and_markdown  # noqa: E402
from bench.wide_columns import uptime, write_table  # noqa: E402

LAYOUTS = ("default", "release", "wide")
"""``default``: DuckDB's defaults (the layout before the change); ``release``: as ``dqrelease run`` ingests; ``wide``:
the wide layout whatever the width (to measure it below the boundary)."""

GIB = 2**30


def ingest_once(config_path: Path, database: Path, layout: str) -> dict:
    """Ingest the config's source into ``database`` with ``layout``; seconds and peaks (run in a child process)."""
    from dqrelease.inputs.config import load_config
    from dqrelease.inputs.ingest import WIDE_ROW_GROUP_ROWS, ingest_database, ingest_source
    from dqrelease.inputs.schema import load_schema
    from dqrelease.warehouse import private_database

    config = load_config(config_path)
    schema = load_schema(config.schema_file)
    imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    began = time.perf_counter()
    opened = (ingest_database(database, config.source, schema) if layout == "release"
              else private_database(database, row_group_rows=WIDE_ROW_GROUP_ROWS, threads=1) if layout == "wide"
              else private_database(database))
    with opened as con:
        ingest_source(con, config.source, schema)
    return {"seconds": round(time.perf_counter() - began, 2), "imports_gb": round(imports / GIB, 3),
            "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB, 3)}


def measure_width(columns: int, rows: int, repeats: int, work: Path, layouts: tuple[str, ...]) -> dict:
    """Every layout ``repeats`` times on a generated table of ``columns`` x ``rows``; the width's record."""
    from dqrelease.memory_estimate import ingest_bytes

    folder = work / f"w{columns}"
    folder.mkdir()
    table = write_table(folder / "table.parquet", columns=columns, rows=rows)
    config = write_binary_release(folder, columns=columns, n=rows, parquet=folder / "table.parquet")
    record = {"columns": columns, "rows": rows, "table": table,
              "forecast_ingest_gb": round(ingest_bytes(source_format="parquet", columns=columns, n=rows) / GIB, 3),
              "uptime_before": uptime(), "runs": []}
    for repeat in range(repeats):
        for layout in layouts:
            database = folder / f"{layout}{repeat}.duckdb"
            child = subprocess.run([sys.executable, __file__, "--child", layout, str(config), str(database)],
                                   capture_output=True, text=True, check=True, cwd=ROOT)
            run = json.loads(child.stdout.strip().splitlines()[-1])
            run.update(layout=layout, repeat=repeat, above_imports_gb=round(run["peak_gb"] - run["imports_gb"], 3))
            record["runs"].append(run)
            database.unlink()
    record["uptime_after"] = uptime()
    for layout in layouts:
        runs = [run for run in record["runs"] if run["layout"] == layout]
        record[layout] = {key: {"median": statistics.median(run[key] for run in runs),
                                "range": [min(run[key] for run in runs), max(run[key] for run in runs)]}
                          for key in ("seconds", "peak_gb", "above_imports_gb")}
    if "release" in layouts:
        record["forecast_over_measured"] = round(
            record["forecast_ingest_gb"] / record["release"]["above_imports_gb"]["median"], 2)
    return record


def results_markdown(records: list[dict]) -> str:
    """The benchmark's table: per width and layout, medians and ranges."""
    lines = ["# Ingest of a wide table: DuckDB's defaults against the release's layout (bench/wide_ingest.py)", "",
             "| columns x rows | layout | ingest, s | peak RSS, GiB | above the imports, GiB | forecast, GiB |",
             "|---|---|---:|---:|---:|---:|"]
    for record in records:
        for layout in (layout for layout in LAYOUTS if layout in record):
            cells = [f"{record[layout][key]['median']:.2f} [{record[layout][key]['range'][0]:.2f}–"
                     f"{record[layout][key]['range'][1]:.2f}]" for key in ("seconds", "peak_gb", "above_imports_gb")]
            forecast = f"{record['forecast_ingest_gb']:.2f}" if layout == "release" else "–"
            shape = f"{record['columns']:,} x {record['rows']:,}"
            lines.append(f"| {shape} | {layout} | {' | '.join(cells)} | {forecast} |")
    lines += ["", "Medians [range] over the repeats; `default`: one thread per core and 122,880-row groups, `release`: "
              "as `dqrelease run` ingests (one thread and 32,768-row groups above 256 columns), `wide`: one thread and "
              "32,768-row groups whatever the width."]
    lines += [f"- {record['columns']:,} columns: before `{record['uptime_before']}`; after `{record['uptime_after']}`"
              for record in records]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=["default", "release"])
    parser.add_argument("--smoke", action="store_true", help="300 columns of 2,000 rows, one repeat")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "wide_ingest.json")
    parser.add_argument("--child", nargs=3, metavar=("LAYOUT", "CONFIG", "DATABASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        layout, config, database = args.child
        print(json.dumps(ingest_once(Path(config), Path(database), layout)))
        return
    widths, rows, repeats = ([300], 2_000, 1) if args.smoke else (args.widths, args.rows, args.repeats)
    with tempfile.TemporaryDirectory(prefix="wide-ingest-") as work:
        records = [measure_width(columns, rows, repeats, Path(work), tuple(args.layouts)) for columns in widths]
    out = {"command": "bench/wide_ingest.py " + " ".join(sys.argv[1:]), "smoke": args.smoke, "machine": machine(),
           "records": records}
    save_json_and_markdown(args.out, out, results_markdown(records))
    print(results_markdown(records))


if __name__ == "__main__":
    main()
