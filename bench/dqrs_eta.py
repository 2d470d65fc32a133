"""Where DQRS differs from DualQuery: small learning rates, where its rejection sampling recycles samples.

DQRS (Vietri, Tian, Bun, Steinke & Wu 2020, "New Oracle-Efficient Algorithms for Private Synthetic Data Release",
Algorithm 4) keeps each of the round's samples with probability ``exp(-η - γ_t + η A(x_t, q))`` and draws only
``⌈(2γ_t + 4η) s⌉`` fresh ones from the next distribution, so a round costs less privacy than DualQuery's
(Gaboardi, Gallego Arias, Hsu, Roth & Wu 2014) and the same ε buys more rounds. That only happens when
``2γ_t + 4η < 1``, i.e. for η < 1/4 (docs/engine.md, "DQRS"); at the default η = 1 every DQRS round is a DualQuery
round and the two publish the same table. This benchmark runs both at the same small η, and DualQuery at its
default η = 1, on the same data, workload, (ε, δ) and seeds, so the table shows (a) how many more rounds DQRS's plan
affords at that η, (b) whether those rounds make its records or its fitted table better than DualQuery's at the
same η, and (c) whether either beats DualQuery at η = 1.

What runs: ``bench/fidelity.py``'s settings (default ``adult``: the README's Adult job, its rules and workload),
each mechanism planned and run as the pipeline does (``bench.fidelity.run_ours``: tight accounting, δ = 1e-9,
seeded oracles, the published rows drawn as the pipeline draws them and scored by ``published_figures``), with
``eta`` replaced and the table fit on or off (``--fit off on``; off: the papers' algorithms, their own records
published). One JSON line per (setting, fit, mechanism, η, ε, seed) in ``--out``; a rerun skips the lines already
there. ``--report`` writes the Markdown table beside it (medians and ranges over the seeds). ``--smoke``:
``bench/fidelity.py``'s smoke sizes (tests/bench/test_dqrs_eta_smoke.py).

Usage (one timed benchmark at a time on the shared machine)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/dqrs_eta.py --fit off on
    .venv/bin/python bench/dqrs_eta.py --report
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fidelity import SETTINGS, mechanism_keys, run_ours  # noqa: E402
from bench.scale_common import median_range, seeded_results_main  # noqa: E402
from dq_engine.evaluation.fidelity import fidelity_reference  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ETAS = (0.05, 0.1, 0.2)
DEFAULT_ETA = 1.0
EPSILONS = (0.1, 1.0)
SEEDS = (0, 1, 2, 3, 4)
FIGURES = ("worst_one_way_cell", "mean_two_way_tvd", "workload_max_error", "seconds")


def _key(row: dict[str, Any]) -> tuple:
    return row["setting"], row["fit"], row["mechanism"], row["eta"], row["epsilon"], row["seed"]


def _runs(etas: list[float]) -> list[tuple[str, float]]:
    """(mechanism, η): both at every small η, and DualQuery at its default (the reference)."""
    return [*((name, eta) for eta in etas for name in ("dualquery", "dqrs")), ("dualquery", DEFAULT_ETA)]


def _keys(name: str, loaded: Any, *, eta: float, fit: bool, smoke: bool = False) -> Any:
    keys = mechanism_keys(name, loaded, smoke=smoke)
    return keys.model_copy(update={"eta": eta, "fit": keys.fit.model_copy(update={"enabled": fit})})


def run(args: argparse.Namespace) -> None:
    done = set()
    if args.out.exists():
        done = {_key(json.loads(line)) for line in args.out.read_text().splitlines() if line.strip()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for setting_name in args.settings:
        loaded = SETTINGS[setting_name].load(args.smoke)
        reference = fidelity_reference(loaded.data, workload=loaded.workload)
        for fit in args.fit:
            for seed in args.seeds:
                for epsilon in args.epsilons:
                    for name, eta in _runs(args.etas):
                        row: dict[str, Any] = {"setting": setting_name, "fit": fit, "mechanism": name, "eta": eta,
                                               "epsilon": epsilon, "seed": seed}
                        if _key(row) in done:
                            continue
                        row["load_1min"] = os.getloadavg()[0]
                        keys = _keys(name, loaded, eta=eta, fit=fit == "on", smoke=args.smoke)
                        row.update(run_ours(name, loaded, reference, epsilon, seed, smoke=args.smoke, keys=keys))
                        parameters = json.loads(row.get("parameters") or "{}")
                        row["rounds"], row["samples"] = parameters.get("rounds"), parameters.get("samples")
                        row["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                        with args.out.open("a") as handle:
                            handle.write(json.dumps(row, default=str) + "\n")
                        shown = " ".join(f"{k}={row[k]:.4g}" for k in FIGURES if row.get(k) is not None)
                        print(f"{setting_name} fit={fit} {name:9s} eta={eta:<5g} eps={epsilon:<4g} seed={seed} "
                              f"{row['status']} T={row['rounds']} s={row['samples']} {shown} "
                              f"load={row['load_1min']:.1f}", flush=True)


def report(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["setting"], row["fit"], row["epsilon"], row["mechanism"], row["eta"]), []).append(row)
    lines = [f"Results of `bench/dqrs_eta.py` ({len(rows)} runs; medians [min–max] over the seeds; "
             f"load average {min(r['load_1min'] for r in rows):.1f}–{max(r['load_1min'] for r in rows):.1f}).", "",
             "| setting | fit | ε | mechanism | η | seeds | T (rounds) | s | worst 1-way cell | mean 2-way TVD | "
             "workload max | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (setting, fit, epsilon, name, eta), runs in sorted(groups.items()):
        ok = [r for r in runs if r["status"] == "ok"]
        if not ok:
            lines.append(f"| {setting} | {fit} | {epsilon:g} | {name} | {eta:g} | 0 | {runs[0]['status']} "
                         "| | | | | |")
            continue

        def cell(field: str, digits: int = 3, rows: list[dict] = ok) -> str:
            return median_range(rows, field, digits)

        lines.append(f"| {setting} | {fit} | {epsilon:g} | {name} | {eta:g} | {len(ok)} | "
                     f"{cell('rounds', 0)} | {cell('samples', 0)} | {cell('worst_one_way_cell')} | "
                     f"{cell('mean_two_way_tvd')} | {cell('workload_max_error')} | {cell('seconds', 0)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["adult"])
    parser.add_argument("--fit", nargs="+", choices=["off", "on"], default=["off", "on"])
    parser.add_argument("--etas", nargs="+", type=float, default=list(ETAS))
    return seeded_results_main(parser, argv, epsilons=EPSILONS, seeds=SEEDS, out=RESULTS / "dqrs_eta.jsonl",
                               run=run, report=report)


if __name__ == "__main__":
    raise SystemExit(main())
