"""Rows: how each stage of ``dqrelease run`` grows with the number of rows (issue 26).

Tables: KDD Cup 99 10 % (``examples/kdd99/release.toml``: the shared file ``kddcup99_10pct/kddcup.data_10_percent.gz``,
494,021 rows, 42 columns) and Adult (``examples/adult/release.toml``: ``adult.data`` + ``adult.test`` beside the
example, 48,842 rows, 15 columns; the same bytes as the shared ``adult_uci/``). Each example's ``[source]`` is read
with the pipeline's own reader (:func:`dqrelease.inputs.ingest.ingest_source`, into an in-memory DuckDB table: the
base table, its declared columns as trimmed text), and a table of exactly ``n`` rows is written from it by one DuckDB
``COPY`` to a Parquet file in the size's work folder, never as Python objects:

* the base table ``k = n // N`` times (a cross join with ``range(k)``), plus
* ``r = n mod N`` of its rows without replacement, the first ``r`` in the order of ``hash(rowid, 0)``: a public
  seed, so the same ``n`` gives the same rows.

So the 5,000,000-row KDD99 table is the file 10 times plus 59,790 of its rows, and 20,000 Adult rows are a seeded
subset. Replication keeps every value and every rule of the schema valid and the discretized domain unchanged:
only ``n`` moves. The default mechanism's plan moves with it up to a point: DualQuery's T is the largest that fits
ε, at most 300 (``ROUNDS_CAP``), and a round costs less privacy the larger ``n`` is (KDD99: T = 280 at 0.5M rows,
the cap at 5M, where the table fit takes the budget DualQuery cannot use). Each record keeps what
``dqrelease plan`` says of its config (rounds, fit rounds, the time and memory forecasts; planned in this process
after the run, unless ``--no-forecast``), so the ``synthesize`` stage's growth can be read against its rounds.

Each size is released through the real CLI, ``python -m dqrelease.cli run --quiet --verbose CONFIG``, in a child
process: the example's config with ``[source]`` pointing at the Parquet file, ``privacy.n = n``, ε = 1, the
example's workload and default mechanism (DualQuery with the table fit), a throw-away ledger and output folder,
secure (OS-entropy) seeding as a real release. Prefect runs on its temporary per-run server
(``DQRELEASE_PREFECT_SERVER=ephemeral``), a child of the run, so the server's memory is part of the measured tree;
its Prefect home (``--prefect-home``, default ``WORK/prefect-home``) is migrated before the first size, so no size
pays for creating Prefect's database.

Measured per size (``scale_common.run_timed``): wall time of the process; peak RSS of the process and of its
whole process tree (the Prefect server and the validation side process included), sampled every ``--interval``
seconds (0.2) with psutil. Per stage: the Prefect tasks' times from the run's log (``scale_common.task_times``:
each task's finish minus the previous one's, so the orchestration between tasks is counted with the task after
it), plus ``startup`` (launch to the flow's start: interpreter, imports, the Prefect server, the plan) and
``shutdown`` (last task to exit). The CLI's own progress (``dqrelease.runtime.progress``) has no machine-readable
form and its plain lines have a resolution of one second; Prefect's tasks are finer (answering apart from the
mechanism, discretizing apart from validating). A stage's peak RSS is the largest tree sample taken while it ran,
counting the samples just before and after it (a stage shorter than the interval gets its neighbours').

A size that the pipeline refuses (the memory forecast, exit 2) or that fails is recorded with its exit code and
its one-line error (the CLI's ``error:`` line), and the benchmark goes on with the next size.

Output: the JSON result file (one record per (table, rows), each with its machine description and load
average), a Markdown growth table beside it (``.md``: seconds and peak RSS per stage against ``n``, and the
ratio of the second size to the first: 5M / 0.5M with the default sizes, the issue's ≤ 2× target) and a log-log
plot (``.png``). ``--append`` keeps the records of an existing result file (other sizes, earlier runs), so sizes
run one invocation at a time end up in one table.

Usage::

    .venv/bin/python bench/scale_rows.py --tables kdd99 --rows 500000,5000000 --out bench/results/scale_rows.json

``--smoke``: Adult at 20,000 and 40,000 rows, 3 DualQuery rounds and a fit of 1,000 particles in 2 rounds (run with
``--accept-low-utility``), about a minute (tests/bench/test_scale_rows_smoke.py).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scale_common import (
    ROOT,
    TimedProcess,
    machine,
    public_text,
    run_timed,
    save_json_and_markdown,
    save_plot,
    task_times,
)

EXAMPLES = ROOT / "examples"
TABLES = {"kdd99": EXAMPLES / "kdd99" / "release.toml", "adult": EXAMPLES / "adult" / "release.toml"}
"""The tables this benchmark scales: each example's config (source, schema, workload, mechanism)."""
DEFAULT_ROWS = (500_000, 5_000_000, 20_000_000, 100_000_000)
SMOKE_ROWS = (20_000, 40_000)
RESAMPLE_SEED = 0
"""Public seed of the order in which the remainder's rows are taken (``hash(rowid, seed)``)."""
EPSILON = 1.0
SMOKE_MECHANISM = "rounds = 3\n\n[mechanism.fit]\nparticles = 1000\nrounds = 2\n"
"""What ``--smoke`` adds to the example's ``[mechanism]``: the cheapest settings the config accepts."""
ERROR_LINE = re.compile(r"^(?:internal )?error: .*$", re.M)
"""The CLI's one-line error (``dqrelease.cli.app._fail``)."""
SECTION = re.compile(r"^\[\[?[\w.-]+\]\]?[ \t]*$", re.M)


@dataclass(frozen=True, kw_only=True)
class BuiltTable:
    """A table of ``rows`` rows written from a base table of ``base_rows``.

    Attributes:
        path: The Parquet file.
        rows: Its rows: ``copies * base_rows + resampled``.
        base_rows: Rows of the example's source.
        copies: Times the base table was copied whole.
        resampled: Rows taken once more, in the public seeded order.
        seconds: Time to read the base table and write the file.
    """

    path: Path
    rows: int
    base_rows: int
    copies: int
    resampled: int
    seconds: float


def build_table(example: Path, rows: int, path: Path) -> BuiltTable:
    """Write ``rows`` rows made from ``example``'s source to the Parquet file ``path`` (see the module docstring)."""
    import duckdb

    from dqrelease.inputs.config import load_source_section
    from dqrelease.inputs.ingest import ingest_source
    from dqrelease.inputs.schema import load_schema

    began = time.perf_counter()
    section = load_source_section(example)
    con = duckdb.connect()
    try:
        base_rows = ingest_source(con, section.source, load_schema(section.schema_file), table="base")
        copies, resampled = divmod(rows, base_rows)
        con.execute("set preserve_insertion_order = false")
        replicated = con.sql(
            "select base.* from base, range($copies) "
            "union all (select * from base order by hash(rowid, $seed), rowid limit $resampled)",
            params={"copies": copies, "seed": RESAMPLE_SEED, "resampled": resampled},
        )
        replicated.write_parquet(str(path))
    finally:
        con.close()
    return BuiltTable(path=path, rows=rows, base_rows=base_rows, copies=copies, resampled=resampled,
                      seconds=time.perf_counter() - began)


def _sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """A TOML file's text before its first table header, then each header with its text (header line included)."""
    starts = [match.start() for match in SECTION.finditer(text)]
    ends = [*starts[1:], len(text)]
    return text[:starts[0]], [(text[a:b].splitlines()[0].strip(), text[a:b]) for a, b in zip(starts, ends, strict=True)]


def _replace_key(text: str, key: str, value: str) -> str:
    """``text`` with the one line ``key = ...`` set to ``key = value`` (an error if the key is not there once)."""
    pattern = re.compile(rf"^{re.escape(key)} = .*$", re.M)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"the example config has no single '{key} = ' line here; update bench/scale_rows.py")
    return pattern.sub(lambda _: f"{key} = {value}", text)


def write_config(example: Path, work: Path, *, table: Path, rows: int, smoke: bool,
                 memory_limit_gib: float | None) -> Path:
    """The example's config releasing ``table`` (``n = rows``, ε = 1) into ``work``'s ledger and output folder."""
    prefix, sections = _sections(example.read_text())
    headers = [header for header, _ in sections]
    added = ["[run]"] + (["[mechanism.fit]"] if smoke else [])
    if any(header in headers for header in added):
        raise SystemExit(f"the example config {example.name} has a section of {added}; update bench/scale_rows.py")
    from dqrelease.inputs.config import load_source_section

    schema = load_source_section(example).schema_file
    text = _replace_key(prefix, "schema_file", json.dumps(str(schema)))
    for header, body in sections:
        if header == "[source]":
            body = f'[source]\nformat = "parquet"\npaths = [{json.dumps(str(table))}]\n\n'
        elif header == "[privacy]":
            body = _replace_key(_replace_key(body, "n", str(rows)), "epsilon", str(EPSILON))
        elif header == "[mechanism]" and smoke:
            body = body.rstrip("\n") + "\n" + SMOKE_MECHANISM + "\n"
        elif header == "[ledger]":
            body = (f'[ledger]\npath = {json.dumps(str(work / "ledger.duckdb"))}\ndataset_id = "scale-rows"\n'
                    "initial_cap_epsilon = 10.0\ninitial_cap_delta = 1e-6\n\n")
        elif header == "[output]":
            body = f'[output]\ndirectory = {json.dumps(str(work / "out"))}\n\n'
        text += body
    if memory_limit_gib is not None:
        text += f"\n[run]\nmemory_limit_gib = {memory_limit_gib}\n"
    path = work / "release.toml"
    path.write_text(text)
    return path


def environment(prefect_home: Path) -> dict[str, str]:
    """This process's environment with Prefect's temporary per-run server, the given Prefect home and its INFO log."""
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env.update(DQRELEASE_PREFECT_SERVER="ephemeral", PREFECT_HOME=str(prefect_home), PREFECT_LOGGING_LEVEL="INFO",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", GX_ANALYTICS_ENABLED="false",
               COLUMNS="1000")
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "240")
    return env


def plan_forecast(config: Path) -> dict:
    """What ``dqrelease plan`` says of ``config``, from public quantities: rounds and the time and memory forecasts.

    DualQuery's default T is the largest that fits ε, so it grows with n; the record keeps it beside the times.
    Planning composes one privacy event per round, so it takes longer the larger n is (about 25 s at 5M KDD99 rows on
    a loaded machine; at 100M a `dqrelease plan` had not finished after 5 minutes): ``--no-forecast`` skips it.
    """
    from dqrelease.inputs.config import load_config
    from dqrelease.inputs.encoding import domain_from_columns
    from dqrelease.inputs.schema import load_schema
    from dqrelease.plan import build_workload, plan_release, release_memory
    from dqrelease.time_estimate import estimate_release_time

    began = time.perf_counter()
    loaded = load_config(config)
    schema = load_schema(loaded.schema_file)
    workload = build_workload(loaded.workload, domain_from_columns(schema.columns))
    n = int(loaded.privacy.n)
    plan = plan_release(loaded, n=n, workload=workload)
    memory = release_memory(loaded, plan, n=n, workload=workload)
    forecast = estimate_release_time(plan, n=n, columns=len(schema.columns), queries=len(workload))
    return {"mechanism": plan.mechanism, "rounds": plan.parameters.get("rounds"),
            "fit_rounds": 0 if plan.fit is None else int(plan.fit.rounds),
            "memory_forecast_gb": round(memory.total / 2**30, 3),
            "memory_forecast_parts_gb": {part: round(size / 2**30, 4) for part, size in memory.parts.items()},
            "time_forecast_seconds": [round(forecast.low, 1), round(forecast.high, 1)],
            "plan_seconds": round(time.perf_counter() - began, 3)}


def prepare_prefect_home(env: dict[str, str]) -> None:
    """Create or migrate the Prefect database of ``env``'s Prefect home before the first size.

    Prefect's documented ``prefect server database upgrade``: without it the first size's ``startup`` would include
    creating the database (about 30 s on this machine) and the sizes would not compare.
    """
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "--yes"], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"could not prepare the Prefect database in {env['PREFECT_HOME']} (exit {done.returncode}); "
                         "run `prefect server database upgrade` there to see why")


def _peak_between(times: list[float], sizes: list[int], start: float, end: float) -> float | None:
    """Largest sample in ``[start, end]``, counting the last sample before and the first after it (GB)."""
    if not times:
        return None
    first = max(bisect.bisect_left(times, start) - 1, 0)
    last = min(bisect.bisect_right(times, end), len(times) - 1)
    return max(sizes[first:last + 1]) / 2**30


def stage_costs(run: TimedProcess) -> tuple[list[dict], float | None]:
    """Seconds and peak tree RSS of ``startup``, each Prefect task (summed by name) and ``shutdown``.

    Returns:
        The stages in the order they first ran (none when the flow never started) and the flow's seconds.
    """
    tasks, flow_seconds = task_times(run.output, launched=run.launched)
    if flow_seconds is None:
        return [], None
    times = [moment for moment, _ in run.samples]
    sizes = [size for _, size in run.samples]
    flow_start = tasks[-1]["finished"] - flow_seconds
    spans = [("startup", run.launched, flow_start)]
    spans += [(task["task"], task["finished"] - task["seconds"], task["finished"]) for task in tasks]
    spans.append(("shutdown", tasks[-1]["finished"], run.launched + run.wall_seconds))
    stages: dict[str, dict] = {}
    for name, start, end in spans:
        peak = _peak_between(times, sizes, start, end)
        stage = stages.setdefault(name, {"stage": name, "seconds": 0.0, "peak_rss_gb": peak})
        stage["seconds"] = round(stage["seconds"] + max(end - start, 0.0), 3)
        if peak is not None:
            stage["peak_rss_gb"] = round(max(stage["peak_rss_gb"] or 0.0, peak), 4)
    return list(stages.values()), flow_seconds


def error_line(run: TimedProcess, timeout: float) -> str | None:
    """The run's one-line error, None when it succeeded."""
    if run.timed_out:
        return f"timed out after {timeout:g} s (the benchmark killed the process tree)"
    if run.returncode == 0:
        return None
    lines = ERROR_LINE.findall(run.output)
    return lines[-1] if lines else f"exit code {run.returncode} without an error line (see log_tail)"


def measure(name: str, rows: int, args: argparse.Namespace, env: dict[str, str]) -> dict:
    """Build the table of ``rows`` rows, release it, and return the size's record (its work folder is removed)."""
    work = args.work / f"{name}-{rows}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)

    def portable(text: str) -> str:
        return public_text(text.replace(str(work), "$WORK"))

    record: dict = {"table": name, "rows": rows, "machine": machine()}
    try:
        built = build_table(TABLES[name], rows, work / "table.parquet")
        record.update(base_rows=built.base_rows, copies=built.copies, resampled=built.resampled,
                      build_seconds=round(built.seconds, 3), input_mb=round(built.path.stat().st_size / 2**20, 1))
        config = write_config(TABLES[name], work, table=built.path, rows=rows, smoke=args.smoke,
                              memory_limit_gib=args.memory_limit_gib)
        command = [sys.executable, "-m", "dqrelease.cli", "run", "--quiet", "--verbose",
                   *(["--accept-low-utility"] if args.smoke else []), str(config)]
        record["command"] = portable(" ".join(command))
        record["config"] = portable(config.read_text())
        run = run_timed(command, env=env, timeout=args.timeout, interval=args.interval)
        stages, flow_seconds = stage_costs(run)
        record.update(returncode=run.returncode, error=error_line(run, args.timeout),
                      wall_seconds=round(run.wall_seconds, 3), flow_seconds=flow_seconds,
                      peak_rss_tree_gb=round(run.peak_rss_tree_gb, 4), peak_rss_main_gb=round(run.peak_rss_main_gb, 4),
                      stages=stages)
        if run.returncode != 0:
            record["log_tail"] = portable(run.output[-3000:])
        if args.forecast:  # after the run, so that it does not delay it (planning takes minutes at 100M rows)
            try:
                record["plan"] = plan_forecast(config)
            except Exception as error:  # the run refused the same plan: its exit code and error line are recorded
                record["plan"] = {"error": f"{type(error).__name__}: {error}"}
    finally:
        record["machine"]["load_average_end"] = os.getloadavg()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return record


def size_label(rows: int) -> str:
    """``500000`` → ``0.5M``, ``20000`` → ``20k``."""
    return f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows / 1e3:g}k"


def _ok(record: dict) -> bool:
    return record.get("returncode") == 0


def _cell(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def growth_markdown(records: list[dict]) -> str:
    """Per table: seconds and peak tree RSS (GB) of each stage against the rows, with the second size / the first."""
    lines = ["# Rows: how each stage grows with n (bench/scale_rows.py)", ""]
    for name in dict.fromkeys(record["table"] for record in records):
        mine = sorted((r for r in records if r["table"] == name), key=lambda r: r["rows"])
        sizes = [r["rows"] for r in mine]
        ratio = f"{size_label(sizes[1])} / {size_label(sizes[0])}" if len(sizes) > 1 else None
        stage_names = list(dict.fromkeys(s["stage"] for r in mine if _ok(r) for s in r["stages"]))
        for what, key, total, digits in (("seconds", "seconds", "wall_seconds", 1),
                                          ("peak RSS of the process tree, GB", "peak_rss_gb", "peak_rss_tree_gb", 2)):
            lines += [f"## {name}: {what}", "",
                      "| stage | " + " | ".join(size_label(n) for n in sizes) + (f" | {ratio} |" if ratio else " |"),
                      "|---|" + "---|" * (len(sizes) + bool(ratio))]
            rows = [(stage, [next((s[key] for s in r["stages"] if s["stage"] == stage), None) if _ok(r) else None
                             for r in mine]) for stage in stage_names]
            rows.append(("**total**", [r[total] if _ok(r) else None for r in mine]))
            for stage, values in rows:
                cells = [_cell(v, digits) for v in values]
                if ratio:
                    first, second = values[0], values[1]
                    cells.append(_cell(second / first, 2) if first and second is not None else "–")
                lines.append(f"| {stage} | " + " | ".join(cells) + " |")
            lines.append("")
        for record in mine:
            if not _ok(record):
                lines.append(f"- {size_label(record['rows'])}: exit {record.get('returncode')}: {record.get('error')}")
        lines.append("")
    return "\n".join(lines)


def plot(records: list[dict], path: Path) -> None:
    """Log-log seconds and peak tree RSS of each stage against the rows, one row of panels per table."""
    from matplotlib import colormaps

    names = list(dict.fromkeys(record["table"] for record in records))

    def draw(figure):
        axes = figure.subplots(len(names), 2, squeeze=False)
        for (time_axis, memory_axis), name in zip(axes, names, strict=True):
            for axis in (time_axis, memory_axis):  # about 18 stages: 20 distinct colours, the same stage alike
                axis.set_prop_cycle(color=colormaps["tab20"].colors)
            done = sorted((r for r in records if r["table"] == name and _ok(r)), key=lambda r: r["rows"])
            if not done:
                time_axis.text(0.5, 0.5, f"{name}: no size completed", ha="center", transform=time_axis.transAxes)
                continue
            for stage in dict.fromkeys(s["stage"] for r in done for s in r["stages"]):
                points = [(r["rows"], s) for r in done for s in r["stages"] if s["stage"] == stage]
                time_axis.plot([n for n, _ in points], [max(s["seconds"], 1e-3) for _, s in points], marker="o",
                               label=stage, linewidth=1)
                memory_axis.plot([n for n, _ in points], [s["peak_rss_gb"] or 0 for _, s in points], marker="o",
                                 linewidth=1)
            rows = [r["rows"] for r in done]
            time_axis.plot(rows, [r["wall_seconds"] for r in done], "k--", marker="s", label="total (wall; tree peak)")
            memory_axis.plot(rows, [r["peak_rss_tree_gb"] for r in done], "k--", marker="s")
            for axis, label in ((time_axis, "seconds"), (memory_axis, "peak RSS of the process tree, GB")):
                axis.set_xscale("log")
                axis.set_yscale("log")
                axis.set_xlabel("rows")
                axis.set_ylabel(label)
                axis.set_title(f"{name}: {label}", fontsize=9)
            memory_axis.legend(*time_axis.get_legend_handles_labels(), fontsize=6, loc="upper left",
                               bbox_to_anchor=(1.02, 1.0))

    save_plot(path, draw, size=(13.0, 4.5 * len(names)))


def _numbers(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=None, help="comma-separated: kdd99, adult (default both; --smoke: adult)")
    parser.add_argument("--rows", default=None, help="comma-separated sizes (default 500000,5000000,20000000,"
                                                     "100000000; --smoke: 20000,40000)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/scale_rows.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and cheap mechanism settings, for the test")
    parser.add_argument("--append", action="store_true",
                        help="keep the other (table, rows) records of an existing result file")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "dqrelease-scale-rows",
                        help="scratch folder (a subfolder per size, removed after it, unless --keep)")
    parser.add_argument("--keep", action="store_true", help="keep each size's table, config, ledger and outputs")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per size")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    parser.add_argument("--prefect-home", type=Path, default=None,
                        help="Prefect home of the runs (default: WORK/prefect-home, kept between invocations)")
    parser.add_argument("--no-forecast", dest="forecast", action="store_false",
                        help="do not record the plan's rounds and forecasts (planned again after each size's run)")
    parser.add_argument("--memory-limit-gib", type=float, default=None, help="run.memory_limit_gib of the configs")
    args = parser.parse_args()
    tables = (args.tables or ("adult" if args.smoke else "kdd99,adult")).split(",")
    unknown = [name for name in tables if name not in TABLES]
    if unknown:
        parser.error(f"unknown table {unknown[0]!r}; use {', '.join(TABLES)}")
    sizes = _numbers(args.rows) if args.rows else list(SMOKE_ROWS if args.smoke else DEFAULT_ROWS)
    records = []
    if args.append and args.out.exists():
        records = [r for r in json.loads(args.out.read_text())["records"]
                   if not (r["table"] in tables and r["rows"] in sizes)]
    env = environment(args.prefect_home or args.work / "prefect-home")
    prepare_prefect_home(env)
    for name in tables:
        for rows in sizes:
            record = measure(name, rows, args, env)
            records.append(record)
            print(json.dumps({key: record.get(key) for key in ("table", "rows", "returncode", "error",
                                                               "wall_seconds", "peak_rss_tree_gb")}), flush=True)
    result = {"command": public_text(" ".join([".venv/bin/python", *sys.argv])), "machine": machine(),
              "smoke": args.smoke, "epsilon": EPSILON, "resample_seed": RESAMPLE_SEED,
              "interval_seconds": args.interval,
              "records": records}
    result["machine"]["load_average_end"] = os.getloadavg()
    save_json_and_markdown(args.out, result, growth_markdown(records), default=float)
    plot(records, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
