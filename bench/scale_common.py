"""Helpers shared by the scale benchmarks (machine description, plots, DualQuery runs with phase timings, timed
``dqrelease run`` processes with their process tree's memory and Prefect's per-task times)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import psutil

from dq_engine.data.answers import answer_records, error_summary, uniform_answers
from dq_engine.data.dataset import Dataset
from dq_engine.data.workload import Workload
from dq_engine.evaluation.baselines import zeros_answers
from dq_engine.mechanisms.dualquery import DualQueryConfig, RoundLoop
from dq_engine.privacy.grant import PrivacyGrant
from dq_engine.privacy.rng import make_rng

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""

PACKAGES = ("numpy", "scipy", "pandas", "ortools", "opendp", "duckdb", "great_expectations", "prefect",
            "pyinstrument", "matplotlib")


BENCHMARK_EPSILON = 1e4
"""A benchmark's stated budget: it runs on public data sets and measures the mechanisms' own costs, far below."""


def benchmark_grant(purpose: str = "benchmark on a public data set") -> PrivacyGrant:
    """The engine grant a benchmark spends its runs on (``dq_engine.privacy.grant``; tight accounting)."""
    return PrivacyGrant(epsilon=BENCHMARK_EPSILON, delta=1e-3, purpose=purpose)


def study_grant(plan, *, run_id: str = "bench-run"):
    """A ledger-charged grant of a registry ``plan`` (``dqrelease.ledger.grants.grant_for_study``).

    The charge goes to a throw-away ledger in a temporary folder with a :data:`BENCHMARK_EPSILON` cap.
    """
    import tempfile

    from dqrelease.ledger import Ledger
    from dqrelease.ledger.grants import grant_for_study

    folder = Path(tempfile.mkdtemp(prefix="dqrelease-study-"))
    ledger = Ledger(folder / "ledger.duckdb")
    ledger.ensure_cap("study", epsilon=BENCHMARK_EPSILON, delta=0.5)
    return grant_for_study(plan, ledger=ledger, dataset_id="study", run_id=run_id)


def machine() -> dict:
    """Cores, memory, Python and package versions, load average (recorded in every result file)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cores": os.cpu_count(), "memory_gb": round(pages / 2**30, 1), "python": platform.python_version(),
            "platform": platform.platform(), "packages": versions, "load_average_start": os.getloadavg()}


def public_text(text: str) -> str:
    """``text`` with this machine's paths made portable, for result files committed to the repo.

    The repository's root becomes ``.`` and the shared data directory ``$DQRELEASE_DATA``
    (``dqrelease.inputs.data_home``), so a recorded command or config names no folder of the machine it ran on.
    """
    from dqrelease.inputs.data_home import shared_data_dir

    data = shared_data_dir()
    if data is not None:
        text = text.replace(str(data), "$DQRELEASE_DATA")
    return text.replace(str(ROOT), ".")


def peak_rss_gb() -> float:
    """Peak resident set size of this process so far (Linux ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def save_plot(path: Path, draw: Callable, *, size: tuple[float, float] = (7.0, 4.0)) -> None:
    """Draw with ``draw(figure)`` on a matplotlib Figure (no pyplot state) and save it as a PNG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size)
    draw(figure)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def run_dualquery_timed(data: Dataset, workload: Workload, true_answers: np.ndarray, config: DualQueryConfig,
                        *, seed: int) -> tuple[np.ndarray, dict]:
    """DualQuery (Algorithm 2) through ``RoundLoop`` with every phase timed.

    The loop is the one of :func:`dq_engine.mechanisms.dualquery.dualquery` (sample ``s`` queries from ``Q^t``, then
    :meth:`RoundLoop.play`), so the records are those ``dualquery`` returns for the same generator. Returns
    the records' codes and the summed phase times: sampling, oracle (best-response call), MW update
    (evaluate the record on every query + weight update), and the rest of each round (merging the samples
    into clauses, free attributes, error tracking).
    """
    rng = make_rng(seed)
    began = time.perf_counter()
    loop = RoundLoop(data, workload, config, rng, true_answers, grant=benchmark_grant(), mechanism="dualquery")
    setup = time.perf_counter() - began
    for t in range(1, config.rounds + 1):
        t0 = time.perf_counter()
        drawn = loop.distribution.sample(config.samples, rng)
        loop.play(t, drawn, sample_seconds=time.perf_counter() - t0)
    diagnostics = loop.diagnostics
    oracle = np.array([d.oracle_seconds for d in diagnostics])
    phases = {
        "setup": setup,
        "sampling": float(sum(d.sample_seconds for d in diagnostics)),
        "oracle": float(oracle.sum()),
        "mw_update": float(sum(d.update_seconds for d in diagnostics)),
        "other": float(sum(d.round_seconds - d.oracle_seconds - d.update_seconds for d in diagnostics)),
    }
    phases["total"] = float(sum(phases.values()))
    objective_gap = [
        max(0.0, (d.bound - d.objective) / max(1.0, abs(d.bound))) for d in diagnostics if d.bound is not None
    ]
    oracle_stats = {
        "median_seconds": float(np.median(oracle)), "p95_seconds": float(np.percentile(oracle, 95)),
        "max_seconds": float(oracle.max()),
        "local_search_seconds": float(sum(d.local_seconds for d in diagnostics)),
        "cpsat_seconds": float(sum(d.solver_seconds for d in diagnostics)),
        "cpsat_calls": sum(d.status not in ("NOT_RUN", "SKIPPED_DENSE") for d in diagnostics),
        "sources": {s: sum(d.source == s for d in diagnostics) for s in sorted({d.source for d in diagnostics})},
        "statuses": {s: sum(d.status == s for d in diagnostics) for s in sorted({d.status for d in diagnostics})},
        "rounds_with_bound": len(objective_gap),
        "median_gap": float(np.median(objective_gap)) if objective_gap else None,
        "max_gap": float(np.max(objective_gap)) if objective_gap else None,
        "mean_distinct_clauses": float(np.mean([d.distinct for d in diagnostics])),
    }
    return loop.rows(), {"phases": phases, "oracle": oracle_stats}


def errors_against_baselines(workload: Workload, true_answers: np.ndarray, records: np.ndarray) -> dict:
    """Max / mean / RMSE error of the records' answers and of the zeros and uniform baselines."""
    synthetic = answer_records(workload, workload.domain.encode_records(records))
    return {"dualquery": error_summary(true_answers, synthetic),
            "zeros": error_summary(true_answers, zeros_answers(workload)),
            "uniform": error_summary(true_answers, uniform_answers(workload))}


def cpsat_calls(oracle: dict) -> int:
    """Rounds in which CP-SAT actually ran (not skipped as dense, not switched off)."""
    return sum(count for status, count in oracle["statuses"].items() if status not in ("NOT_RUN", "SKIPPED_DENSE"))


def save_json_and_markdown(out: Path, result: dict, markdown: str, *, default: Callable | None = None) -> None:
    """Write ``result`` as JSON to ``out`` (its folder created) and ``markdown`` beside it (``.md``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=default) + "\n")
    out.with_suffix(".md").write_text(markdown)


def save_report(report: dict, out: Path, *, write_csv: Callable, plot: Callable) -> None:
    """Stamp the end-of-run load average, then write the report as JSON beside its CSV table and PNG plot."""
    report["machine"]["load_average_end"] = os.getloadavg()
    out.write_text(json.dumps(report, indent=1, default=float))
    write_csv(report["rows"], out.with_suffix(".csv"))
    plot(report["rows"], out.with_suffix(".png"))


TASK_LINE = re.compile(
    r"^(\d\d:\d\d:\d\d\.\d+) \| \w+\s*\| Task run '([\w-]+?)-[0-9a-f]{3,}' - Finished in state (\w+)"
)
"""A Prefect log line (``dqrelease run --verbose``) saying a task run finished: its time, task name and state."""
FLOW_START = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| \w+\s*\| Flow run '[^']+' - Beginning flow run")
"""The Prefect log line saying the flow run began."""
DAY_SECONDS = 86_400.0


def clock_seconds(moment: datetime) -> float:
    """Seconds since the local midnight: the clock of Prefect's log lines (``HH:MM:SS.fff``, local time)."""
    return moment.hour * 3600 + moment.minute * 60 + moment.second + moment.microsecond / 1e6


def _log_seconds(stamp: str, *, after: float | None) -> float:
    """A log line's ``HH:MM:SS.fff`` as :func:`clock_seconds`, past midnight if it is earlier than ``after``."""
    seconds = clock_seconds(datetime.strptime(stamp, "%H:%M:%S.%f"))
    return seconds + DAY_SECONDS if after is not None and seconds < after - 60 else seconds


def task_times(log: str, *, launched: float | None = None) -> tuple[list[dict], float | None]:
    """Per-task durations from the Prefect log: each task's finish minus the previous finish (or flow start).

    Args:
        log: The output of ``dqrelease run --verbose``.
        launched: The process's launch as :func:`clock_seconds`; log times before it are read as the next day's
            (a run that went past midnight).

    Returns:
        One row per finished task run (``task``, ``finished`` in clock seconds, ``state``, ``seconds``) and the flow's
        seconds from its start to its last task's finish (None without a flow start or a task).
    """
    start = None
    rows = []
    for line in log.splitlines():
        flow = FLOW_START.match(line)
        if flow and start is None:
            start = _log_seconds(flow.group(1), after=launched)
        task = TASK_LINE.match(line)
        if task:
            rows.append({"task": task.group(2), "finished": _log_seconds(task.group(1), after=launched),
                         "state": task.group(3)})
    previous = start
    for row in rows:
        row["seconds"] = None if previous is None else round(row["finished"] - previous, 3)
        previous = row["finished"]
    flow_seconds = None if start is None or not rows else rows[-1]["finished"] - start
    return rows, flow_seconds


class TreeMemory:
    """Peak RSS of a process and of its whole process tree, sampled on a thread.

    ``series`` keeps every sample of the tree as ``(seconds since the sampler started, bytes)`` when asked to.
    The tree's RSS is the sum over its processes, so pages they share (a forked child's) count once per process.
    With ``kill_above`` (bytes), a sample over it kills the tree and sets ``exceeded`` (a benchmark that would
    otherwise take the memory of the other jobs on the machine).
    """

    def __init__(self, pid: int, interval: float = 0.1, *, keep_series: bool = False,
                 kill_above: int | None = None) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.kill_above = kill_above
        self.exceeded = False
        self.peak_main = 0
        self.peak_tree = 0
        self.series: list[tuple[float, int]] | None = [] if keep_series else None
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                main = self.process.memory_info().rss
                tree = main
                for child in self.process.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        tree += child.memory_info().rss
            except psutil.Error:
                break
            self.peak_main = max(self.peak_main, main)
            self.peak_tree = max(self.peak_tree, tree)
            if self.series is not None:
                self.series.append((time.monotonic() - self._began, tree))
            if self.kill_above is not None and tree > self.kill_above:
                self.exceeded = True
                _kill_tree(self.process)
                break
            time.sleep(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True, kw_only=True)
class TimedProcess:
    """A finished child process of :func:`run_timed`.

    Attributes:
        returncode: Its exit code (negative: killed by that signal, e.g. after the timeout).
        timed_out: Whether the timeout killed it.
        wall_seconds: Launch to exit.
        launched: The launch as :func:`clock_seconds` (to line samples up with Prefect's log times).
        output: Its standard output and standard error, interleaved.
        peak_rss_main_gb: Peak RSS of the process itself.
        peak_rss_tree_gb: Peak RSS summed over its process tree.
        samples: The tree's RSS samples as ``(clock seconds, bytes)`` (:func:`clock_seconds` of each sample).
        memory_exceeded: Whether the tree went over ``run_timed``'s ``kill_above`` and was killed for it.
    """

    returncode: int
    timed_out: bool
    wall_seconds: float
    launched: float
    output: str
    peak_rss_main_gb: float
    peak_rss_tree_gb: float
    samples: list[tuple[float, int]]
    memory_exceeded: bool = False


def _kill_tree(process: psutil.Process) -> None:
    """Kill a process this script started and every process below it (a Prefect server, a side process)."""
    below: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        below = process.children(recursive=True)
    for each in [process, *below]:
        with contextlib.suppress(psutil.Error):
            each.kill()


def run_timed(command: list[str], *, env: dict[str, str], timeout: float, interval: float = 0.1,
              cwd: Path = ROOT, kill_above: int | None = None) -> TimedProcess:
    """Run ``command``, sampling its process tree's RSS every ``interval`` seconds; kill the tree at ``timeout``.

    With ``kill_above`` (bytes) the tree is also killed when a sample exceeds it (``memory_exceeded``).
    """
    launched = clock_seconds(datetime.now())
    began = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    memory = TreeMemory(child.pid, interval, keep_series=True, kill_above=kill_above)
    timed_out = False
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_tree(psutil.Process(child.pid))
        output, _ = child.communicate()
    wall = time.perf_counter() - began
    memory.stop()
    return TimedProcess(
        returncode=child.returncode, timed_out=timed_out, wall_seconds=wall, launched=launched, output=output,
        peak_rss_main_gb=memory.peak_main / 2**30, peak_rss_tree_gb=memory.peak_tree / 2**30,
        samples=[(launched + seconds, rss) for seconds, rss in memory.series or []],
        memory_exceeded=memory.exceeded,
    )


def median_range(rows: list[dict], field: str, digits: int = 3) -> str:
    """``field`` over ``rows`` as "median [min–max]" for a results table ("–" when no row has it)."""
    values = [row[field] for row in rows if row.get(field) is not None]
    if not values:
        return "–"
    fmt = f"{{:.{digits}f}}"
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def seeded_results_main(
    parser: argparse.ArgumentParser, argv: list[str] | None, *, epsilons: tuple[float, ...], seeds: tuple[int, ...],
    out: Path, run: Callable[[argparse.Namespace], None], report: Callable[[Path], str],
) -> int:
    """The command of a seeded results benchmark (one JSON line a run in ``--out``, a Markdown table beside it).

    Adds ``--epsilons``, ``--seeds``, ``--out``, ``--report`` and ``--smoke`` to the benchmark's own ``parser``, runs
    (unless ``--report``) and writes and prints the table.
    """
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(epsilons))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(seeds))
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--report", action="store_true", help="only write the Markdown table from --out")
    parser.add_argument("--smoke", action="store_true",
                        help="bench/fidelity.py's smoke sizes (2,000 Adult rows, 3 rounds): tests only")
    args = parser.parse_args(argv)
    if not args.report:
        print(json.dumps({"machine": machine()}), flush=True)
        run(args)
    args.out.with_suffix(".md").write_text(report(args.out))
    print(args.out.with_suffix(".md").read_text())
    return 0
