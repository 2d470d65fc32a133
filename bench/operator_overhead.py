"""Operator overhead of ``dqrelease run`` on the Adult example: wall time minus the mechanism's own time.

What runs: the installed CLI, ``dqrelease run --quiet examples/adult/release.toml`` (the config copied into a
throw-away workspace with absolute data paths, its own ledger with a large cap and its own output directory),
``1 + --runs`` times, each a child process of this script. The workspace has a fresh Prefect home and a fresh
dqrelease state directory, so the first run finds no Prefect server: it starts the local one (and Prefect
creates and migrates its database), as on a fresh machine; the next ``--runs`` runs find it again. The server
is stopped at the end.

Per run, from the process and from the Prefect server (the flow run's and its task runs' start and end times):

* ``wall``: the ``dqrelease run`` process, start to exit.
* ``mechanism``: the ``synthesize`` task; ``non_mechanism = wall - mechanism`` (the target: <= 8 s).
* the split of the rest: ``ingest`` (ingest task), ``validation`` (validate-raw + validate-synthetic),
  ``report`` (error-report), ``publish`` (stage-outputs + write-manifest + publish), ``other tasks``
  (load-config, build-workload, plan-privacy, discretize, charge-budget, answer-partition, decode), and
  ``prefect`` = wall - the time covered by tasks (the synthetic table's validation runs beside staging and the
  report, so the groups' sum can exceed it): interpreter start and imports, finding the server, creating the flow run,
  task orchestration and exit. ``imports`` is measured apart (``python -c "import dqrelease.flows.release"``,
  minus an empty interpreter) to say how much of ``prefect`` is importing the stack.

A second series (``light``) runs the same release with 2 DualQuery rounds and no table fit, so the process's CPU
time (user + system, which does not grow with the machine's load; it includes the side process, which works on
the other core in parallel) is, within about a second, the CPU time of everything but the mechanism.

Then the refusal latency, hyperfine style: ``--repeat`` timed processes each of ``dqrelease run missing.toml``,
``dqrelease run`` with a missing source file, ``dqrelease run`` with a schema error, and ``dqrelease plan`` with a
plan error (all exit 2; target <= 1.5 s), wall and CPU time.

The machine is shared: the load average is recorded before and after every run.

Usage::

    .venv/bin/python bench/operator_overhead.py --runs 5 --out bench/results/operator_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scale_common import machine

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "examples" / "adult"
DQRELEASE = Path(sys.executable).parent / "dqrelease"
FLOW_NAME = "dqrelease-release"
GROUPS = {
    "ingest": ("ingest",),
    "validation": ("validate-raw", "validate-synthetic"),
    "report": ("error-report",),
    "publish": ("stage-outputs", "write-manifest", "publish"),
}
MECHANISM_TASK = "synthesize"


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise SystemExit(f"examples/adult/release.toml changed: {old!r} not found once; update this benchmark")
    return text.replace(old, new)


def write_config(workspace: Path, *, light: bool = False) -> Path:
    """The Adult example with absolute data paths, a workspace ledger (cap 1,000) and output directory.

    ``light``: 2 DualQuery rounds and no table fit (run with ``--accept-low-utility``), so the mechanism takes
    about a second and the process's CPU time is, within that second, the CPU time of everything else.
    """
    text = (ADULT / "release.toml").read_text()
    text = _replace_once(text, 'schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    text = _replace_once(text, '"data/adult.data", "data/adult.test"',
                         f'"{ADULT / "data" / "adult.data"}", "{ADULT / "data" / "adult.test"}"')
    text = _replace_once(text, 'path = "../../dqrelease-out/ledger.duckdb"', 'path = "ledger.duckdb"')
    text = _replace_once(text, 'directory = "../../dqrelease-out/adult"', 'directory = "out"')
    text = _replace_once(text, "initial_cap_epsilon = 10.0", "initial_cap_epsilon = 1000.0")
    if light:
        text = _replace_once(text, 'name = "dualquery"\n',
                             'name = "dualquery"\nrounds = 2\n\n[mechanism.fit]\nenabled = false\n')
    path = workspace / ("release-light.toml" if light else "release.toml")
    path.write_text(text)
    return path


def environment(workspace: Path) -> dict[str, str]:
    """A fresh Prefect home and dqrelease state directory; no configured Prefect API.

    ``PYTHONDONTWRITEBYTECODE`` is dropped: Python's default (and a user's machine) keeps compiled modules in
    ``__pycache__`` (a wheel install compiles them at install time); some sandboxes set it for every process,
    which makes each run compile dqrelease's own modules again (about 0.3 s).
    """
    env = {key: value for key, value in os.environ.items()
           if key not in ("PREFECT_API_URL", "DQRELEASE_PREFECT_SERVER", "PYTHONDONTWRITEBYTECODE")}
    env.update(PREFECT_HOME=str(workspace / "prefect-home"), DQRELEASE_STATE_DIR=str(workspace / "state"),
               COLUMNS="200")
    return env


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, CPU seconds (user + system of the process and the children it waited for) and the result.

    The CPU time does not grow with the machine's load: it is what the process itself needs.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def latest_flow_run_times(api_url: str, *, settle: float = 20.0) -> dict:
    """Start/end of the latest release flow run and of each of its task runs, read from the Prefect server.

    Task runs reach the server as events; they are read again until every one has ended and the count is stable.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowRunFilter
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        deadline = time.monotonic() + settle
        previous = -1
        while True:
            [flow_run] = client.read_flow_runs(
                flow_filter=FlowFilter(name={"any_": [FLOW_NAME]}), sort=FlowRunSort.START_TIME_DESC, limit=1
            )
            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [flow_run.id]}))
            done = all(task.end_time is not None for task in tasks) and flow_run.end_time is not None
            if (done and len(tasks) == previous) or time.monotonic() > deadline:
                break
            previous = len(tasks) if done else -1
            time.sleep(0.5)
    seconds: dict[str, float] = {}
    intervals = []
    for task in tasks:
        if task.start_time is not None and task.end_time is not None:
            name = task.name.rsplit("-", 1)[0]  # "validate-raw-f7f" -> "validate-raw"
            seconds[name] = seconds.get(name, 0.0) + (task.end_time - task.start_time).total_seconds()
            intervals.append((task.start_time.timestamp(), task.end_time.timestamp()))
    flow_seconds = (flow_run.end_time - flow_run.start_time).total_seconds()
    return {"flow_run": str(flow_run.id), "flow_seconds": flow_seconds, "tasks": seconds,
            "task_union_seconds": _union_length(intervals)}


def _union_length(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one task (the synthetic table's validation runs beside staging and the report)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def split(wall: float, times: dict) -> dict:
    tasks = times["tasks"]
    mechanism = tasks.get(MECHANISM_TASK, 0.0)
    grouped = {group: sum(tasks.get(name, 0.0) for name in names) for group, names in GROUPS.items()}
    named = {name for names in GROUPS.values() for name in names} | {MECHANISM_TASK}
    grouped["other tasks"] = sum(value for name, value in tasks.items() if name not in named)
    grouped["prefect"] = wall - times["task_union_seconds"]  # tasks that overlap are counted once
    return {"wall": wall, "mechanism": mechanism, "non_mechanism": wall - mechanism, "split": grouped,
            "flow_seconds": times["flow_seconds"], "tasks": tasks}


def release_runs(workspace: Path, runs: int, *, light: bool = False) -> list[dict]:
    """``1 + runs`` releases; the first one starts the local Prefect server (none with ``light``: it runs after)."""
    env = environment(workspace)
    config = write_config(workspace, light=light)
    os.environ.update(DQRELEASE_STATE_DIR=env["DQRELEASE_STATE_DIR"])  # for reading the server's record here
    from dqrelease.runtime.prefect_server import server_status

    results = []
    for index in range(runs if light else 1 + runs):
        load_before = os.getloadavg()
        # 2 raw DualQuery rounds forecast a useless table: the light series publishes it anyway
        extra = ["--accept-low-utility"] if light else []
        wall, cpu, done = timed([str(DQRELEASE), "run", "--quiet", *extra, str(config)], env, workspace)
        if done.returncode != 0:
            raise SystemExit(f"run {index} failed ({done.returncode}): {done.stderr[-2000:]}")
        status = server_status()
        times = latest_flow_run_times(status.record.api_url)
        row = {"run": index, "first": index == 0 and not light, **split(wall, times), "cpu": cpu,
               "load_before": load_before, "load_after": os.getloadavg()}
        results.append(row)
        print(f"{'light ' if light else ''}run {index}: wall {wall:.1f} s (CPU {cpu:.1f} s), mechanism "
              f"{row['mechanism']:.1f} s, non-mechanism "
              f"{row['non_mechanism']:.1f} s ({', '.join(f'{k} {v:.1f}' for k, v in row['split'].items())}), "
              f"load {load_before[0]:.1f}", file=sys.stderr)
    return results


def import_seconds(repeat: int) -> dict:
    """Time to import the release flow's stack in a new interpreter, minus an empty interpreter's start."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}  # as environment()
    empty = [timed([sys.executable, "-c", "pass"], env, ROOT)[:2] for _ in range(repeat)]
    full = [timed([sys.executable, "-c", "import dqrelease.flows.release"], env, ROOT)[:2] for _ in range(repeat)]
    return {"interpreter": summary([w for w, _ in empty]), "flow_stack": summary([w for w, _ in full]),
            "flow_stack_cpu": summary([c for _, c in full]),
            "imports_median": statistics.median(w for w, _ in full) - statistics.median(w for w, _ in empty),
            "imports_cpu_median": statistics.median(c for _, c in full) - statistics.median(c for _, c in empty)}


def refusal_latency(workspace: Path, repeat: int) -> dict:
    """Seconds from start to exit of refused commands (exit 2), ``repeat`` processes each."""
    env = environment(workspace)
    schema_error = workspace / "schema-error.toml"
    text = (ADULT / "release.toml").read_text()
    broken_schema = workspace / "schema.toml"
    # the typo: `edge` for `edges` on the first numeric column
    broken_schema.write_text(_replace_once((ADULT / "schema.toml").read_text(), "\nedges = [17,", "\nedge = [17,"))
    schema_error.write_text(_replace_once(text, 'schema_file = "schema.toml"', f'schema_file = "{broken_schema}"'))
    (workspace / "source-error.toml").write_text(
        _replace_once(text, 'schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    )  # its data paths stay relative: nothing at data/adult.data in the workspace
    plan_error = workspace / "plan-error.toml"
    plan_text = _replace_once(text, 'schema_file = "schema.toml"', f'schema_file = "{ADULT / "schema.toml"}"')
    plan_error.write_text(_replace_once(plan_text, 'name = "dualquery"',
                                        'name = "dualquery"\nfree_policy = "zero"\nrows_per_round = 2'))
    cases = {
        "run missing config": ["run", str(workspace / "missing.toml")],
        "run missing source file": ["run", str(workspace / "source-error.toml")],
        "run schema error": ["run", str(schema_error)],
        "plan plan error": ["plan", str(plan_error)],
    }
    result = {}
    for label, arguments in cases.items():
        seconds, cpus, lines = [], [], None
        for _ in range(repeat):
            wall, cpu, done = timed([str(DQRELEASE), *arguments], env, workspace)
            if done.returncode != 2:
                raise SystemExit(f"{label}: exit {done.returncode}, expected 2: {done.stderr[-500:]}")
            seconds.append(wall)
            cpus.append(cpu)
            lines = done.stderr.splitlines()
        result[label] = {**summary(seconds), "cpu": summary(cpus), "stderr": lines}
    return result


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values),
            "values": values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="repeated runs after the first (>= 5 for the docs)")
    parser.add_argument("--repeat", type=int, default=10, help="timed processes per refusal and import measurement")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "operator_overhead.json")
    parser.add_argument("--keep", action="store_true", help="keep the workspace (its path is printed)")
    parser.add_argument("--refusals-only", action="store_true",
                        help="time only the refusals (a before/after check of start-up cost); no release runs")
    args = parser.parse_args()

    workspace = Path(tempfile.mkdtemp(prefix="dqrelease-operator-"))
    info = machine()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    try:
        refusals = refusal_latency(workspace, args.repeat)
        if args.refusals_only:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({
                "machine": {**info, "load_average_end": os.getloadavg()},
                "git_commit": commit.stdout.strip() or None, "refusals": refusals}, indent=2) + "\n")
            print(f"refusals timed; wrote {args.out}", file=sys.stderr)
            return
        imports = import_seconds(args.repeat)
        runs = release_runs(workspace, args.runs)
        light = release_runs(workspace, args.runs, light=True) if args.runs else []
    finally:
        from dqrelease.runtime.prefect_server import stop_server

        if os.environ.get("DQRELEASE_STATE_DIR", "").startswith(str(workspace)):
            stop_server()
        if not args.keep:
            shutil.rmtree(workspace, ignore_errors=True)
    repeated = [row for row in runs if not row["first"]]
    first = runs[0]
    result = {
        "machine": {**info, "load_average_end": os.getloadavg()},
        "git_commit": commit.stdout.strip() or None,
        "command": "dqrelease run --quiet examples/adult/release.toml (copied into a workspace)",
        "environment": "PYTHONDONTWRITEBYTECODE dropped (Python's default: compiled modules are cached)",
        "repeated_runs": len(repeated),
        "non_mechanism_seconds": summary([row["non_mechanism"] for row in repeated]),
        "wall_seconds": summary([row["wall"] for row in repeated]),
        "mechanism_seconds": summary([row["mechanism"] for row in repeated]),
        "cpu_seconds": summary([row["cpu"] for row in repeated]),
        "split_median_seconds": {
            key: statistics.median(row["split"][key] for row in repeated) for key in repeated[0]["split"]
        },
        "first_run": {"wall": first["wall"], "non_mechanism": first["non_mechanism"],
                      "extra_over_repeated_median": first["non_mechanism"]
                      - statistics.median(row["non_mechanism"] for row in repeated),
                      "split": first["split"]},
        "light": {
            "config": "the same with rounds = 2 and [mechanism.fit] enabled = false",
            "non_mechanism_seconds": summary([row["non_mechanism"] for row in light]),
            "cpu_seconds": summary([row["cpu"] for row in light]),
            "mechanism_seconds": summary([row["mechanism"] for row in light]),
            "split_median_seconds": {
                key: statistics.median(row["split"][key] for row in light) for key in light[0]["split"]
            },
        } if light else None,
        "imports": imports,
        "refusals": refusals,
        "runs": runs,
        "light_runs": light,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    median = result["non_mechanism_seconds"]
    print(f"non-mechanism over {len(repeated)} repeated runs: median {median['median']:.1f} s "
          f"(range {median['min']:.1f}-{median['max']:.1f} s); first run {first['non_mechanism']:.1f} s; "
          f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
