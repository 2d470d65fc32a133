"""Run several ``dqrelease`` command lines as separate processes that start at once (test helper, not a test).

``python fork_runs.py JOBS.json`` reads a list of jobs ``{"argv": [...], "cwd": ..., "env": {...}, "stdout": ...,
"stderr": ...}``, imports the heavy libraries a run needs *except Prefect* once, then forks one child per job.
Each child sets its job's environment and working directory, points its stdout and stderr at the job's files
and runs the CLI's entry point exactly as the ``dqrelease`` script does (Prefect is imported by the child
itself, after the CLI has prepared its environment, as in a real process). The parent waits for every child
and writes ``{"exit_codes": [...]}`` to ``JOBS.json.result``.

Forking saves each child the 10-20 s of imports a fresh interpreter needs on a loaded 2-core machine, so 16
releases really run at once. The launcher starts no thread before forking, Python or native (checked in
``/proc/self/task``; BLAS is limited to one thread so numpy starts no pool), so forking is safe.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

# Native thread pools (OpenBLAS starts one when numpy is imported) do not survive a fork: a child's first large
# BLAS call would wait forever for workers it does not have. One BLAS thread per process means no pool.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")


FORK_SAFE_THREADS = {"jemalloc_bg_thd"}
"""Native threads that survive a fork: jemalloc (pyarrow's allocator) restarts its background thread itself."""


def _preload() -> None:
    import duckdb  # noqa: F401
    import great_expectations  # noqa: F401
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import scipy  # noqa: F401

    import dq_engine  # noqa: F401
    import dqrelease.cli  # noqa: F401

    assert not any(name == "prefect" or name.startswith("prefect.") for name in sys.modules), "Prefect preloaded"
    assert threading.active_count() == 1, "a thread was started before forking"
    if os.path.isdir("/proc/self/task"):  # native threads too (thread pools of C libraries)
        others = [task for task in os.listdir("/proc/self/task") if task != str(os.getpid())]
        names = [Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in others]
        native = [name for name in names if name not in FORK_SAFE_THREADS]
        assert not native, f"native threads {native} were started before forking"


def _child(job: dict) -> None:
    os.environ.update(job.get("env", {}))
    for key in job.get("unset", []):
        os.environ.pop(key, None)
    os.chdir(job["cwd"])
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["dqrelease", *job["argv"]]
    from dqrelease.cli import main

    main()  # raises SystemExit: the child leaves through the interpreter's normal exit, never back here


def run(jobs_file: str) -> None:
    """Fork one child per job, wait for all, write their exit codes (see the module docstring)."""
    with open(jobs_file, encoding="utf-8") as handle:
        jobs = json.load(handle)
    _preload()
    sys.stdout.flush()
    sys.stderr.flush()
    children = []
    for job in jobs:
        pid = os.fork()
        if pid == 0:
            _child(job)
        children.append(pid)
    codes = []
    for pid in children:
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    with open(jobs_file + ".result", "w", encoding="utf-8") as handle:
        json.dump({"exit_codes": codes, "pids": children}, handle)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as the CLI does: no interpreter teardown (DuckDB's bindings would report "leaks" at it)


if __name__ == "__main__":
    run(sys.argv[1])
