"""Many processes start a flow at once on one local Prefect server: how many end in a Prefect API error?

``python bench/prefect_api_contention.py [PROCESSES] [ROUNDS] [MAX_RETRIES]`` starts Prefect's test server (SQLite,
in a temporary ``PREFECT_HOME``), then per round forks PROCESSES children that each run a flow of 20 tasks at the
same instant, and prints how many failed and with what. ``MAX_RETRIES`` sets ``PREFECT_CLIENT_MAX_RETRIES`` for the
children (default: ``dqrelease.cli.app.PREFECT_DEFAULTS``'s value; Prefect's own default is 5).

What it shows (docs/robustness.md, "Concurrent load held"): under this load the server's SQLite database is busy,
the server answers 503 and the client retries with exponential backoff; Prefect's 5 retries run out and a run
fails with ``PrefectHTTPStatusError`` 503 on ``/api/flow_runs/``, its flow run left Pending.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import tempfile
import time

TASKS = 20


def _child(index: int, go, out) -> None:  # go: a multiprocessing Event, out: a Queue
    from prefect import flow, task
    from prefect.exceptions import PrefectHTTPStatusError

    @task
    def step(x: int) -> int:
        return x + 1

    @flow(persist_result=False)
    def tiny(n: int) -> int:
        return sum(step(k) for k in range(n))

    go.wait()
    try:
        tiny(TASKS)
        out.put((index, "ok"))
    except PrefectHTTPStatusError as error:
        out.put((index, f"PrefectHTTPStatusError {error.response.status_code} {error.request.url.path}"))
    except Exception as error:  # any other failure is reported by its type
        out.put((index, type(error).__name__))


def main(processes: int, rounds: int, max_retries: str) -> None:
    """Run the rounds and print one line per round."""
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="dqrelease-contention-"))
    os.environ.update(PREFECT_CLIENT_MAX_RETRIES=max_retries, PREFECT_LOGGING_LEVEL="CRITICAL", DO_NOT_TRACK="1",
                      PREFECT_SERVER_ANALYTICS_ENABLED="false")
    from prefect.testing.utilities import prefect_test_harness

    context = mp.get_context("fork")
    with prefect_test_harness(server_startup_timeout=90):
        for number in range(rounds):
            go, out = context.Event(), context.Queue()
            children = [context.Process(target=_child, args=(i, go, out)) for i in range(processes)]
            for child in children:
                child.start()
            time.sleep(2)
            started = time.monotonic()
            go.set()
            results = [out.get(timeout=1800) for _ in children]
            for child in children:
                child.join()
            failed = [result for _, result in results if result != "ok"]
            print(f"round {number}: {len(failed)} of {processes} failed in {time.monotonic() - started:.0f} s "
                  f"(PREFECT_CLIENT_MAX_RETRIES={max_retries}) {sorted(set(failed))}", flush=True)


if __name__ == "__main__":
    from dqrelease.cli.app import PREFECT_DEFAULTS

    arguments = sys.argv[1:]
    main(int(arguments[0]) if arguments else 16, int(arguments[1]) if len(arguments) > 1 else 2,
         arguments[2] if len(arguments) > 2 else PREFECT_DEFAULTS["PREFECT_CLIENT_MAX_RETRIES"])
