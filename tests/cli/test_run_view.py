"""The run's stage events and how the CLI's view shows them (no Prefect run: events are fed by hand)."""

from __future__ import annotations

import io
import re
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
from rich.console import Console

from dqrelease.cli.live import PLAIN_PREFIX, RunView
from dqrelease.runtime import progress
from dqrelease.runtime.progress import RoundStages, StageEvent


def _plain_view() -> tuple[RunView, io.StringIO]:
    out = io.StringIO()
    return RunView(Console(file=out, width=200), "plain"), out


def _events(out: io.StringIO) -> list[str]:
    lines = out.getvalue().splitlines()
    assert all(re.match(PLAIN_PREFIX, line) for line in lines), lines
    return [re.sub(PLAIN_PREFIX, "", line) for line in lines]


def test_the_rounds_of_a_plan_with_a_table_fit_are_split_into_the_mechanism_and_the_fit():
    sent: list[StageEvent] = []
    stages = RoundStages(mechanism=3, fit=2)
    for number in range(1, 6):
        stages.report(number, {"source": "mw", "distinct": 4, "extra": {"marginal": number}}, sent.append)
    assert [(e.stage, e.state, e.done, e.total) for e in sent] == [
        ("mechanism", "advanced", 1, 3), ("mechanism", "advanced", 2, 3), ("mechanism", "advanced", 3, 3),
        ("mechanism", "finished", 0, 3), ("fit", "started", 0, 2),
        ("fit", "advanced", 1, 2), ("fit", "advanced", 2, 2),
    ]
    assert sent[-1].detail == "measured marginal 5 (4 cells)"
    assert stages.describe() == "3 rounds + 2 fit rounds"


def test_an_event_survives_the_trip_through_a_dask_event_with_the_keys_dask_adds():
    event = StageEvent(stage="fit", state="advanced", done=3, total=6, detail="measured marginal 2 (6 cells)")
    assert StageEvent.from_message({**event.as_message(), "worker": "tcp://127.0.0.1:4567"}) == event


def test_plain_lines_say_when_each_stage_starts_and_ends_and_a_later_stage_ends_an_earlier_one():
    view, out = _plain_view()
    with view.showing():
        progress.emit(StageEvent(stage="start", state="started"))
        with progress.stage("ingest"):
            pass
        with RoundStages(mechanism=10, fit=0).running():
            for number in range(1, 11):
                RoundStages(mechanism=10).report(number, {"source": "cpsat", "status": "OPTIMAL"})
        progress.emit(StageEvent(stage="mechanism", state="advanced", done=4, total=10))  # late: ignored
    events = _events(out)
    assert [e.split(":")[0] for e in events if ": started (" in e] == ["start", "ingest", "mechanism"]
    assert [e.split(":")[0] for e in events if re.search(r": done \(\d+:\d\d:\d\d\)$", e)] == [
        "start", "ingest", "mechanism"]
    assert events.index("mechanism: started (answer the workload, then run the mechanism, 10 rounds)") < \
        events.index("mechanism: round 10/10, oracle cpsat (OPTIMAL)")
    rounds = [e for e in events if e.startswith("mechanism: round ")]
    assert len(rounds) == 10  # one per tenth
    assert "about" in rounds[0] and "left" in rounds[0]


def test_a_failing_stage_is_marked_stopped_before_the_error():
    view, out = _plain_view()
    with pytest.raises(RuntimeError), view.showing(), progress.stage("validate"):
        raise RuntimeError("refused")
    assert _events(out)[-1] == "validate: stopped"


def test_the_terminal_view_draws_a_finished_row_per_stage_with_its_rounds():
    out = io.StringIO()
    view = RunView(Console(file=out, width=160, force_terminal=True, color_system=None), "terminal")
    with view.showing():
        with progress.stage("ingest"):
            pass
        with RoundStages(mechanism=2).running():
            RoundStages(mechanism=2).report(1, {"source": "cpsat", "status": "OPTIMAL"})
            RoundStages(mechanism=2).report(2, {"source": "cpsat", "status": "OPTIMAL"})
    text = out.getvalue()
    assert "✓ ingest" in text and re.search(r"✓ mechanism .* 2/2 ", text)


def test_quiet_shows_no_plan_and_no_stages_but_a_server_left_running(monkeypatch):
    out = io.StringIO()
    view = RunView(Console(file=out, width=200), "quiet")
    view.notice("plan: ...")
    with view.showing(), progress.stage("ingest"):
        pass
    view.notice("started a local Prefect server", quiet_too=True)
    assert out.getvalue().splitlines() == ["started a local Prefect server"]


def test_a_run_that_starts_the_local_prefect_server_says_so_and_how_to_stop_it(monkeypatch, tmp_path):
    import dqrelease.flows.release as flows
    import dqrelease.runtime.prefect_server as server
    from dqrelease.cli.release import _run_release

    record = SimpleNamespace(ui_url="http://127.0.0.1:4321", pid=4242)
    api = SimpleNamespace(source="started", record=record, connected=nullcontext)
    monkeypatch.setattr(server, "prefect_api", lambda: api)
    monkeypatch.setattr(flows, "run_release", lambda *args, **kwargs: {"run_id": "r"})
    view, out = _plain_view()

    assert _run_release(tmp_path / "release.toml", view=view) == {"run_id": "r"}

    [notice] = [e for e in _events(out) if "Prefect server" in e]
    assert "http://127.0.0.1:4321" in notice and "`dqrelease server stop` stops it" in notice
