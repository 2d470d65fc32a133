"""bench/fidelity.py: its out-of-domain accounting against hand-computed figures, and a smoke run end to end.

Not timing tests. The smoke run needs the shipped Adult only (examples/adult/data); the peers' real run needs the
separate ``.venv-peers`` and minutes (jax), so it only runs with ``DQRELEASE_BENCH_PEERS=1``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dq_engine import Dataset, Domain, all_kway_marginals
from dq_engine.evaluation.fidelity import evaluate_rows, fidelity_reference

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"


def _bench_fidelity():
    spec = importlib.util.spec_from_file_location("bench_fidelity", ROOT / "bench" / "fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_fidelity", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _tiny() -> object:
    domain = Domain.categorical({"a": 2, "b": 2})
    data = Dataset.from_codes(domain, np.array([[0, 0], [0, 1], [1, 1], [1, 1]]))
    return fidelity_reference(data, workload=all_kway_marginals(domain, 1))


def test_rows_outside_the_domain_are_an_extra_cell_of_error():
    reference = _tiny()
    # 3 rows inside, 1 outside (f = 1/4): inside shares are scaled by 3/4
    published = np.array([[0, 0], [0, 0], [1, 1], [-1, -1]])
    figures = _bench_fidelity().published_figures(reference, published, None)
    # a: true (1/2, 1/2), published (1/2, 1/4) + outside 1/4 -> TVD (0 + 1/4 + 1/4) / 2; worst cell 1/4
    # b: true (1/4, 3/4), published (1/2, 1/4) + outside 1/4 -> TVD (1/4 + 1/2 + 1/4) / 2; worst cell 1/2
    assert figures["mean_one_way_tvd"] == pytest.approx((0.25 + 0.5) / 2)
    assert figures["max_one_way_tvd"] == pytest.approx(0.5)
    assert figures["worst_one_way_cell"] == pytest.approx(0.5)
    # (a, b): true (1/4, 1/4, 0, 1/2), published (1/2, 0, 0, 1/4) + outside 1/4 -> (1/4 + 1/4 + 0 + 1/4 + 1/4) / 2
    assert figures["mean_two_way_tvd"] == pytest.approx(0.5)
    # workload (every 1-way cell): true (1/2, 1/2, 1/4, 3/4), published (1/2, 1/4, 1/2, 1/4)
    assert figures["workload_max_error"] == pytest.approx(0.5)
    assert figures["workload_mean_error"] == pytest.approx(0.25)
    assert figures["out_of_domain_rows"] == 1 and figures["published_rows"] == 4
    assert figures["distinct_rows"] == 2


def test_without_rows_outside_the_domain_the_figures_are_the_evaluations():
    reference = _tiny()
    published = np.array([[0, 0], [0, 0], [1, 1], [1, 0]])
    figures = _bench_fidelity().published_figures(reference, published, None)
    expected = evaluate_rows(reference, published, label="rows").figures()
    assert {key: figures[key] for key in expected} == expected
    assert figures["out_of_domain_rows"] == 0 and figures["violating_rows"] is None


def test_pairs_worse_counts_pairs_beyond_independent_columns_of_the_same_seed(tmp_path):
    fidelity = _bench_fidelity()
    out = tmp_path / "fidelity.csv"
    base = {"setting": "t", "epsilon": 1.0, "status": "ok"}
    for mechanism, seed, tvds in [("independent", 0, [0.10, 0.10, 0.10]), ("dualquery", 0, [0.13, 0.12, 0.05]),
                                  ("independent", 1, [0.00, 0.00, 0.00]), ("dualquery", 1, [0.03, 0.00, 0.03])]:
        fidelity.append_pairs(out, {**base, "mechanism": mechanism, "seed": seed, "pair_tvd": tvds})
    rows = [{**base, "mechanism": "dualquery", "seed": 0}, {**base, "mechanism": "dualquery", "seed": 1},
            {**base, "mechanism": "dualquery", "seed": 2}, {**base, "mechanism": "mst", "seed": 0}]
    fidelity.count_pairs_worse(rows, out)
    # seed 0: 0.13 > 0.12 counts, 0.12 = 0.10 + 0.02 does not; seed 1: two pairs 0.03 above; seed 2, mst: no record
    assert [row["pairs_worse"] for row in rows] == [1, 2, None, None]


def _smoke(out: Path, peers_python: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fidelity.py"), "--smoke", "--out", str(out), "--peers-python",
         str(peers_python), "--mechanisms", "independent", "dualquery", "mwem", "randomized_response", "mst",
         "aim"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )


def test_smoke_run_writes_a_row_per_run_resumes_and_summarises(tmp_path):
    out = tmp_path / "fidelity.csv"
    completed = _smoke(out, tmp_path / "missing" / "python")
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = {row["mechanism"]: row for row in csv.DictReader(out.open())}
    assert set(rows) == {"independent", "dualquery", "mwem", "randomized_response", "mst", "aim"}
    ours = rows["dualquery"]
    assert ours["status"] == "ok", ours["note"]
    for figure in ("worst_one_way_cell", "mean_one_way_tvd", "mean_two_way_tvd", "max_two_way_tvd",
                   "workload_max_error", "workload_mean_error"):
        assert 0 <= float(ours[figure]) <= 1
    assert int(ours["published_rows"]) == 2_000 and int(ours["violating_rows"]) == 0  # the schema's rules hold
    assert float(ours["charged_epsilon"]) <= 1.0
    assert rows["mwem"]["status"] == "refused"  # 2^47 records: over MWEM's universe limit
    assert rows["randomized_response"]["status"] == "refused"  # cannot keep the schema's rules
    assert rows["mst"]["status"] == rows["aim"]["status"] == "unavailable"
    # resumable: a second run adds nothing
    again = _smoke(out, tmp_path / "missing" / "python")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(list(csv.DictReader(out.open()))) == 6
    # every ok run's pairs are kept beside the CSV, and the summary counts the pairs worse than independent columns
    pairs = [json.loads(line) for line in out.with_name("fidelity_pairs.jsonl").read_text().splitlines()]
    assert sorted(entry["mechanism"] for entry in pairs) == ["dualquery", "independent"]
    assert all(len(entry["pair_tvd"]) == 14 * 15 // 2 for entry in pairs)  # Adult's 15 columns
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["summary"]["adult"]["dualquery"]["1"]["worst_one_way_cell"]["runs"] == 1
    assert 0 <= summary["summary"]["adult"]["dualquery"]["1"]["pairs_worse"]["median"] <= 105
    assert summary["summary"]["adult"]["independent"]["1"]["pairs_worse"]["median"] == 0
    assert summary["runs"][0]["selector_choices"]["adult"]  # what 'auto' plans here
    assert "| dualquery | 1 |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").stat().st_size > 10_000


def test_a_peer_over_the_cap_is_killed_and_not_run_again_on_later_seeds(tmp_path):
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\nsleep 600\n")
    hanging.chmod(0o755)
    out = tmp_path / "fidelity.csv"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fidelity.py"), "--smoke", "--out", str(out), "--peers-python",
         str(hanging), "--mechanisms", "aim", "--seeds", "0", "1", "--cap-minutes", "0.05"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = {int(row["seed"]): row for row in csv.DictReader(out.open())}
    assert rows[0]["status"] == "capped" and 3 <= float(rows[0]["process_seconds"]) < 60
    assert rows[1]["status"] == "skipped" and "seed 0" in rows[1]["note"]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("DQRELEASE_BENCH_PEERS") != "1" or not PEERS_PYTHON.exists(),
                    reason="set DQRELEASE_BENCH_PEERS=1 with .venv-peers installed (bench/fidelity.py --install-peers; "
                           "minutes)")
def test_peers_worker_runs_mst_on_integer_codes(tmp_path):
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, 3, 500), rng.integers(0, 2, 500), rng.integers(0, 4, 500)], axis=1)
    np.savez(tmp_path / "data.npz", codes=codes, names=np.array(["x", "y", "z"]), sizes=np.array([3, 2, 4]))
    spec = {"data": str(tmp_path / "data.npz"), "algorithm": "mst", "rho": 1.0, "seed": 0, "rows": 500,
            "queries": [], "out": str(tmp_path / "synthetic.npz")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    command = [str(PEERS_PYTHON), str(ROOT / "bench" / "peers_worker.py"), str(tmp_path / "spec.json")]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    synthetic = np.load(tmp_path / "synthetic.npz")["codes"]
    assert synthetic.shape == (500, 3)
    inside = (synthetic >= 0).all(axis=1)
    assert (synthetic[inside] < np.array([3, 2, 4])).all()
    timings = json.loads((tmp_path / "synthetic.json").read_text())
    assert timings["rho_asked"] < timings["rho"] and timings["opendp"].startswith("0.16")
