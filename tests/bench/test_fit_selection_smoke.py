"""bench/fit_selection.py end to end at smoke sizes (not a timing test): one line per run, its rule in force.

Needs the shipped Adult only (examples/adult/data).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_run_writes_one_line_per_run_with_the_rule_it_ran(tmp_path):
    out = tmp_path / "fit_selection.jsonl"
    command = [sys.executable, str(ROOT / "bench" / "fit_selection.py"), "--smoke", "--settings", "adult",
               "--mechanisms", "mwem-particles", "--epsilons", "1", "--seeds", "0", "--out", str(out), "--variants",
               "independent", "select-query", "select-marginal", "select-alternate", "marginal-closure",
               "alternate-closure", "estimator-mirror", "mix-noise", "mix-fixed"]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["mechanism"], row["variant"]) for row in rows] == [
        ("independent", "registry"), ("mwem-particles", "select-query"), ("mwem-particles", "select-marginal"),
        ("mwem-particles", "select-alternate"), ("mwem-particles", "marginal-closure"),
        ("mwem-particles", "alternate-closure"), ("mwem-particles", "estimator-mirror"),
        ("mwem-particles", "mix-noise"), ("mwem-particles", "mix-fixed")]
    assert all(row["status"] == "ok" for row in rows)
    # the same plan (budget and rounds) under every rule: only what a round selects, and among what, the
    # estimator after the rounds and the prior's uniform share differ
    plans = [json.loads(row["parameters"]) for row in rows[1:]]
    rules = [(plan.pop("select"), plan.pop("candidates"), plan.pop("final_estimator"), plan.pop("support_mix_rule"))
             for plan in plans]
    assert rules == [
        ("query", "workload", "sweeps", "noise"), ("marginal", "workload", "sweeps", "noise"),
        ("alternate", "workload", "sweeps", "noise"), ("marginal", "closure", "sweeps", "noise"),
        ("alternate", "closure", "sweeps", "noise"), ("alternate", "closure", "mirror", "noise"),
        ("alternate", "closure", "sweeps", "noise"), ("alternate", "closure", "sweeps", "fixed")]
    assert all(plan == plans[0] for plan in plans)
    assert rows[1]["workload_max_error"] != rows[2]["workload_max_error"]
    assert rows[5]["workload_max_error"] != rows[6]["workload_max_error"]
    assert rows[7]["mean_two_way_tvd"] == rows[5]["mean_two_way_tvd"]  # mix-noise is the registry's rule
    assert rows[8]["mean_two_way_tvd"] != rows[7]["mean_two_way_tvd"]
    assert out.with_suffix(".md").read_text().count("| adult | 1 |") == 9


def test_a_rounds_variant_sets_the_rules_constants_for_its_run_only():
    # the smoke sizes fix the rounds (3), which keeps every round selecting, so the rounds' variants are checked here
    sys.path.insert(0, str(ROOT))
    from bench.fit_selection import _rule
    from dq_engine.mechanisms import defaults

    before = (defaults.MWEM_PARTICLES_MEASURE_ALL_CAP, defaults.MWEM_PARTICLES_ROUNDS_CAP,
              defaults.MWEM_PARTICLES_SELECT_SHARE)
    with _rule("dualquery", "measure-all-off"):
        assert defaults.MWEM_PARTICLES_MEASURE_ALL_CAP == 0
    with _rule("dualquery", "share-0.1-cap-80"):
        assert (defaults.MWEM_PARTICLES_MEASURE_ALL_CAP, defaults.MWEM_PARTICLES_ROUNDS_CAP,
                defaults.MWEM_PARTICLES_SELECT_SHARE) == (0, 80, 0.1)
    assert before == (defaults.MWEM_PARTICLES_MEASURE_ALL_CAP, defaults.MWEM_PARTICLES_ROUNDS_CAP,
            defaults.MWEM_PARTICLES_SELECT_SHARE)
