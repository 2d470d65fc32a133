"""No round time leaves the process: the Prefect run log and the progress sinks get no ``*_seconds`` field."""

from __future__ import annotations

import pytest

from dq_engine.results import RoundDiagnostics
from dqrelease.runtime import progress


def _diagnostics(round_number: int) -> RoundDiagnostics:
    # distinctive wall times: none of these digits may show up anywhere outside the process
    return RoundDiagnostics(
        round=round_number, sampled=40, distinct=38, source="cpsat", status="OPTIMAL", objective=12.0, bound=12.0,
        solver_seconds=4.56789, local_seconds=3.45678, round_seconds=9.87654, free_attributes=0,
        sample_seconds=1.23456, oracle_seconds=7.65432, update_seconds=2.34567,
    )


_TIMES = ("4.56", "3.45", "9.87", "9.88", "1.23", "7.65", "2.34", "2.35")


@pytest.fixture
def sink_calls():
    calls = []
    progress.set_sink(calls.append)
    yield calls
    progress.clear_sink()


def test_progress_sinks_get_no_timings(sink_calls):
    progress.RoundStages(mechanism=10).report(3, _diagnostics(3).public())
    (event,) = sink_calls
    assert (event.stage, event.done, event.total) == ("mechanism", 3, 10)
    assert event.detail == "oracle cpsat (OPTIMAL)"  # the public description is still there
    assert not [key for key in event.as_message() if key.endswith("_seconds")]
    assert not any(time in repr(event) for time in _TIMES)


def test_the_synthesize_tasks_log_lines_carry_no_round_time(monkeypatch, sink_calls):
    import tasks.synthesize as synthesize_module

    class _Plan:
        mechanism = "dualquery"
        progress_rounds = 2
        fit = None

    def run_mechanism(grant, inputs):
        for round_number in (1, 2):
            inputs.progress(_diagnostics(round_number))
        return "result"

    lines = []

    class _Logger:
        def info(self, message, *args):
            lines.append(message % args)

    monkeypatch.setattr(synthesize_module, "granted_plan", lambda grant: _Plan())
    monkeypatch.setattr(synthesize_module, "get_run_logger", lambda: _Logger())
    monkeypatch.setattr(synthesize_module, "create_progress_artifact", lambda *args, **kwargs: "artifact")
    monkeypatch.setattr(synthesize_module, "update_progress_artifact", lambda *args, **kwargs: None)
    monkeypatch.setattr(synthesize_module, "run_mechanism", run_mechanism)
    assert synthesize_module.synthesize.fn("grant", None, None, None) == "result"

    assert lines == ["round 1/2: oracle cpsat (OPTIMAL)", "round 2/2: oracle cpsat (OPTIMAL)"]
    assert [event.done for event in sink_calls] == [1, 2]
    for event in sink_calls:
        assert not any(time in repr(event) for time in _TIMES)
