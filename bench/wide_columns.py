"""Wide schemas: the default mechanism, or the fixes ``dqrelease plan`` names, released on 1,000 / 10,000 columns.

Issue 26 asks that a 1,000-column and a 10,000-column binary table plan and release with the default mechanism
within the machine's memory, or are refused at plan time with the fix, and that the plan's memory forecast be
quoted against the measured peak. This benchmark does that for each width (default 1,000 then 10,000; ``--smoke``:
30 and 60):

1. **Table.** ``n`` rows (default 100,000) of ``m`` binary columns, written as one Parquet file (int8 0/1, row groups
   of :data:`ROW_GROUP` rows, generated one row group at a time). Everything is drawn from the public seed
   :data:`DATA_SEED`: column ``j`` is 1 with probability ``p_j``, drawn uniformly from
   [:data:`P_LOW`, :data:`P_HIGH`]; every fourth column (``j = 1, 5, 9, ...``) is a noisy copy of the column before
   it: in each row it repeats that column's value with probability :data:`COPY_PROBABILITY`, else it is an
   independent draw with its own ``p_j``. So the table has varied one-way marginals and ``m / 4`` strongly
   dependent pairs (correlation about 0.8) among pairs that are independent, and a release that keeps only the
   one-way marginals misses them.
2. **Config.** ``bench/memory_forecast.py``'s generated binary schema and release config
   (:func:`bench.memory_forecast.write_binary_release`: columns ``item0 .. item{m-1}``, the default mechanism and the
   default workload at ε = 1, δ = 1e-6, ``[accuracy] worst_one_way_cell = 1.0``), its ``[source]`` the Parquet
   file: the config the docs' table of plan verdicts was made with.
3. **Plan.** ``dqrelease plan`` on the default config: its exit code, and when it refuses (exit 2) its one-line
   error and the fixes it names (each ``key = value`` with its forecast).
4. **Runs.** The default mechanism if ``plan`` accepts it, else each named fix whose forecast fits (not the higher
   memory limit): a copy of the config with that one change (``mechanism.name = ...`` replaces ``[mechanism]`` and
   drops ``[mechanism.fit]``, as ``plan`` forecasts it; a ``mechanism.fit.*`` key is added to ``[mechanism.fit]``).
   Each is planned again (``dqrelease plan``: its verdict, and the same memory forecast computed in this process,
   by part) and released by ``python -m dqrelease.cli run --quiet --verbose`` in a child process with Prefect's
   temporary per-run server (``bench/scale_rows.py``'s environment), capped at ``--cap-minutes`` of wall time (a
   capped run is recorded as capped, not as a result). Measured with ``bench/scale_common.run_timed``: wall time,
   peak RSS of the whole process tree (the CLI, the Prefect server, the validation side process) sampled every
   ``--interval`` seconds with psutil, the per-stage times and peaks of ``scale_rows.stage_costs``, the exit code
   and the CLI's error line. ``uptime`` is recorded before and after each run (the machine is shared).

The forecast leaves out the interpreter and its imports (about 0.5 GiB for the CLI, 0.3 GiB for the validation side
process, plus Prefect's server): the tree's peak includes them, so forecast / measured is below 1 on small runs.
``--stop-at HH:MM`` (UTC) starts no run after that time (recorded as not started); ``--end-by HH:MM`` caps a run
that is still going then (its cap, ``cap_seconds``, is the smaller of the two). A time more than 12 hours before the
clock is the next day's (:func:`seconds_until`).

Output: ``--out`` (default ``bench/results/wide_columns.json``) and a Markdown table beside it (``.md``).

Usage (one timed benchmark at a time on the shared machine)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/wide_columns.py --widths 1000

``--smoke``: 30 and 60 columns, 2,000 rows, 3 DualQuery rounds and 2 fit rounds, a memory limit of 0.1 GiB so
that ``plan`` refuses the default and names fixes, run with ``--accept-low-utility``
(tests/bench/test_wide_columns.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.memory_forecast import binary_column_name, write_binary_release
from bench.scale_common import ROOT, machine, public_text, run_timed, save_json_and_markdown
from bench.scale_rows import environment, error_line, plan_forecast, prepare_prefect_home, stage_costs

WIDTHS = (1_000, 10_000)
SMOKE_WIDTHS = (30, 60)
ROWS = 100_000
SMOKE_ROWS = 2_000
DATA_SEED = 20261126
"""Public seed of the generated tables (marginal probabilities and rows)."""
P_LOW, P_HIGH = 0.02, 0.5
"""Range of the columns' probabilities of a 1."""
COPY_EVERY = 4
"""Every ``COPY_EVERY``-th column (from column 1) is a noisy copy of the column before it."""
COPY_PROBABILITY = 0.8
"""Probability that a dependent column repeats the previous column's value in a row."""
ROW_GROUP = 10_000
"""Rows per Parquet row group (the table is generated one row group at a time)."""
CAP_MINUTES = 25.0
KILL_ABOVE_GIB = 21.0
"""A run whose process tree goes over this is killed by the benchmark (the 23.5 GiB machine is shared)."""
SMOKE_MECHANISM, SMOKE_FIT, SMOKE_MEMORY_GIB = "rounds = 3", "rounds = 2", 0.1
"""What ``--smoke`` sets: the cheapest DualQuery and fit, and a memory limit that the default's forecast exceeds."""
FIX = re.compile(
    r"^(?P<key>[\w.]+) = (?P<value>\S+) \(forecast (?P<forecast>[^,)]+)(?:, it chooses (?P<chooses>[\w-]+))?\)$"
)
"""One fix of ``plan``'s memory refusal: ``key = value (forecast 1.62 GiB[, it chooses dualquery])``."""
MEMORY_LINE = re.compile(r"^memory\s+(about .*?)\s+at\s+the\s+peak", re.M | re.S)
"""``plan``'s memory line: the forecast and its parts (wrapped over lines when it is long)."""


def write_table(path: Path, *, columns: int, rows: int) -> dict:
    """Write the generated binary table (see the module docstring) to the Parquet file ``path``; its description."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dq_engine.privacy.rng import make_rng

    began = time.perf_counter()
    rng = make_rng(DATA_SEED)
    probability = rng.uniform(P_LOW, P_HIGH, size=columns)
    dependent = np.arange(1, columns, COPY_EVERY)
    names = [binary_column_name(j) for j in range(columns)]
    schema = pa.schema([(name, pa.int8()) for name in names])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, ROW_GROUP):
            size = min(ROW_GROUP, rows - start)
            values = (rng.random((size, columns), dtype=np.float32) < probability.astype(np.float32)).astype(np.int8)
            copied = rng.random((size, dependent.size), dtype=np.float32) < COPY_PROBABILITY
            values[:, dependent] = np.where(copied, values[:, dependent - 1], values[:, dependent])
            writer.write_table(pa.Table.from_arrays([pa.array(values[:, j]) for j in range(columns)], schema=schema))
            del values, copied
    return {"rows": rows, "columns": columns, "seed": DATA_SEED, "probability_range": [P_LOW, P_HIGH],
            "dependent_columns": int(dependent.size), "copy_probability": COPY_PROBABILITY, "row_group": ROW_GROUP,
            "parquet_mb": round(path.stat().st_size / 2**20, 1), "seconds": round(time.perf_counter() - began, 1)}


def shown_size(text: str) -> float:
    """Bytes of a size as ``plan`` shows it (``40 MiB``, ``16.7 GiB``; ``dqrelease.memory_estimate.shown_bytes``)."""
    value, unit = text.split()
    return float(value.replace(",", "")) * 2 ** {"MiB": 20, "GiB": 30, "TiB": 40, "PiB": 50}[unit]


def uptime() -> str:
    """The ``uptime`` line (time, load averages)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def plan_verdict(config: Path, env: dict[str, str]) -> dict:
    """``dqrelease plan`` on ``config``: exit code, error line, the named fixes, the printed memory forecast."""
    done = subprocess.run([sys.executable, "-m", "dqrelease.cli", "plan", str(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    text = done.stdout + done.stderr
    error = next((line for line in text.splitlines() if line.startswith(("error:", "internal error:"))), None)
    memory = MEMORY_LINE.search(text)
    verdict = {"returncode": done.returncode, "accepted": done.returncode == 0, "error": error,
               "memory_line": None if memory is None else " ".join(memory.group(1).split()), "fixes": []}
    if error and "; set " in error:
        for named in error.split("; set ", 1)[1].split(", or "):
            fix = FIX.match(named.strip())
            if fix:  # the higher memory limit is named without a forecast: not a fix on this machine
                verdict["fixes"].append(fix.groupdict())
    return verdict


def changed_sections(fix: dict | None, *, mechanism: str, fit: str) -> tuple[str, str]:
    """The ``[mechanism]`` and ``[mechanism.fit]`` bodies of the config with ``fix`` applied (None: unchanged)."""
    if fix is None:
        return mechanism, fit
    key, value = fix["key"], fix["value"]
    if key == "mechanism.name":  # another mechanism with its default keys, as plan forecasts it
        return f"name = {value}", ""
    if key.startswith("mechanism.fit."):
        name = key.removeprefix("mechanism.fit.")
        kept = [line for line in fit.splitlines() if line.split("=")[0].strip() != name]
        return mechanism, "\n".join([*kept, f"{name} = {value}"])
    raise SystemExit(f"plan named a fix of {key}, which bench/wide_columns.py cannot apply; add it there")


def release_one(work: Path, *, table: Path, columns: int, fix: dict | None, args: argparse.Namespace,
                env: dict[str, str]) -> dict:
    """Plan and release one config (the default, or the default with ``fix``) in ``work``; the run's record."""
    mechanism, fit = changed_sections(fix, mechanism=args.mechanism, fit=args.fit)
    config = write_binary_release(work, columns=columns, n=args.rows, mechanism=mechanism, fit=fit, run=args.run,
                                  parquet=table)
    record: dict = {"variant": "default" if fix is None else f"{fix['key']} = {fix['value']}",
                    "config": public_text(config.read_text().replace(str(table), "$WORK/table.parquet"))}
    record["plan"] = plan_verdict(config, env)
    try:
        record["forecast"] = plan_forecast(config)
    except Exception as error:  # plan refused the config: its verdict says why
        record["forecast"] = {"error": f"{type(error).__name__}: {error}"}
    command = [sys.executable, "-m", "dqrelease.cli", "run", "--quiet", "--verbose",
               *(["--accept-low-utility"] if args.smoke else []), str(config)]
    record["command"] = public_text(" ".join(command).replace(str(work), "$WORK"))
    record["uptime_before"] = uptime()
    timeout = min(args.cap_minutes * 60, seconds_until(args.end_by))
    record["cap_seconds"] = round(timeout)
    run = run_timed(command, env=env, timeout=timeout, interval=args.interval,
                    kill_above=int(args.kill_above_gib * 2**30))
    record["uptime_after"] = uptime()
    stages, flow_seconds = stage_costs(run)
    measured = run.peak_rss_tree_gb
    floor = next((stage["peak_rss_gb"] for stage in stages if stage["stage"] == "startup"), None)
    forecast = record["forecast"].get("memory_forecast_gb")
    complete = forecast is not None and run.returncode == 0 and not run.timed_out and not run.memory_exceeded
    record.update(
        status=("over memory" if run.memory_exceeded else "capped" if run.timed_out
                else "released" if run.returncode == 0 else "killed" if run.returncode < 0 else "failed"),
        returncode=run.returncode, wall_seconds=round(run.wall_seconds, 1),
        error=(f"the process tree went over {args.kill_above_gib:g} GiB; the benchmark killed it" if run.memory_exceeded
               else error_line(run, timeout)),
        flow_seconds=flow_seconds, peak_rss_tree_gb=round(measured, 3), peak_rss_main_gb=round(run.peak_rss_main_gb, 3),
        startup_rss_gb=floor,
        forecast_over_measured=round(forecast / measured, 2) if complete else None,
        forecast_over_above_startup=(round(forecast / (measured - floor), 2)
                                     if complete and floor is not None and measured > floor else None),
        stages=stages,
    )
    if run.returncode != 0:
        record["log_tail"] = public_text(run.output[-3000:].replace(str(work), "$WORK"))
    return record


def seconds_until(moment: str | None, *, now: time.struct_time | None = None) -> float:
    """Seconds from ``now`` (default: the clock) to ``HH:MM`` UTC (0 if it has passed; infinite for None).

    A time more than 12 hours before ``now`` is the next day's, so that ``--stop-at 00:30`` given at 23:40 means 50
    minutes later, not a time that passed 23 hours ago; a time up to 12 hours before ``now`` has passed.
    """
    if moment is None:
        return math.inf
    hours, minutes = (int(part) for part in moment.split(":"))
    now = now or time.gmtime()
    delta = hours * 3600 + minutes * 60 - (now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec)
    if delta < -12 * 3600:
        delta += 24 * 3600
    return max(0.0, float(delta))


def past(stop_at: str | None) -> bool:
    """Whether the UTC clock is at or past ``HH:MM`` (None: never)."""
    return stop_at is not None and seconds_until(stop_at) == 0


def measure_width(columns: int, args: argparse.Namespace, env: dict[str, str], *,
                  save: Callable[[dict], None]) -> dict:
    """Generate the table of ``columns`` columns, plan its default, release the default or each fix; the record.

    ``save`` is called with the record so far after the plan and after each run (a run stopped at a deadline keeps
    what finished).
    """
    work = args.work / f"binary-{columns}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    record: dict = {"columns": columns, "rows": args.rows, "machine": machine(), "runs": []}
    try:
        table = work / "table.parquet"
        record["table"] = write_table(table, columns=columns, rows=args.rows)
        default = work / "default"
        default.mkdir()
        config = write_binary_release(default, columns=columns, n=args.rows, mechanism=args.mechanism, fit=args.fit,
                                      run=args.run, parquet=table)
        record["default_plan"] = plan_verdict(config, env)
        save(record)
        fixes = ([None] if record["default_plan"]["accepted"]
                 else sorted(record["default_plan"]["fixes"], key=lambda fix: shown_size(fix["forecast"])))
        for index, fix in enumerate(fixes):
            name = "default" if fix is None else f"{fix['key']} = {fix['value']}"
            if args.skip and any(word in name for word in args.skip):
                record["runs"].append({"variant": name, "status": "skipped", "error": "--skip"})
                continue
            if past(args.stop_at):
                record["runs"].append({"variant": name, "status": "not started",
                                       "error": f"past --stop-at {args.stop_at} UTC"})
                continue
            folder = work / f"run-{index}"
            folder.mkdir()
            try:
                record["runs"].append(release_one(folder, table=table, columns=columns, fix=fix, args=args, env=env))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            save(record)
            print(json.dumps({key: record["runs"][-1].get(key) for key in (
                "variant", "status", "error", "wall_seconds", "peak_rss_tree_gb", "forecast_over_measured")}),
                flush=True)
    finally:
        record["machine"]["load_average_end"] = os.getloadavg()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return record


def _gb(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def results_markdown(records: list[dict]) -> str:
    """Per width: the default's plan verdict, then each run's forecast, measured peak, ratio, time and outcome."""
    lines = ["# Wide schemas released: forecast against measured peak (bench/wide_columns.py)", ""]
    for record in sorted(records, key=lambda r: r["columns"]):
        plan = record["default_plan"]
        lines += [f"## {record['columns']:,} binary columns, {record['rows']:,} rows", "",
                  "Default mechanism: " + ("accepted by `plan`" if plan["accepted"] else f"`{plan['error']}`"), "",
                  "| run | `plan` | forecast, GiB | measured peak of the process tree, GiB | forecast / measured | "
                  "wall, s | outcome |", "|---|---|---:|---:|---:|---:|---|"]
        for run in record["runs"]:
            verdict = run.get("plan", {})
            said = ("–" if not verdict else "accepted" if verdict["accepted"]
                    else f"refused (exit {verdict['returncode']})")
            forecast = run.get("forecast", {}).get("memory_forecast_gb")
            ratio = run.get("forecast_over_measured")
            wall = run.get("wall_seconds")
            outcome = run["status"] if run["status"] == "released" else f"{run['status']}: {run.get('error')}"
            lines.append(f"| `{run['variant']}` | {said} | {_gb(forecast)} | {_gb(run.get('peak_rss_tree_gb'))} | "
                         f"{'–' if ratio is None else f'{ratio:.2f}'} | {'–' if wall is None else f'{wall:,.0f}'} | "
                         f"{outcome} |")
        for run in record["runs"]:
            if run.get("uptime_before"):
                lines.append(f"- `{run['variant']}`: before `{run['uptime_before']}`; after `{run['uptime_after']}`")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default=None, help="comma-separated column counts (default 1000,10000)")
    parser.add_argument("--rows", type=int, default=None, help=f"rows of each table (default {ROWS:,})")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "wide_columns.json")
    parser.add_argument("--smoke", action="store_true", help="tiny widths and rows, cheap settings, for the test")
    parser.add_argument("--append", action="store_true", help="keep the other widths' records of an existing --out")
    parser.add_argument("--cap-minutes", type=float, default=CAP_MINUTES, help="wall-clock cap of one release")
    parser.add_argument("--stop-at", default=None, help="HH:MM UTC after which no release starts")
    parser.add_argument("--end-by", default=None, help="HH:MM UTC at which a running release is capped")
    parser.add_argument("--skip", action="append", default=[], help="skip runs whose variant contains this text")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    parser.add_argument("--kill-above-gib", type=float, default=KILL_ABOVE_GIB,
                        help="kill a run whose process tree goes over this (recorded as over memory)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dqrelease-wide-columns")
    parser.add_argument("--keep", action="store_true", help="keep each width's table and outputs")
    parser.add_argument("--prefect-home", type=Path, default=None, help="default: WORK/prefect-home")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")] if args.widths else list(SMOKE_WIDTHS if args.smoke else WIDTHS)
    args.rows = args.rows or (SMOKE_ROWS if args.smoke else ROWS)
    args.mechanism, args.fit = (SMOKE_MECHANISM, SMOKE_FIT) if args.smoke else ("", "")
    args.run = f"memory_limit_gib = {SMOKE_MEMORY_GIB}" if args.smoke else ""
    records = []
    if args.append and args.out.exists():
        records = [r for r in json.loads(args.out.read_text())["records"] if r["columns"] not in widths]
    env = environment(args.prefect_home or args.work / "prefect-home")
    prepare_prefect_home(env)
    def save(done: list[dict], *, complete: bool) -> None:
        result = {"command": public_text(" ".join([".venv/bin/python", *sys.argv])), "smoke": args.smoke,
                  "complete": complete, "cap_minutes": args.cap_minutes, "interval_seconds": args.interval,
                  "records": done}
        save_json_and_markdown(args.out, result, results_markdown([r for r in done if "default_plan" in r]),
                               default=float)

    for columns in widths:
        records.append(measure_width(columns, args, env, save=lambda partial: save([*records, partial],
                                                                                    complete=False)))
    save(records, complete=True)


if __name__ == "__main__":
    main()
