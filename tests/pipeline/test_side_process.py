"""Validation and charts in the side process (:mod:`dqrelease.runtime.side_process`) give the in-process results.

One spawned process serves the whole module (its start imports GX: a few seconds).
"""

from __future__ import annotations

import operator
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import dqrelease.expectations.validate as validate_module
from dqrelease.cli import SIDE_PROCESS_WARM_UP, SIDE_PROCESS_WHEN_IDLE
from dqrelease.errors import ConfigInvalidError, ValidationFailedError
from dqrelease.expectations.engine import SuiteSpec, suite_shape
from dqrelease.expectations.validate import validate_synthetic, validate_table
from dqrelease.runtime import side_process as process
from dqrelease.warehouse import connect
from tests.constraints.test_rules_pipeline import _raw_frame, _schema, _store
from tests.pipeline import side_helpers
from tests.pipeline.test_error_report import _report, toy_table
from tests.pipeline.test_expectations import GOOD, SCHEMA, _table


@pytest.fixture(scope="module")
def worker():
    # the CLI's warm-ups: a wrong name fails every call (the idle one: every call after it ran)
    with process.running(SIDE_PROCESS_WARM_UP, when_idle=SIDE_PROCESS_WHEN_IDLE) as running:
        yield running


def _outcome(function, *args, **kwargs):
    """('ok', value) or ('error', type, failures or message) of a validation call."""
    try:
        return ("ok", function(*args, **kwargs))
    except ValidationFailedError as error:
        return ("error", type(error).__name__, str(error), error.failures)


def test_raw_rule_counts_and_failures_match_in_process(worker, monkeypatch):
    monkeypatch.setattr(validate_module, "CELLS_PER_CHUNK", 1)  # many chunks: several in flight at once
    monkeypatch.setattr(validate_module, "MIN_ROWS_PER_CHUNK", 50)
    report, fail = _schema(on_violation="report"), _schema()
    with connect(None) as con:
        _store(con, _raw_frame(600, seed=3))
        in_worker = [_outcome(validate_table, con, "raw", s, label="raw table") for s in (report, fail)]
        monkeypatch.setattr(process, "_current", None)
        in_here = [_outcome(validate_table, con, "raw", s, label="raw table") for s in (report, fail)]
    assert in_worker == in_here
    assert in_here[0][0] == "ok" and all(count > 0 for count in in_here[0][1].values())
    assert in_here[1][0] == "error"


def test_failures_summed_over_chunks_and_missing_columns_match(worker, monkeypatch):
    monkeypatch.setattr(validate_module, "CELLS_PER_CHUNK", 1)
    monkeypatch.setattr(validate_module, "MIN_ROWS_PER_CHUNK", 3)
    rows = {k: v * 3 for k, v in GOOD.items()}
    rows["colour"] = ["red", "zz", "blue", "zz"] * 3
    cases = [rows, {k: v for k, v in GOOD.items() if k != "size"}, {k: [] for k in GOOD}]
    results = {}
    for where in ("worker", "here"):
        if where == "here":
            monkeypatch.setattr(process, "_current", None)
        with connect(None) as con:
            results[where] = []
            for case in cases:
                _table(con, case)
                results[where].append(_outcome(validate_table, con, "raw", SCHEMA, label="raw table"))
            _table(con, {**GOOD, "note": ["a", "none", "none", "a"]}, "synthetic")
            results[where].append(_outcome(validate_synthetic, con, "synthetic", SCHEMA, numeric_values="uniform"))
    assert results["worker"] == results["here"]
    assert results["here"][0][3] == [
        {"expectation": "expect_column_values_to_be_in_set", "column": "colour", "unexpected_count": "6"}
    ]
    assert "missing columns ['size']" in results["here"][1][2]
    assert all(result[0] == "error" for result in results["here"])


def test_the_report_drawn_beside_the_side_process_is_the_same_page(worker, monkeypatch, tmp_path):
    table = toy_table()
    _report(table, "dualquery", tmp_path / "side")
    monkeypatch.setattr(process, "_current", None)
    _report(table, "dualquery", tmp_path / "here")
    side, here = (_images(tmp_path / where / "error_report.html") for where in ("side", "here"))
    timed = "oracle seconds per round"  # the solver's wall times differ between two runs
    assert {k: v for k, v in side.items() if k != timed} == {k: v for k, v in here.items() if k != timed}
    assert len(side) >= 4


def _images(page) -> dict[str, str]:
    return dict(re.findall(r"<img alt='([^']*)' src='data:image/png;base64,([^']*)'", page.read_text()))


def test_release_errors_come_back_as_themselves(worker):
    with pytest.raises(ConfigInvalidError, match="basket layout needs a schema of binary columns"):
        process.call(suite_shape, SuiteSpec(schema=SCHEMA, kind="raw", layout="baskets"))


def test_other_errors_come_back_by_type_only(worker, monkeypatch):
    monkeypatch.delenv("DQRELEASE_DEBUG", raising=False)
    with pytest.raises(process.SideProcessError) as caught:
        process.call(operator.truediv, 1, 0)
    assert "ZeroDivisionError" in str(caught.value)
    assert "division by zero" not in str(caught.value)  # the text is withheld: it may quote data
    assert process.call(operator.add, 2, 3) == 5  # the process still answers


def test_a_process_that_dies_is_reported_not_waited_for(monkeypatch):
    monkeypatch.setattr(process, "_current", None)  # the module's process stays aside (restored after)
    with process.running(), pytest.raises(process.SideProcessError, match=r"ended \(exit code 3\)"):
        process.call(os._exit, 3)
    assert process._current is None


def test_nesting_is_refused(worker):
    with pytest.raises(RuntimeError, match="already running"), process.running():
        pass


def test_the_validation_stack_imports_no_great_expectations():
    code = ("import sys, dqrelease.expectations.validate, dqrelease.flows.release; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'great_expectations'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_ctrl_c_is_left_to_the_run(worker):
    """The child ignores SIGINT (the terminal sends it to the whole process group; the run stops the child)."""
    assert process.call(signal.getsignal, signal.SIGINT) == signal.SIG_IGN


def test_threads_waiting_at_once_each_get_their_own_results(worker):
    """The synthetic table is validated in a task thread while the run draws the report: both wait at once."""
    def calls(offset: int) -> list[int]:
        return [process.call(operator.add, offset, i) for i in range(40)]

    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(calls, 1000 * t) for t in range(3)]
        results = [future.result(timeout=120) for future in futures]
    assert results == [[1000 * t + i for i in range(40)] for t in range(3)]


def _poll(condition, seconds: float = 60.0) -> bool:
    """Ask ``condition`` (a call) now and then, leaving the child idle long enough for its idle warm-ups."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(4 * process.IDLE_SECONDS)
    return False


def test_idle_warm_ups_wait_until_no_call_is_waiting(monkeypatch):
    """The raw table's validation must not wait for matplotlib: an idle warm-up runs only after the calls."""
    monkeypatch.setattr(process, "_current", None)
    with process.running(when_idle=("tests.pipeline.side_helpers:import_marker",)):
        # sent before the child serves: it is answered before the idle warm-up
        assert process.call(side_helpers.marker_imported) is False
        # then, idle for IDLE_SECONDS, the child imports it
        assert _poll(lambda: process.call(side_helpers.marker_imported))
    assert "tests.pipeline.side_marker" not in sys.modules  # it ran in the child only


def test_idle_warm_ups_wait_for_the_first_awaited_call(monkeypatch):
    """A prefetch does not start the idle clock: the raw suite is prefetched, then the run ingests for a while and
    its validation (the first awaited call) must not wait behind matplotlib's import."""
    monkeypatch.setattr(process, "_current", None)
    with process.running(when_idle=("tests.pipeline.side_helpers:import_marker",)):
        process.prefetch(operator.add, 1, 2)
        time.sleep(8 * process.IDLE_SECONDS)  # idle, but nothing awaited has been answered yet
        assert process.call(side_helpers.marker_imported) is False
        assert _poll(lambda: process.call(side_helpers.marker_imported))


def test_a_failing_idle_warm_up_fails_later_calls(monkeypatch):
    monkeypatch.setattr(process, "_current", None)
    monkeypatch.delenv("DQRELEASE_DEBUG", raising=False)

    def fails() -> bool:
        try:
            process.call(operator.add, 1, 1)
        except process.SideProcessError as error:
            return "LookupError" in str(error)
        return False

    with process.running(when_idle=("tests.pipeline.side_helpers:broken",)):
        assert _poll(fails)


def test_prefetch_fills_the_side_process_and_returns_nothing(worker, monkeypatch):
    """The raw suite is built while the run starts; what a prefetch returns or raises is dropped."""
    process.prefetch(operator.truediv, 1, 0)  # raises in the child: dropped
    process.prefetch(operator.add, 1, 2)
    assert process.call(operator.add, 2, 3) == 5  # the next calls get their own results, in order
    assert process.call(operator.mul, 2, 3) == 6
    monkeypatch.setattr(process, "_current", None)
    process.prefetch(operator.truediv, 1, 0)  # without a side process nothing runs (so nothing raises)


def test_the_raw_suite_prefetched_is_the_one_validation_uses(worker):
    validate_module.prepare_raw_suite(SCHEMA)
    spec = SuiteSpec(schema=SCHEMA, kind="raw", layout="wide")
    assert process.call(suite_shape, spec) == suite_shape(spec)


_REFUSAL_WITH_A_LIVE_TRACEBACK = """
import atexit, sys
from dqrelease.cli.app import _exit_without_teardown, _state
from dqrelease.runtime import side_process
atexit.register(_exit_without_teardown)
_state["exit_code"] = 3
def release():
    with side_process.running(("json:dumps",)) as worker:
        raise ValueError(f"refused while {worker} ran")
try:
    release()
except ValueError as error:
    held = error  # its traceback keeps release()'s frame, and so the side process's queues, alive
    print("error: refused", file=sys.stderr)
    sys.exit(3)
"""


def test_a_refusal_that_holds_the_side_process_ends_with_its_one_line_and_no_leak_warning():
    """The CLI's fast exit runs multiprocessing's exit handler: without it the queues' semaphores stay registered
    and the resource tracker prints 'There appear to be 2 leaked semaphore objects' after the refusal's line."""
    done = subprocess.run([sys.executable, "-c", _REFUSAL_WITH_A_LIVE_TRACEBACK], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3
    assert done.stderr == "error: refused\n"
