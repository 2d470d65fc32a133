"""bench/small_tables.py with OpenDP's MST and AIM beside ours: how a peer's pairs are counted, and what a peer run
that could not run leaves behind. None of these needs the peers venv (``.venv-peers``) or a timed run.
"""

from __future__ import annotations

import numpy as np
import pytest

import bench.fidelity as fidelity
from bench.fidelity import Loaded, published_figures
from bench.small_tables import markdown, run_peer_one, summarise
from dq_engine import Dataset, Domain, all_kway_marginals
from dq_engine.evaluation.fidelity import evaluate_rows, fidelity_reference

META = {"rows": 4, "seeds": 2, "load_start": 0.0, "load_end": 0.0, "commit": "test", "auto": {}}


def _row(mechanism: str, seed: int, pair_tvd: list[float], **extra) -> dict:
    return {"setting": "t", "epsilon": 1.0, "mechanism": mechanism, "seed": seed, "status": "ok",
            "pair_tvd": pair_tvd, "worst_one_way_cell": 0.01, "seconds": 1.0, **extra}


def _entry(summary: list[dict], mechanism: str) -> dict:
    [entry] = [e for e in summary if e["mechanism"] == mechanism]
    return entry


def test_a_peers_pairs_are_counted_against_independent_columns_of_the_same_seed():
    rows = [
        _row("independent", 0, [0.1, 0.1, 0.1, 0.1]),
        _row("independent", 1, [0.3, 0.3, 0.3, 0.3]),
        # seed 0 against independent seed 0: worse (> 0.12) on 3, better on 1 (against seed 1 it would be 0 and 4)
        _row("mst", 0, [0.05, 0.2, 0.2, 0.2], process_seconds=3.0),
        # seed 1 against independent seed 1: worse (> 0.32) on 1, better on 2 (against seed 0 it would be 4 and 0)
        _row("mst", 1, [0.25, 0.25, 0.35, 0.31], process_seconds=3.0),
    ]
    entry = _entry(summarise(rows), "mst")
    assert entry["pairs_worse_than_independent"] == {"median": 2, "min": 1, "max": 3}
    assert entry["pairs_better_than_independent"] == {"median": 1.5, "min": 1, "max": 2}
    assert entry["statuses"] == {"ok": 2} and entry["seeds"] == 2 and entry["pairs"] == 4
    assert "forecast_worst_one_way_cell" not in entry and entry["forecast_passes"] is None
    text = markdown(summarise(rows), META)
    mst_line = next(line for line in text.splitlines() if line.startswith("| t | 1 | mst | ok 2 |"))
    assert "| 2 [1–3] (4) | – / – | – |" in mst_line  # pairs worse; a peer has no forecast


def test_a_peer_that_did_not_finish_is_recorded_with_its_status_and_note():
    rows = [
        _row("independent", 0, [0.1, 0.1]),
        {"setting": "t", "epsilon": 1.0, "mechanism": "aim", "seed": 0, "status": "capped",
         "note": "killed at the cap of 30 min"},
    ]
    entry = _entry(summarise(rows), "aim")
    assert entry["statuses"] == {"capped": 1} and entry["seeds"] == 0
    assert entry["notes"] == ["seed 0: capped: killed at the cap of 30 min"]
    assert "pairs_worse_than_independent" not in entry
    text = markdown(summarise(rows), META)
    assert "| t | 1 | aim | capped 1 | – |" in text
    assert "- t ε 1 aim, seed 0: capped: killed at the cap of 30 min" in text


def _tiny_loaded(codes: np.ndarray) -> Loaded:
    domain = Domain.categorical({"a": 2, "b": 3, "c": 2})
    data = Dataset.from_codes(domain, codes)
    workload = all_kway_marginals(domain, 2)
    return Loaded(data=data, workload=workload, constraints=None, config_keys=None, description="tiny")


def test_an_unavailable_peers_interpreter_gives_a_recorded_unavailable_row(tmp_path):
    loaded = _tiny_loaded(np.array([[0, 0, 0], [1, 2, 1], [1, 1, 0], [0, 2, 1]]))
    reference = fidelity_reference(loaded.data, workload=loaded.workload)
    row = run_peer_one("mst", "tiny", loaded, reference, 1.0, 0, python=tmp_path / "missing" / "python",
                       cap_minutes=1.0, smoke=True)
    assert row["status"] == "unavailable" and "--install-peers" in row["note"]
    assert (row["mechanism"], row["epsilon"], row["seed"]) == ("mst", 1.0, 0)
    entry = _entry(summarise([_row("independent", 0, [0.1, 0.1, 0.1]), {"setting": "t", **row}]), "mst")
    assert entry["statuses"] == {"unavailable": 1} and entry["seeds"] == 0


def test_the_peers_data_file_is_rewritten_for_other_rows_of_the_same_shape(tmp_path, monkeypatch):
    monkeypatch.setattr(fidelity, "TMP", tmp_path)
    first = _tiny_loaded(np.array([[0, 0, 0], [1, 2, 1]]))
    second = _tiny_loaded(np.array([[1, 1, 1], [0, 2, 0]]))  # a cut of other rows: same shape, other codes
    path = fidelity.peers_data("tiny", first, smoke=False)
    assert fidelity.peers_data("tiny", second, smoke=False) == path
    with np.load(path) as archive:
        assert sorted(map(tuple, archive["codes"].tolist())) == [(0, 2, 0), (1, 1, 1)]


def test_published_figures_give_every_pairs_tvd_with_rows_outside_the_domain_as_error():
    loaded = _tiny_loaded(np.array([[0, 0, 0], [1, 2, 1], [1, 1, 0], [0, 2, 1]]))
    reference = fidelity_reference(loaded.data, workload=loaded.workload)
    inside = np.array([[0, 0, 0], [1, 2, 1], [1, 2, 0], [0, 2, 1]])
    expected = evaluate_rows(reference, inside, label="rows").two_way_tvd
    assert published_figures(reference, inside, None)["pair_tvd"] == pytest.approx(expected.tolist())
    # a fifth row outside the domain: every pair's in-domain shares scale by 4/5 and a cell of 1/5 is added
    outside = np.vstack([inside, [[-1, -1, -1]]])
    tables = evaluate_rows(reference, inside, label="rows").tables[3:]
    corrected = [0.5 * (np.abs(truth - 0.8 * table).sum() + 0.2) for truth, table in
                 zip(reference.tables[3:], tables, strict=True)]
    assert published_figures(reference, outside, None)["pair_tvd"] == pytest.approx(corrected)
