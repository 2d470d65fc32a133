"""What the seeds' records add to the fitted table, and which share of ρ the table fit should get (issue 25).

DualQuery, DQRS, FEM and sepFEM publish, by default, their records calibrated by the table fit
(``dqrelease/mechanisms/fit.py``): MWEM on particles, ``seed_fraction`` of whose particles are the mechanism's
records, spending ``share`` of the target's ρ (default 0.7); the mechanism gets the rest. This benchmark runs, on
the same data, workload, (ε, δ) and seeds:

- ``default``: the registry's keys (share 0.7, half the particles drawn from the records);
- ``no-records``: the same plan and budget split, but no particle drawn from the records (``seed_fraction = 0``):
  what the table is without them, so ``default`` against ``no-records`` is what the records add;
- ``share-S`` for each ``--shares`` S: the fit gets S of ρ and the mechanism the rest, records as in ``default``;
- ``mwem-particles``: the fit alone with all of ρ (the registry's MWEM on particles);
- ``independent``: a DP table of independent columns at the same ε (the reference of "pairs worse than
  independent columns by more than 0.02", counted against the run of the same seed).

Each run is planned and run as the pipeline does (``bench.fidelity.run_ours``: tight accounting, δ = 1e-9, the
published rows drawn as the pipeline draws them and scored by ``published_figures``). One JSON line per (setting,
mechanism, variant, ε, seed) in ``--out``; a rerun skips the lines already there. ``--report`` writes the Markdown
table beside it (medians and ranges over the seeds). ``--smoke``: ``bench/fidelity.py``'s smoke sizes
(tests/bench/test_seed_records_smoke.py).

Usage (one timed benchmark at a time on the shared machine)::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock .venv/bin/python bench/seed_records.py
    .venv/bin/python bench/seed_records.py --report
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fidelity import SETTINGS, WORSE_BY, mechanism_keys, run_ours  # noqa: E402
from bench.scale_common import median_range, seeded_results_main  # noqa: E402
from dq_engine.evaluation.fidelity import fidelity_reference  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MECHANISMS = ("dualquery",)
SHARES = (0.9,)
EPSILONS = (0.1, 1.0)
SEEDS = (0, 1, 2, 3, 4)
REFERENCES = ("mwem-particles", "independent")
FIGURES = ("worst_one_way_cell", "mean_one_way_tvd", "mean_two_way_tvd", "workload_max_error", "seconds")


def _key(row: dict[str, Any]) -> tuple:
    return row["setting"], row["mechanism"], row["variant"], row["epsilon"], row["seed"]


def variants(mechanisms: list[str], shares: list[float]) -> list[tuple[str, str]]:
    """(mechanism, variant) in the order they run: the references first, then each mechanism's variants."""
    runs = [(name, "registry") for name in REFERENCES]
    for name in mechanisms:
        runs += [(name, "default"), (name, "no-records"), *((name, f"share-{share:g}") for share in shares)]
    return runs


def _keys(name: str, variant: str, loaded: Any, *, smoke: bool) -> Any:
    keys = mechanism_keys(name, loaded, smoke=smoke)
    if variant in ("registry", "default"):
        return keys
    if variant == "no-records":
        return keys.model_copy(update={"fit": keys.fit.model_copy(update={"seed_fraction": 0.0})})
    share = float(variant.removeprefix("share-"))
    return keys.model_copy(update={"fit": keys.fit.model_copy(update={"share": share})})


def run(args: argparse.Namespace) -> None:
    run_grid(args, variants(args.mechanisms, args.shares), _keys)


def run_grid(
    args: argparse.Namespace, runs: list[tuple[str, str]], keys_for: Callable[..., Any],
    setup: Callable[[str, str], contextlib.AbstractContextManager] | None = None,
) -> None:
    """Run every (mechanism, variant) of ``runs`` on every setting, seed and ε of ``args``; one JSON line each.

    ``keys_for(name, variant, loaded, smoke=)`` gives the run's mechanism keys; ``setup(name, variant)``, if given,
    is entered around the run (a benchmark that varies an engine rule rather than a key). Lines already in
    ``args.out`` are skipped, so a rerun resumes.
    """
    done = set()
    if args.out.exists():
        done = {_key(json.loads(line)) for line in args.out.read_text().splitlines() if line.strip()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for setting_name in args.settings:
        loaded = SETTINGS[setting_name].load(args.smoke)
        reference = fidelity_reference(loaded.data, workload=loaded.workload)
        for seed in args.seeds:
            for epsilon in args.epsilons:
                for name, variant in runs:
                    if args.variants and variant not in args.variants and name not in args.variants:
                        continue
                    row: dict[str, Any] = {"setting": setting_name, "mechanism": name, "variant": variant,
                                           "epsilon": epsilon, "seed": seed}
                    if _key(row) in done:
                        continue
                    row["load_1min"] = os.getloadavg()[0]
                    keys = keys_for(name, variant, loaded, smoke=args.smoke)
                    with setup(name, variant) if setup is not None else contextlib.nullcontext():
                        row.update(run_ours(name, loaded, reference, epsilon, seed, smoke=args.smoke, keys=keys))
                    parameters = json.loads(row.get("parameters") or "{}")
                    row["fit_share"] = (parameters.get("fit") or {}).get("share")  # grown when T is capped
                    row["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                    with args.out.open("a") as handle:
                        handle.write(json.dumps(row, default=str) + "\n")
                    shown = " ".join(f"{k}={row[k]:.4g}" for k in FIGURES if row.get(k) is not None)
                    print(f"{setting_name} {name:14s} {variant:10s} eps={epsilon:<4g} seed={seed} {row['status']} "
                          f"{shown} load={row['load_1min']:.1f}", flush=True)


def add_grid_arguments(parser: argparse.ArgumentParser, *, settings: list[str], example: str) -> None:
    """The options :func:`run_grid` reads beside ``seeded_results_main``'s: ``--settings`` and ``--variants``."""
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=settings)
    parser.add_argument("--variants", nargs="+", default=[],
                        help=f"run only these variants or reference mechanisms (e.g. {example})")


def _worse(rows: list[dict], run: dict) -> int | None:
    """Pairs of ``run`` whose two-way TVD exceeds the independent-columns run's (same seed) by more than 0.02."""
    base = next((r for r in rows if r["mechanism"] == "independent" and r["status"] == "ok"
                 and (r["setting"], r["epsilon"], r["seed"]) == (run["setting"], run["epsilon"], run["seed"])), None)
    if base is None or not run.get("pair_tvd"):
        return None
    return sum(a > b + WORSE_BY for a, b in zip(run["pair_tvd"], base["pair_tvd"], strict=True))


def report(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        row["pairs_worse"] = _worse(rows, row) if row["status"] == "ok" else None
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["setting"], row["epsilon"], row["mechanism"], row["variant"]), []).append(row)
    loads = [r["load_1min"] for r in rows]
    lines = [f"Results of `bench/seed_records.py` ({len(rows)} runs; medians [min–max] over the seeds; load "
             f"average {min(loads):.1f}–{max(loads):.1f}). Pairs worse: two-way TVD above the independent-columns "
             f"run's of the same seed by more than {WORSE_BY:g}.", "",
             "| setting | ε | mechanism | variant | seeds | worst 1-way cell | mean 1-way TVD | mean 2-way TVD | "
             "workload max | pairs worse | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (setting, epsilon, name, variant), runs in sorted(groups.items()):
        ok = [r for r in runs if r["status"] == "ok"]
        if not ok:
            lines.append(f"| {setting} | {epsilon:g} | {name} | {variant} | 0 | {runs[0]['status']} | | | | | |")
            continue

        def cell(field: str, digits: int = 3, rows: list[dict] = ok) -> str:
            return median_range(rows, field, digits)

        lines.append(f"| {setting} | {epsilon:g} | {name} | {variant} | {len(ok)} | {cell('worst_one_way_cell')} | "
                     f"{cell('mean_one_way_tvd')} | {cell('mean_two_way_tvd')} | {cell('workload_max_error')} | "
                     f"{cell('pairs_worse', 0)} | {cell('seconds', 0)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_grid_arguments(parser, settings=["adult"], example="default share-0.9 independent")
    parser.add_argument("--mechanisms", nargs="+", choices=["dualquery", "dqrs", "fem", "sepfem"],
                        default=list(MECHANISMS))
    parser.add_argument("--shares", nargs="+", type=float, default=list(SHARES))
    return seeded_results_main(parser, argv, epsilons=EPSILONS, seeds=SEEDS, out=RESULTS / "seed_records.jsonl",
                               run=run, report=report)


if __name__ == "__main__":
    raise SystemExit(main())
