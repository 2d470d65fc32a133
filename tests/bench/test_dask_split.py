"""bench/dask_split.py's split of a Dask run: the nested move shards and the mechanism's projection (no cluster)."""

from __future__ import annotations

import pytest

from bench import dask_split


def _stage(wall: float, waiting: float = 0.0) -> dict:
    return {"wall_seconds": wall, "driver_waiting_seconds": waiting}


def _report(move_shards: list[dict]) -> dict:
    stages = {name: _stage(0.0) for name in dask_split.TIMED_TASKS}
    stages["_synthesize"] = _stage(100.0, waiting=99.0)
    return {"stages": stages, "worker_tasks": {
        "answer_partition": [{"worker": "a", "seconds": 1.0}, {"worker": "b", "seconds": 1.0}],
        "synthesize": [{"worker": "a", "seconds": 98.0}],
        "move_shard": move_shards,
    }}


def _shard(worker: str, start: float, stop: float) -> dict:
    return {"worker": worker, "seconds": stop - start, "start": start, "stop": stop}


def test_two_rounds_of_four_shards_on_two_workers_project_to_eight_workers():
    # two rounds of 4 shards of 5 s, each round 10 s of wall on 2 workers, 10 s apart
    shards = []
    for first in (0.0, 20.0):
        shards += [_shard("a", first, first + 5), _shard("b", first, first + 5),
                   _shard("a", first + 5, first + 10), _shard("b", first + 5, first + 10)]
    parts = dask_split.split(_report(shards))
    stage = parts["stages"]["_synthesize"]
    assert stage["nested"] == {"function": "move_shard", "worker_compute_seconds": 40.0, "worker_tasks": 8,
                               "workers_used": 2, "rounds": 2, "wall_seconds": 20.0}
    sequential = 98.0 - 20.0  # the mechanism's task minus the rounds' wall time
    busy = 1.0  # wall 100 minus 99 waiting
    assert stage["projected_seconds"]["2"] == pytest.approx(busy + 2.0 / 2 + sequential + 2 * 20.0 / 2, abs=0.05)
    assert stage["projected_seconds"]["8"] == pytest.approx(busy + 2.0 / 2 + sequential + 2 * 20.0 / 4, abs=0.05)
    assert stage["projected_seconds"]["64"] == stage["projected_seconds"]["8"]  # 4 shards a round: no more spread
    assert parts["worker_compute_seconds"] == pytest.approx(98.0 + 2.0)  # the nested compute is not added again
    table = dask_split.markdown({"rows": 10, "load_before": "0", "load_after": "0", "split": parts,
                                 "local": {"wall_seconds": 1.0, "stages": {n: _stage(0.0) for n in
                                                                            dask_split.TIMED_TASKS}},
                                 "dask": {"wall_seconds": 1.0, "stages": _report(shards)["stages"]}})
    assert "↳ move_shard (inside the mechanism's task; 2 rounds) | – | 20.0 | – | 40.0 (8, 2)" in table


def test_without_recorded_spans_the_mechanism_stays_as_measured():
    shards = [{"worker": w, "seconds": 5.0} for w in "abab"]  # an older result file: no start / stop
    stage = dask_split.split(_report(shards))["stages"]["_synthesize"]
    assert stage["nested"]["rounds"] == 0 and stage["nested"]["wall_seconds"] is None
    assert stage["projected_seconds"]["8"] == pytest.approx(1.0 + 2.0 / 2 + 98.0, abs=0.05)


def test_rounds_are_runs_of_overlapping_spans():
    shards = [_shard("a", 0, 3), _shard("b", 1, 4), _shard("a", 4, 6), _shard("b", 7, 8)]
    rounds = dask_split.nested_rounds(shards)
    assert [len(r) for r in rounds] == [3, 1]  # 4 touches 4 (the same round); 7 starts after a gap
