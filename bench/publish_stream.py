"""Publishing alone: decode, render and write a stream of published chunks in every format (issue 26).

What runs: ``--rows`` published rows over the KDD99 example's schema (``examples/kdd99/schema.toml``, 42 columns),
each a copy of one of ``--records`` synthetic records (each column's codes geometric with p = 0.6 from a public
seed, so few values dominate, as in a fitted table; the record each row copies drawn uniformly), as a release
publishes them: :class:`~dqrelease.outputs.published_rows.PublishedRows` with bucket labels (the default
``output.numeric_values``), decoded and rendered a publishing chunk at a time (``PUBLISH_CHUNK_ROWS``) by
:meth:`~dqrelease.outputs.published_rows.PublishedRows.rendered` and written by
:func:`~dqrelease.outputs.publish.write_outputs` as CSV, Parquet and a DuckDB table: the driver's part of
``stage-outputs`` without the published suite (which runs in the side process) and without Prefect. The default
``--records`` is the KDD99 release's order of magnitude (200,000 particles of the table fit plus DualQuery's records).
With ``--suite`` the published suite runs too, as ``stage-outputs`` runs it
(:meth:`~dqrelease.outputs.published_rows.PublishedRows.checked`, and ``finish``; on a commit before that method,
every chunk is sent to the suite, as those commits did), its side process started before the clock (in a release
``validate-raw`` has started it); the random records break some of the schema's checks, so the suite's failure path
is timed and the run records ``suite_failed``.
Before 2026-11-28 (commit bc82590 and earlier) the script decoded ``--rows`` independent random rows instead, so its
earlier results are not comparable with later ones.
Each repeat is a fresh child process, so its peak RSS (``ru_maxrss``) is its own. The files' hashes are recorded,
so two trees can be checked to write the same bytes.

To compare two commits, run it from a checkout of each (with its own ``.venv``) in the same session, one after the
other under the benchmark lock.

Usage::

    .venv/bin/python bench/publish_stream.py --rows 3000000 --records 200000 --repeats 3 \
        --out bench/results/publish_stream.json
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
sys.path.insert(0, str(ROOT))

from bench.scale_common import machine  # noqa: E402


def one(rows: int, records: int, *, suite: bool) -> dict:
    """One timed stream in this process (see the module docstring)."""
    import numpy as np

    from dq_engine.privacy.rng import make_rng
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.inputs.schema import load_schema
    from dqrelease.memory_estimate import PUBLISH_CHUNK_ROWS
    from dqrelease.outputs.decode import RecordDecoder
    from dqrelease.outputs.publish import write_outputs
    from dqrelease.outputs.published_rows import PublishedRows

    schema = load_schema(ROOT / "examples" / "kdd99" / "schema.toml")
    domain = domain_from_columns(schema.columns)
    rng = make_rng(5)
    codes = np.column_stack([np.minimum(rng.geometric(0.6, records) - 1, size - 1) for size in domain.sizes])
    published = PublishedRows(records=codes.astype(domain.code_dtype),
                              index=rng.integers(0, records, rows).astype(np.int32),
                              decoder=RecordDecoder(schema, numeric_values="bucket_label", rng=make_rng(1)),
                              chunk_rows=PUBLISH_CHUNK_ROWS)
    failed = validation = None
    if suite:  # the side process and its suite are started before the clock, as a release's validate-raw has them
        from dqrelease.errors import ValidationFailedError
        from dqrelease.expectations.validate import SyntheticValidation

        validation = SyntheticValidation(schema, numeric_values="bucket_label")
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        began = time.perf_counter()
        chunks = published.rendered(csv=True, scratch=scratch)
        if suite:
            checked = getattr(published, "checked", None)  # absent before 2026-11-28: every chunk was sent
            chunks = validation.check_each(chunks) if checked is None else checked(chunks, validation)
        outputs = write_outputs(chunks, scratch / "out", ["csv", "parquet", "duckdb"])
        if suite:
            try:
                validation.finish()
                failed = False
            except ValidationFailedError:
                failed = True
        wall = time.perf_counter() - began
    return {"wall_seconds": round(wall, 2), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "csv_sha256": outputs["csv"]["sha256"], "parquet_sha256": outputs["parquet"]["sha256"],
            "duckdb_content_sha256": outputs["duckdb"]["content_sha256"], "suite_failed": failed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--records", type=int, default=200_000, help="synthetic records the rows copy")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--suite", action="store_true", help="run the published suite as stage-outputs does")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "publish_stream.json")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.rows, args.records, suite=args.suite)))
        return 0
    record = {"rows": args.rows, "records": args.records, "suite": args.suite, "machine": machine(),
              "command": " ".join(sys.argv[0:1] + sys.argv[1:]),
              "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True, check=False).stdout.strip(), "runs": []}
    for _ in range(args.repeats):
        child = subprocess.run([sys.executable, __file__, "--one", "--rows", str(args.rows),
                                "--records", str(args.records), *(["--suite"] if args.suite else [])],
                               capture_output=True, text=True, check=True)
        run = json.loads(child.stdout.strip().splitlines()[-1])
        record["runs"].append(run)
        print(json.dumps(run), flush=True)
    walls = [run["wall_seconds"] for run in record["runs"]]
    record["wall_median_seconds"] = statistics.median(walls)
    record["load_average_end"] = machine()["load_average_start"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"median {record['wall_median_seconds']} s over {len(walls)} runs; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
