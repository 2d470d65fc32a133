"""Where the time of a release goes on a Dask cluster: driver against workers, per stage (issue 26).

The table: the 5,000,000-row KDD99 table of ``bench/scale_rows.py`` (its ``build_table``: the shared 10 % file ten
times plus 59,790 of its rows in a public seeded order) and its config (``write_config``: the example's schema,
workload and default mechanism, ε = 1, ``n`` = the rows, every row published). It is released twice, each in a child
process of its own (``--mode``): once locally and once with ``dask_address`` = a ``LocalCluster`` of 2 worker
processes (one thread each) started by the child with the run's Prefect API shared, as ``--dask local:2`` does. The
release runs through the Python API (:func:`dqrelease.flows.release.run_release`, secure seeding, the temporary
Prefect server), so that this process can time it:

* **stage wall time**: each task the flow calls in this process (ingest, validate-raw, discretize, sample, stage
  outputs, error report, validate-synthetic, manifests, publish) and the answering plus mechanism
  (``_synthesize``), timed around the call;
* **driver waiting**: the time the driver spends blocked in ``distributed.Future.result`` during a stage (waiting
  for a chunk, the answers or the mechanism); the stage's *driver-busy* time is its wall time minus that;
* **worker compute**: Dask's task stream (``get_task_stream``) of the whole run: the ``compute`` spans of every task,
  summed by function (``_grouped_chunk`` validation, ``_coded_chunk`` discretization, ``_render_piece`` decoding and
  CSV text, ``answer_partition``, ``synthesize``) and listed per chunk.

The fraction of the work done on workers is Σ worker compute / (Σ worker compute + Σ driver busy). Projection to
``w`` workers, on paper, from the measured costs: a chunked stage takes about ``max(driver busy, compute / w) +
compute / max(chunks, w)`` (the driver's part and the workers' overlap, except for the last chunk; with more workers
than the measured chunks, the chunk size is assumed lowered so that each worker gets one, at the same cost per row),
answering ``driver busy + compute / min(w, blocks)`` (8 blocks of marginals), and the driver's stages as measured. The
mechanism's task is split in two: the table fit's Metropolis-Hastings moves, which it submits as nested tasks
(``move_shard``, one per shard of 50,000 particles, all shards of a round at once), and the rest, which is sequential
(DualQuery's rounds, the CP-SAT oracle, the fit's work between its rounds) and stays as measured. The rounds are read
off the task stream (:func:`nested_rounds`: runs of overlapping shard spans); the rest is the task's time minus the
rounds' wall time, and at ``w`` workers each round takes its shards' compute / ``min(w, shards)``. The per-stage table
lists the nested tasks under the mechanism's row (their compute is not added to the work done on workers: the task
that waits for them already counts it). Transfers and the scheduler's overhead per task are in the measured wall
times only, not in the projection.

Usage (one timed benchmark at a time; the machine's load is recorded before and after)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/dask_split.py

``--smoke``: 40,000 rows and the cheapest mechanism settings (``scale_rows``' smoke config), chunks of 10,000 rows.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scale_common import ROOT, machine, save_json_and_markdown
from scale_rows import TABLES, build_table, environment, prepare_prefect_home, write_config

ROWS = 5_000_000
SMOKE_ROWS = 40_000
SMOKE_CHUNK_ROWS = 10_000
WORKERS = 2
PROJECTED_WORKERS = (2, 8, 64)
TIMED_TASKS = ("ingest_raw", "validate_raw", "discretize_raw", "_synthesize", "sample_synthetic", "stage_outputs",
               "error_report", "check_synthetic", "write_manifests", "publish_release")
"""What the flow calls in the driver, in order (``_synthesize``: answering and the mechanism)."""
CHUNKED = {"validate_raw": "_grouped_chunk", "discretize_raw": "_coded_chunk", "stage_outputs": "_render_piece"}
"""The stages whose chunks run on the workers, and the function of a chunk."""
ON_WORKERS = {"_synthesize": ("answer_partition", "synthesize")}
NESTED = {"_synthesize": "move_shard"}
"""Tasks submitted from inside a stage's worker task (the table fit's Metropolis-Hastings moves, a shard of particles
each, from the mechanism's task): their compute overlaps the task that waits for them, so they are listed under it
but not added to the work done on workers."""


def _function(key: str) -> str:
    """A Dask key's function: ``_coded_chunk-3f2a8c1e-...`` → ``_coded_chunk``."""
    return key.split("-", 1)[0]


def run_one(config: Path, *, mode: str, smoke: bool) -> dict:
    """Release ``config`` here (``mode``: ``local`` or ``dask``); return the stage times (see the module docstring)."""
    import distributed

    import dqrelease.flows.release as flow_module
    import dqrelease.memory_estimate
    import dqrelease.outputs.published_rows
    import dqrelease.runtime.chunks as chunks_module
    from dqrelease.runtime.prefect_server import shared_api

    if smoke:
        chunks_module.READ_CHUNK_ROWS = SMOKE_CHUNK_ROWS
        dqrelease.outputs.published_rows.PUBLISH_CHUNK_ROWS = SMOKE_CHUNK_ROWS
    walls: dict[str, float] = defaultdict(float)
    waits: dict[str, float] = defaultdict(float)
    current: list[str] = []

    def timed(name, original):
        def call(*args, **kwargs):
            current.append(name)
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                walls[name] += time.perf_counter() - began
                current.pop()
        return call

    for name in TIMED_TASKS:
        setattr(flow_module, name, timed(name, getattr(flow_module, name)))
    result = distributed.Future.result

    def waited(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return result(self, *args, **kwargs)
        finally:
            if current:
                waits[current[-1]] += time.perf_counter() - began

    distributed.Future.result = waited
    stream: list[dict] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as output, shared_api():  # Prefect's temporary server, both modes
        if mode == "local":
            flow_module.run_release(str(config), output_directory=output, accept_low_utility=smoke)
        else:
            with distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                                                        dashboard_address=None) as cluster, \
                    distributed.Client(cluster.scheduler_address, set_as_default=False) as client, \
                    distributed.get_task_stream(client=client) as tasks:
                flow_module.run_release(str(config), dask_address=cluster.scheduler_address, output_directory=output,
                                        accept_low_utility=smoke)
            stream = tasks.data
    wall = time.perf_counter() - began
    return {"mode": mode, "wall_seconds": round(wall, 2),
            "stages": {name: {"wall_seconds": round(walls[name], 3), "driver_waiting_seconds": round(waits[name], 3)}
                       for name in TIMED_TASKS},
            "worker_tasks": worker_tasks(stream)}


def worker_tasks(stream: list[dict]) -> dict[str, list[dict]]:
    """The compute seconds, worker and compute span (first start, last stop) of every task of a Dask task stream."""
    computed: dict[str, list[dict]] = defaultdict(list)
    for task in stream:
        spans = [span for span in task["startstops"] if span["action"] == "compute"]
        seconds = sum(span["stop"] - span["start"] for span in spans)
        entry = {"worker": task["worker"], "seconds": round(seconds, 3)}
        if spans:
            entry.update(start=min(span["start"] for span in spans), stop=max(span["stop"] for span in spans))
        computed[_function(task["key"])].append(entry)
    return dict(computed)


def nested_rounds(tasks: list[dict]) -> list[list[dict]]:
    """Nested tasks grouped into rounds: the maximal runs of tasks whose compute spans overlap or touch.

    Every round of the fit's moves submits all its shards at once and waits for them, and the fit's own work between
    two rounds runs in the waiting task; so on a busy cluster a round's shards form one block of time and the rounds
    are separated by gaps. Two rounds with no gap between them would count as one (the projection then assumes more
    shards per round than there are, which lowers it; with the measured runs' gaps of a fit round this does not
    happen). Empty when the spans are not recorded (an older result file).
    """
    if not tasks or any("start" not in task for task in tasks):
        return []
    rounds: list[list[dict]] = []
    end = -math.inf
    for task in sorted(tasks, key=lambda t: t["start"]):
        if task["start"] > end:
            rounds.append([])
        rounds[-1].append(task)
        end = max(end, task["stop"])
    return rounds


def split(dask: dict) -> dict:
    """Per stage: wall, driver busy, worker compute and chunks; the workers' fraction; projections to more workers."""
    stages, total_busy, total_compute = {}, 0.0, 0.0
    for name in TIMED_TASKS:
        measured = dask["stages"][name]
        functions = ([CHUNKED[name]] if name in CHUNKED else []) + list(ON_WORKERS.get(name, ()))
        tasks = [task for function in functions for task in dask["worker_tasks"].get(function, [])]
        compute = sum(task["seconds"] for task in tasks)
        busy = max(measured["wall_seconds"] - measured["driver_waiting_seconds"], 0.0)
        nested = dask["worker_tasks"].get(NESTED[name], []) if name in NESTED else []
        rounds = nested_rounds(nested)
        total_busy, total_compute = total_busy + busy, total_compute + compute
        stage = {"wall_seconds": measured["wall_seconds"], "driver_busy_seconds": round(busy, 3),
                 "worker_compute_seconds": round(compute, 3), "worker_tasks": len(tasks),
                 "workers_used": len({task["worker"] for task in tasks})}
        projected = {}
        for workers in PROJECTED_WORKERS:
            if name in CHUNKED and tasks:  # chunks cut so that every worker gets one: at least w of them
                projected[workers] = max(busy, compute / workers) + compute / max(len(tasks), workers)
            elif name == "_synthesize":
                answers = [t["seconds"] for t in dask["worker_tasks"].get("answer_partition", [])]
                mechanism = sum(t["seconds"] for t in dask["worker_tasks"].get("synthesize", []))
                spread = min(workers, max(len(answers), 1))
                projected[workers] = busy + sum(answers) / spread + _mechanism_on(workers, mechanism, rounds)
            else:
                projected[workers] = measured["wall_seconds"]
        stage["projected_seconds"] = {str(w): round(s, 1) for w, s in projected.items()}
        stages[name] = stage
        if nested:
            nested_compute = sum(t["seconds"] for t in nested)
            stage["nested"] = {"function": NESTED[name], "worker_compute_seconds": round(nested_compute, 3),
                               "worker_tasks": len(nested), "workers_used": len({t["worker"] for t in nested}),
                               "rounds": len(rounds),
                               "wall_seconds": round(sum(_span(r) for r in rounds), 3) if rounds else None}
    totals = {str(w): round(sum(s["projected_seconds"][str(w)] for s in stages.values()), 1) for w in PROJECTED_WORKERS}
    return {"stages": stages, "driver_busy_seconds": round(total_busy, 2),
            "worker_compute_seconds": round(total_compute, 2),
            "worker_fraction": round(total_compute / (total_compute + total_busy), 4) if total_compute else 0.0,
            "projected_flow_seconds": totals}


def _span(tasks: list[dict]) -> float:
    """Seconds from the first task's start to the last one's stop."""
    return max(t["stop"] for t in tasks) - min(t["start"] for t in tasks)


def _mechanism_on(workers: int, measured: float, rounds: list[list[dict]]) -> float:
    """The mechanism's task on ``workers`` workers: its sequential part plus its nested rounds spread over them.

    The measured task's time holds the rounds' wall time (the task waits for them); the rest is sequential (DualQuery's
    rounds, the oracle, the fit between its rounds) and stays as measured. Each round's shards spread over at most as
    many workers as there are shards (at the same cost per shard). Without recorded rounds the task is kept as measured.
    """
    if not rounds:
        return measured
    sequential = measured - sum(_span(r) for r in rounds)
    return sequential + sum(sum(t["seconds"] for t in r) / min(workers, len(r)) for r in rounds)


def markdown(report: dict) -> str:
    """The per-stage table: local wall, Dask wall, driver busy, worker compute (chunks), projections."""
    local, dask, parts = report["local"], report["dask"], report["split"]
    lines = [
        f"KDD99 {report['rows']:,} rows, ε = 1, default mechanism; local against `--dask local:{WORKERS}` "
        f"(load before {report['load_before']}, after {report['load_after']}).", "",
        "| stage | local s | dask s | driver busy s | worker compute s (tasks, workers) | "
        + " | ".join(f"{w} workers s" for w in PROJECTED_WORKERS) + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(PROJECTED_WORKERS),
    ]
    for name in TIMED_TASKS:
        stage = parts["stages"][name]
        projected = " | ".join(f"{stage['projected_seconds'][str(w)]:.1f}" for w in PROJECTED_WORKERS)
        lines.append(
            f"| {name} | {local['stages'][name]['wall_seconds']:.1f} | {stage['wall_seconds']:.1f} | "
            f"{stage['driver_busy_seconds']:.1f} | {stage['worker_compute_seconds']:.1f} "
            f"({stage['worker_tasks']}, {stage['workers_used']}) | {projected} |")
        if "nested" in stage:
            inner = stage["nested"]
            shown = "–" if inner["wall_seconds"] is None else f"{inner['wall_seconds']:.1f}"
            lines.append(
                f"| ↳ {inner['function']} (inside the mechanism's task; {inner['rounds']} rounds) | – | {shown} | – | "
                f"{inner['worker_compute_seconds']:.1f} ({inner['worker_tasks']}, {inner['workers_used']}) | "
                + " | ".join("in the row above" for _ in PROJECTED_WORKERS) + " |")
    lines += [
        f"| **flow (sum of stages)** | {sum(s['wall_seconds'] for s in local['stages'].values()):.1f} | "
        f"{sum(s['wall_seconds'] for s in dask['stages'].values()):.1f} | {parts['driver_busy_seconds']:.1f} | "
        f"{parts['worker_compute_seconds']:.1f} | "
        + " | ".join(f"{parts['projected_flow_seconds'][str(w)]:.1f}" for w in PROJECTED_WORKERS) + " |",
        "", f"Whole process: local {local['wall_seconds']:.1f} s, dask {dask['wall_seconds']:.1f} s. Fraction of the "
        f"work done on workers (worker compute / (worker compute + driver busy)): {parts['worker_fraction']:.1%}.",
        "Projections are on paper from the measured costs (bench/dask_split.py's docstring says how); the "
        f"{PROJECTED_WORKERS[0]}-worker column is the model applied to the measured run.",
    ]
    return "\n".join(lines) + "\n"


def _uptime() -> str:
    """The load averages ``uptime`` prints (1, 5 and 15 minutes)."""
    shown = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    return shown.strip().split("load average:")[-1].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "dask_split.json")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--mode", choices=["local", "dask"], help="internal: release one way, print the JSON")
    parser.add_argument("--config", type=Path, help="internal: the config --mode releases")
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(run_one(args.config, mode=args.mode, smoke=args.smoke)))
        return
    rows = SMOKE_ROWS if args.smoke else ROWS
    report: dict = {"rows": rows, "workers": WORKERS, "machine": machine(), "load_before": _uptime()}
    work = Path(tempfile.mkdtemp(prefix="dask-split-"))
    env = environment(work / "prefect-home")  # one migrated Prefect home for both runs (not in the stage times)
    try:
        prepare_prefect_home(env)
        built = build_table(TABLES["kdd99"], rows, work / "table.parquet")
        for mode in ("local", "dask"):
            folder = work / mode
            folder.mkdir()
            config = write_config(TABLES["kdd99"], folder, table=built.path, rows=rows, smoke=args.smoke,
                                  memory_limit_gib=None)
            command = [sys.executable, __file__, "--mode", mode, "--config", str(config)]
            command += ["--smoke"] if args.smoke else []
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                raise SystemExit(f"the {mode} release failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
            report[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["load_after"] = _uptime()
    report["split"] = split(report["dask"])
    save_json_and_markdown(args.out, report, markdown(report))
    print(markdown(report))
    if not math.isfinite(report["split"]["worker_fraction"]):
        raise SystemExit("no worker time was measured")


if __name__ == "__main__":
    main()
