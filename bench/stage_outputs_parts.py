"""Where ``stage-outputs`` spends its time: decoding, the published suite, and each output format (issue 26).

One chunk of ``--rows`` rows (default 1,000,000) of random value codes over the KDD99 example's schema
(``examples/kdd99/schema.toml``, 42 columns; codes drawn uniformly with a public seed, so the rows break the
schema's rules and the suite's failure path is what is timed), decoded with uniform numbers as a release does, then:
the published suite of Great Expectations on the chunk (``SyntheticValidation``, in this process), and each format
of ``--formats`` written alone by ``write_outputs`` (the CSV text is also what the DuckDB format's content hash is
computed from, so ``duckdb`` alone includes it), and, for comparison, pandas' ``to_csv`` of the chunk
(``pandas_to_csv``: how the CSV text was written before issue 26; ``csv_same_bytes`` says whether the two texts are
equal, when ``csv`` is among the formats). ``--skip-suite`` leaves the published suite out (to time the writing
alone). With ``--raw-rows`` (default 1,000,000; 0 skips it) also the raw suite (``validate_table``, in this process)
on a KDD99 raw table of that many rows, built as ``bench/scale_rows.py`` builds its tables (the shared 10 % file
replicated, then resampled; not timed). Seconds per part, one run, written to ``--out`` with the machine and its
load.

Command: ``.venv/bin/python bench/stage_outputs_parts.py --out bench/results/stage_outputs_parts.json``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale_common import machine  # noqa: E402
from bench.scale_rows import TABLES, build_table  # noqa: E402
from dq_engine.privacy.rng import make_rng  # noqa: E402
from dqrelease.errors import ValidationFailedError  # noqa: E402
from dqrelease.expectations.validate import SyntheticValidation, validate_table  # noqa: E402
from dqrelease.inputs.encoding import domain_from_columns  # noqa: E402
from dqrelease.inputs.schema import load_schema  # noqa: E402
from dqrelease.outputs.decode import RecordDecoder  # noqa: E402
from dqrelease.outputs.publish import write_outputs  # noqa: E402
from dqrelease.warehouse import connect  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--raw-rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default="csv,parquet,duckdb", help="comma-separated; empty: none")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stage_outputs_parts.json")
    parser.add_argument("--skip-suite", action="store_true", help="do not time the published suite")
    args = parser.parse_args()
    schema = load_schema(ROOT / "examples" / "kdd99" / "schema.toml")
    domain = domain_from_columns(schema.columns)
    rng = make_rng(20_261_126)
    codes = np.column_stack([rng.integers(0, size, args.rows) for size in domain.sizes])
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    frame = RecordDecoder(schema, numeric_values="uniform", rng=make_rng(1)).decode(codes)
    seconds["decode"] = time.perf_counter() - began
    if not args.skip_suite:
        validation = SyntheticValidation(schema, numeric_values="uniform", single_value_numbers=True)
        began = time.perf_counter()
        try:
            list(validation.check_each(iter([frame])))
            validation.finish()
        except ValidationFailedError:
            pass  # random codes break the rules: the failure path is timed
        seconds["published_suite"] = time.perf_counter() - began
    written = None
    for fmt in [name for name in args.formats.split(",") if name]:
        with tempfile.TemporaryDirectory() as folder:
            began = time.perf_counter()
            write_outputs(iter([frame]), Path(folder), [fmt])
            seconds[f"write_{fmt}"] = time.perf_counter() - began
            written = (Path(folder) / "synthetic.csv").read_bytes() if fmt == "csv" else written
    began = time.perf_counter()
    text = frame.to_csv(index=False, lineterminator="\n").encode()
    seconds["pandas_to_csv"] = time.perf_counter() - began
    if args.raw_rows:
        seconds["validate_raw"] = _validate_raw(args.raw_rows)
    rounded = {part: round(value, 2) for part, value in seconds.items()}
    record = {"rows": args.rows, "raw_rows": args.raw_rows, "columns": len(schema.columns), "seconds": rounded,
              "csv_same_bytes": None if written is None else written == text, "machine": machine(),
              "command": " ".join(sys.argv)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["seconds"]))
    return 0


def _validate_raw(rows: int) -> float:
    """Seconds of ``validate_table`` on a KDD99 raw table of ``rows`` rows (the table is built first, not timed)."""
    with tempfile.TemporaryDirectory() as folder, connect(None) as con:
        table = build_table(TABLES["kdd99"], rows, Path(folder) / "raw.parquet")
        con.execute("create table raw as select * from read_parquet($path)", {"path": str(table.path)})
        schema = load_schema(ROOT / "examples" / "kdd99" / "schema.toml")
        began = time.perf_counter()
        validate_table(con, "raw", schema, label="raw table")
        return time.perf_counter() - began


if __name__ == "__main__":
    raise SystemExit(main())
