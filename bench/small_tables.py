"""Few rows: does the chosen mechanism beat a DP table of independent columns, and does the forecast know it?

Issue 25's small-table case: a release of 1,000 rows. Each setting of ``bench/fidelity.py`` (its data, workload and
rules) is cut to ``--rows`` rows drawn without replacement with a public seed (:data:`SAMPLE_SEED`); then, at each
ε and seed, the registry's ``independent`` (every column's noisy one-way marginal, columns independent),
``mwem-particles`` and the default ``dualquery`` (with its table fit) run as the pipeline runs them (a
ledger-charged grant each), and ``auto`` is planned to record what it chooses. For every run: the published rows'
figures (:func:`bench.fidelity.published_figures`), every pair's two-way TVD against the sample's truth, the number
of pairs on which the run is further from the truth than the independent-columns run of the same seed by more than
0.02, and the plan's forecast (worst one-way cell, workload max).

Peers: ``--mechanisms ... mst aim`` also runs OpenDP's MST and AIM on the same cut table through
:func:`bench.fidelity.run_peer` (the separate interpreter ``--peers-python``, default ``.venv-peers``; each run
killed at ``--cap-minutes``), at the same (ε, δ), and scores their rows exactly as ours (the same pair TVDs,
pairs worse / better than the independent-columns run of the same seed). A peer has no forecast. A peer run that is
``unavailable`` (no interpreter), ``capped`` or ``failed`` is a row with its status and note, in the summary and
the Markdown.

Command: ``.venv/bin/python bench/small_tables.py`` (writes ``bench/results/small_tables.json`` and ``.md``);
``--smoke`` for a seconds-long check.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fidelity import (  # noqa: E402
    CAP_MINUTES,
    PEERS,
    PEERS_PYTHON,
    SETTINGS,
    WORSE_BY,
    Loaded,
    mechanism_keys,
    published_figures,
    run_peer,
)
from bench.scale_common import save_json_and_markdown, study_grant  # noqa: E402
from dq_engine.data.dataset import Dataset  # noqa: E402
from dq_engine.evaluation.fidelity import fidelity_reference  # noqa: E402
from dq_engine.privacy.public import PublicQuantities  # noqa: E402
from dq_engine.privacy.rng import make_rng  # noqa: E402

RESULTS = ROOT / "bench" / "results"
SAMPLE_SEED = 20_251_126
MECHANISMS = ("independent", "mwem-particles", "dualquery")
PUBLISH_SEED_OFFSET = 10_000
DELTA = 1e-9
def cut(loaded: Loaded, rows: int) -> Loaded:
    """``rows`` records of the setting drawn without replacement (public seed); same workload and rules."""
    codes = loaded.data.to_codes()
    if rows >= len(codes):
        return loaded
    chosen = make_rng(SAMPLE_SEED).choice(len(codes), size=rows, replace=False)
    data = Dataset.from_codes(loaded.data.domain, codes[np.sort(chosen)])
    return Loaded(data=data, workload=loaded.workload, constraints=loaded.constraints, config_keys=loaded.config_keys,
                  description=f"{loaded.description}, {rows} rows (seed {SAMPLE_SEED})",
                  independent_pairs=loaded.independent_pairs)


def _inputs(loaded: Loaded, epsilon: float):
    from dqrelease.mechanisms import PlanInputs

    public = PublicQuantities(
        n=loaded.data.n, epsilon=epsilon, delta=DELTA, domain=loaded.data.domain, n_queries=len(loaded.workload),
        n_marginals=loaded.workload.n_marginals,
    )
    return PlanInputs(public=public, mode="tight", deterministic=True, constraints=loaded.constraints,
                      workload=loaded.workload)


def forecast(plan, inputs) -> dict[str, Any]:
    """The plan's forecast and verdict (public quantities only)."""
    from dqrelease.mechanisms.utility import assess_plan, forecast_shape

    verdict = assess_plan(plan, forecast_shape(inputs))
    if verdict is None:
        return {}
    figures = verdict.forecast.figures()
    return {"forecast_worst_one_way_cell": figures["worst_one_way_cell"].value,
            "forecast_workload_max": figures["workload_max_error"].value, "forecast_passes": verdict.passes,
            "forecast_failures": list(verdict.failures)}


def run_one(name: str, loaded: Loaded, reference, epsilon: float, seed: int, *, smoke: bool) -> dict[str, Any]:
    """Plan and run one mechanism; its figures, pair TVDs and forecast."""
    from dqrelease.mechanisms import RunInputs, plan_mechanism, run_mechanism

    inputs = _inputs(loaded, epsilon)
    plan = plan_mechanism(mechanism_keys(name, loaded, smoke=smoke), inputs)
    began = time.perf_counter()
    result = run_mechanism(study_grant(plan), RunInputs(data=loaded.data, workload=loaded.workload,
                                                        rng=make_rng(seed), true_answers=reference.answers))
    seconds = time.perf_counter() - began
    published = result.sample_rows(loaded.data.n, make_rng(PUBLISH_SEED_OFFSET + seed))
    figures = published_figures(reference, published, loaded.constraints)
    return {"mechanism": name, "epsilon": epsilon, "seed": seed, "status": "ok", "seconds": seconds, **figures,
            **known_pairs(loaded, reference, figures["pair_tvd"]), **forecast(plan, inputs)}


def known_pairs(loaded: Loaded, reference, pair_tvd: list[float]) -> dict[str, Any]:
    """Median pair TVD on the generator's independent and dependent pairs, where they are known (bnlearn)."""
    if loaded.independent_pairs is None:
        return {}
    apart = np.array([tuple(p) in loaded.independent_pairs for p in reference.marginals.pairs.tolist()])
    tvd = np.array(pair_tvd)
    return {"median_tvd_independent_pairs": float(np.median(tvd[apart])),
            "median_tvd_dependent_pairs": float(np.median(tvd[~apart])), "dependent_pair_mask": (~apart).tolist()}


def run_peer_one(name: str, setting: str, loaded: Loaded, reference, epsilon: float, seed: int, *, python: Path,
                 cap_minutes: float, smoke: bool) -> dict[str, Any]:
    """One OpenDP peer (``mst``, ``aim``) on the (cut) table through :func:`bench.fidelity.run_peer`.

    The peer's data file and kept rows are named by the setting and the number of rows, so a cut table never
    shares them with the full setting's. A run that is not ``ok`` is returned with its status and note (a
    failure inside this process too); it has no figures.
    """
    began = time.perf_counter()
    try:
        row = run_peer(name, f"{setting}-{loaded.data.n}rows", loaded, reference, epsilon, seed, python=python,
                       cap_seconds=cap_minutes * 60, smoke=smoke)
    except Exception as failure:  # a failing peer is a row too; the benchmark goes on
        traceback.print_exc()
        row = {"status": "failed", "note": f"{type(failure).__name__}: {str(failure)[:300]}",
               "process_seconds": time.perf_counter() - began}
    if row["status"] == "ok":
        row.update(known_pairs(loaded, reference, row["pair_tvd"]))
    return {"mechanism": name, "epsilon": epsilon, "seed": seed, **row}


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians and ranges per (setting, ε, mechanism), with pairs worse than independent columns (same seed)."""
    out = []
    keys = sorted({(r["setting"], r["epsilon"], r["mechanism"]) for r in rows})
    for setting, epsilon, mechanism in keys:
        runs = [r for r in rows if (r["setting"], r["epsilon"], r["mechanism"]) == (setting, epsilon, mechanism)]
        mine = [r for r in runs if r.get("status", "ok") == "ok"]
        entry = {"setting": setting, "epsilon": epsilon, "mechanism": mechanism, "seeds": len(mine),
                 "statuses": dict(Counter(r.get("status", "ok") for r in runs)),
                 "notes": sorted({f"seed {r['seed']}: {r['status']}: {r.get('note', '')}" for r in runs
                                  if r.get("status", "ok") != "ok"})}
        if not mine:  # unavailable, capped or failed on every seed: recorded, with nothing to measure
            out.append(entry)
            continue
        worse, better, better_dependent = [], [], []
        for r in mine:
            base = next((b for b in rows if (b["setting"], b["epsilon"], b["mechanism"], b["seed"])
                         == (setting, epsilon, "independent", r["seed"]) and b.get("status", "ok") == "ok"), None)
            if base is not None:
                pairs = list(zip(r["pair_tvd"], base["pair_tvd"], strict=True))
                worse.append(sum(a > b + WORSE_BY for a, b in pairs))
                better.append(sum(a < b for a, b in pairs))
                if "dependent_pair_mask" in r:
                    better_dependent.append(sum(a < b for (a, b), dep in zip(pairs, r["dependent_pair_mask"],
                                                                              strict=True) if dep))
        entry["pairs"] = len(mine[0]["pair_tvd"])
        if "dependent_pair_mask" in mine[0]:
            entry["dependent_pairs"] = sum(mine[0]["dependent_pair_mask"])
        for field in ("worst_one_way_cell", "mean_one_way_tvd", "mean_two_way_tvd", "workload_max_error",
                      "violating_rows", "out_of_domain_rows", "seconds", "forecast_worst_one_way_cell",
                      "forecast_workload_max", "median_tvd_independent_pairs", "median_tvd_dependent_pairs"):
            values = [r[field] for r in mine if r.get(field) is not None]
            if values:
                entry[field] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        for field, counts in (("pairs_worse_than_independent", worse), ("pairs_better_than_independent", better),
                              ("dependent_pairs_better_than_independent", better_dependent)):
            if counts:
                entry[field] = {"median": statistics.median(counts), "min": min(counts), "max": max(counts)}
        entry["forecast_passes"] = mine[0].get("forecast_passes")
        out.append(entry)
    return out


def markdown(summary: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The summary as a Markdown table (medians, ranges in brackets)."""
    def cell(entry, field, digits=3):
        value = entry.get(field)
        if value is None:
            return "–"
        return f"{value['median']:.{digits}g} [{value['min']:.{digits}g}–{value['max']:.{digits}g}]"

    def runs(entry):
        return ", ".join(f"{status} {count}" for status, count in entry["statuses"].items())

    lines = [f"Small tables ({meta['rows']} rows; {meta['seeds']} seeds; load {meta['load_start']:.1f} → "
             f"{meta['load_end']:.1f}; commit {meta['commit']})", "",
             "| setting | ε | mechanism | runs | worst 1-way | mean 2-way TVD | workload max | pairs worse than indep. "
             "(of all) | forecast 1-way / workload | forecast passes | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        passes = e.get("forecast_passes")
        lines.append(
            f"| {e['setting']} | {e['epsilon']:g} | {e['mechanism']} | {runs(e)} | {cell(e, 'worst_one_way_cell')} | "
            f"{cell(e, 'mean_two_way_tvd')} | {cell(e, 'workload_max_error')} | "
            f"{cell(e, 'pairs_worse_than_independent', 4)} ({e.get('pairs', '–')}) | "
            f"{cell(e, 'forecast_worst_one_way_cell')} / {cell(e, 'forecast_workload_max')} | "
            f"{'–' if passes is None else passes} | {cell(e, 'seconds')} |")
    lines += ["", "Pairs better than independent columns (strictly, same seed), and the generator's pairs where known:",
              "", "| setting | ε | mechanism | better than indep. (of all) | of the dependent pairs | "
              "median TVD, independent pairs | median TVD, dependent pairs |", "|---|---|---|---|---|---|---|"]
    for e in summary:
        if e["mechanism"] == "independent":
            continue
        lines.append(
            f"| {e['setting']} | {e['epsilon']:g} | {e['mechanism']} | "
            f"{cell(e, 'pairs_better_than_independent', 4)} ({e.get('pairs', '–')}) | "
            f"{cell(e, 'dependent_pairs_better_than_independent', 4)} ({e.get('dependent_pairs', '–')}) | "
            f"{cell(e, 'median_tvd_independent_pairs')} | {cell(e, 'median_tvd_dependent_pairs')} |")
    independent = {(e["setting"], e["epsilon"]): e for e in summary if e["mechanism"] == "independent"}
    for (setting, epsilon), e in independent.items():
        if "median_tvd_independent_pairs" in e:
            lines.append(f"| {setting} | {epsilon:g} | independent (reference) | – | – | "
                         f"{cell(e, 'median_tvd_independent_pairs')} | {cell(e, 'median_tvd_dependent_pairs')} |")
    notes = [note for e in summary for note in (f"{e['setting']} ε {e['epsilon']:g} {e['mechanism']}, {n}"
                                                 for n in e["notes"])]
    if notes:
        lines += ["", "Runs that did not finish:", "", *(f"- {note}" for note in notes)]
    lines += ["", "auto's choice per setting and ε: " + "; ".join(f"{k}: {v}" for k, v in meta["auto"].items())]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["adult", "kdd99"], choices=sorted(SETTINGS))
    parser.add_argument("--rows", type=int, default=1_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS),
                        help=f"registry mechanisms, and the peers {', '.join(PEERS)} (OpenDP, --peers-python)")
    parser.add_argument("--cap-minutes", type=float, default=CAP_MINUTES, help="wall-clock cap of one peer run")
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON, help="the peers venv's interpreter")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    parser.add_argument("--out", type=Path, default=RESULTS / "small_tables.json")
    args = parser.parse_args()
    from dqrelease.mechanisms import plan_mechanism

    load_start = os.getloadavg()[0]
    commit = os.popen(f"git -C {ROOT} rev-parse --short HEAD").read().strip()
    command = list(sys.argv)
    if "--peers-python" in command[:-1]:  # a path of this machine: recorded as the venv it names
        command[command.index("--peers-python") + 1] = "PEERS_VENV/bin/python"
    meta = {"rows": args.rows, "seeds": args.seeds, "epsilons": args.epsilons, "settings": args.settings,
            "sample_seed": SAMPLE_SEED, "delta": DELTA, "worse_by": WORSE_BY, "commit": commit,
            "load_start": load_start, "smoke": args.smoke,
            "cap_minutes_per_peer_run": args.cap_minutes if set(args.mechanisms) & set(PEERS) else None,
            "command": " ".join(command), "started": _now()}
    rows, auto = [], {}
    for setting in args.settings:
        loaded = cut(SETTINGS[setting].load(args.smoke), args.rows)
        reference = fidelity_reference(loaded.data, workload=loaded.workload)
        for epsilon in args.epsilons:
            chosen = plan_mechanism(mechanism_keys("auto", loaded, smoke=False), _inputs(loaded, epsilon))
            auto[f"{setting} eps {epsilon:g}"] = chosen.mechanism
            for seed in range(args.seeds):
                for name in args.mechanisms:
                    if name in PEERS:
                        row = run_peer_one(name, setting, loaded, reference, epsilon, seed, python=args.peers_python,
                                           cap_minutes=args.cap_minutes, smoke=args.smoke)
                    else:
                        row = run_one(name, loaded, reference, epsilon, seed, smoke=args.smoke)
                    rows.append({"setting": setting, **row})
                    shown = (f"worst 1-way {row['worst_one_way_cell']:.3f}, workload max "
                             f"{row['workload_max_error']:.3f}, {row['seconds']:.1f} s" if row["status"] == "ok"
                             else f"{row['status']}: {row.get('note', '')}")
                    print(f"{setting} eps {epsilon:g} seed {seed} {name}: {shown}", file=sys.stderr, flush=True)
                    write(args.out, rows, {**meta, "auto": auto, "complete": False})
    print(write(args.out, rows, {**meta, "auto": auto, "complete": True}))
    return 0


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def write(out: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Write the runs so far, their summary and its Markdown (after every run: a stopped run keeps what finished)."""
    meta = {**meta, "load_end": os.getloadavg()[0], "written": _now()}
    summary = summarise(rows)
    text = markdown(summary, meta)
    save_json_and_markdown(out, {"meta": meta, "summary": summary, "runs": rows}, text)
    return text


if __name__ == "__main__":
    raise SystemExit(main())
