"""Side by side: DualQuery against smartnoise-synth's MST and AIM on ADULT at equal (ε, δ), in one run.

Data and workload are those of ``bench/mechanisms.py`` (its ``load_adult`` and ``WORKLOAD_SEED``): ADULT as
preprocessed by private-pgm (48,842 rows, 14 categorical attributes), 64 seeded random 3-way marginals, δ = 1/n²,
ε ∈ {0.1, 1}. DualQuery uses that benchmark's rule (``rule_dualquery``: η = 0.5, s = 200, T calibrated in tight
mode, oracle limit ≈ 40 s / T), run here in the main venv.

smartnoise-synth 1.0.8 is not a dependency of dqrelease: it lives in its own venv (``.venv-smartnoise``, made by
``--install`` or by hand: ``python -m venv .venv-smartnoise && .venv-smartnoise/bin/pip install
smartnoise-synth==1.0.8``; git-ignored) and runs in a subprocess (``bench/smartnoise_worker.py``). Every column is
declared categorical, so smartnoise spends nothing on preprocessing. MST picks its own 2-way marginals (it takes no
workload); AIM is given the same 64 3-way marginals as its workload. Both sample n synthetic rows, which are
answered here with ``answer_workload``, exactly like DualQuery's records.

Errors: max and mean absolute error over every query of the 64 marginals (the answers are fractions of n).
Times: DualQuery's run (``dualquery`` call) against smartnoise's ``fit`` + ``sample`` measured inside the worker
(the worker's interpreter start and torch import are reported apart, as ``subprocess_seconds``). Reported as
ratios smartnoise / DualQuery. A smartnoise run that exceeds ``--timeout`` (default 900 s) is killed and
reported as ``timeout`` ("did not finish").

The wall-time ratio is quoted in docs, so run it under the shared benchmark lock::

    flock "${TMPDIR:-/tmp}"/dqrelease-bench.lock \
        .venv/bin/python bench/smartnoise_compare.py --out bench/results/smartnoise.json

``--smoke``: a 6-attribute slice of ADULT, 8 marginals, ε = 1, AIM capped at 12 rounds (tests/bench/
test_scale_smoke.py). Without the smartnoise venv (``--smartnoise-python`` not found) the smartnoise rows say
``unavailable``; with it MST and AIM still take minutes even on the slice (5,000 mirror-descent iterations, one
OpenDP call per noisy cell), so the always-run smoke test points ``--smartnoise-python`` at nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))

from mechanisms import WORKLOAD_SEED, Public, load_adult, rule_dualquery
from scale_common import benchmark_grant, machine, save_plot

from dq_engine import Dataset, answer_workload, dualquery, make_rng, random_marginals
from dq_engine.data.answers import error_summary
from dq_engine.data.marginal_tables import MarginalIndex

ROOT = Path(__file__).resolve().parents[1]
SMARTNOISE_PYTHON = ROOT / ".venv-smartnoise" / "bin" / "python"
SMARTNOISE_VERSION = "1.0.8"
EPSILONS = (0.1, 1.0)
SMOKE_COLUMNS = ("workclass", "education-num", "marital-status", "relationship", "race", "sex")
DUALQUERY_SEED = 7


def run_dualquery(data: Dataset, workload, truth: np.ndarray, epsilon: float, delta: float, smoke: bool) -> dict:
    """DualQuery with ``bench/mechanisms.py``'s rule; errors and the time of the ``dualquery`` call."""
    public = Public(n=data.n, epsilon=epsilon, delta=delta, domain=data.domain, n_queries=len(workload),
                    n_marginals=workload.n_marginals, smoke=smoke)
    config = rule_dualquery(public)
    began = time.perf_counter()
    result = dualquery(data, workload, config, grant=benchmark_grant(), rng=make_rng(DUALQUERY_SEED))
    seconds = time.perf_counter() - began
    answers = MarginalIndex(workload).answers(result.records, result.weights)
    return {"mechanism": "dualquery", "status": "ok", "seconds": seconds, "subprocess_seconds": None,
            **error_summary(truth, answers), "tight_epsilon": result.costs["tight"].epsilon,
            "parameters": {"eta": config.eta, "samples": config.samples, "rounds": config.rounds,
                           "oracle_time_limit": config.oracle.time_limit}}


def run_smartnoise(name: str, *, python: Path, codes_csv: Path, data: Dataset, workload, truth: np.ndarray,
                   epsilon: float, delta: float, timeout: float, work: Path, smoke: bool) -> dict:
    """One smartnoise synthesizer in the smartnoise venv; its synthetic rows answered on the workload."""
    row = {"mechanism": name, "seconds": None, "subprocess_seconds": None, "max_error": None, "mean_error": None,
           "rmse": None, "tight_epsilon": None, "parameters": {}}
    if not python.exists():
        return {**row, "status": "unavailable", "note": f"no {python}; run with --install"}
    names = [a.name for a in data.domain.attributes]
    marginals = [[names[i] for i in m if i >= 0] for m in workload.marginals]
    out = work / f"{name}_{epsilon}.csv"
    spec = {"codes": str(codes_csv), "synthesizer": name, "epsilon": epsilon, "delta": delta, "seed": 0,
            "marginals": marginals, "out": str(out), "rounds": 2 * len(names) if smoke and name == "aim" else None}
    spec_path = work / f"{name}_{epsilon}.spec.json"
    spec_path.write_text(json.dumps(spec))
    command = [str(python), str(Path(__file__).parent / "smartnoise_worker.py"), str(spec_path)]
    began = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {**row, "status": "timeout", "subprocess_seconds": time.perf_counter() - began,
                "note": f"did not finish within {timeout:.0f} s"}
    wall = time.perf_counter() - began
    if completed.returncode != 0:
        return {**row, "status": "failed", "subprocess_seconds": wall, "note": completed.stderr[-1500:]}
    timing = json.loads(out.with_suffix(".json").read_text())
    synthetic = pd.read_csv(out)[names].to_numpy()
    answers = answer_workload(Dataset.from_codes(data.domain, synthetic), workload)
    return {**row, "status": "ok", "seconds": timing["fit_seconds"] + timing["sample_seconds"],
            "subprocess_seconds": wall, **error_summary(truth, answers), "tight_epsilon": epsilon,
            "parameters": {"fit_seconds": timing["fit_seconds"], "sample_seconds": timing["sample_seconds"],
                           "import_seconds": timing["import_seconds"], "smartnoise_rounds": spec["rounds"]}}


def install() -> None:
    """Create ``.venv-smartnoise`` with smartnoise-synth (the main venv is not touched)."""
    if not SMARTNOISE_PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(SMARTNOISE_PYTHON.parents[1])], check=True)
    subprocess.run([str(SMARTNOISE_PYTHON), "-m", "pip", "install", "-q", f"smartnoise-synth=={SMARTNOISE_VERSION}"],
                   check=True)


def plot(rows: list[dict], path: Path) -> None:
    mechanisms = ("dualquery", "mst", "aim")

    def draw(figure):
        left, right = figure.subplots(1, 2)
        width = 0.25
        for j, mechanism in enumerate(mechanisms):
            mine = {r["epsilon"]: r for r in rows if r["mechanism"] == mechanism}
            xs = np.arange(len(EPSILONS)) + (j - 1) * width
            errors = [mine[e]["max_error"] if e in mine and mine[e]["max_error"] is not None else 0 for e in EPSILONS]
            seconds = [mine[e]["seconds"] or mine[e]["subprocess_seconds"] or 0 if e in mine else 0 for e in EPSILONS]
            left.bar(xs, errors, width, label=mechanism)
            bars = right.bar(xs, seconds, width, label=mechanism)
            for bar, e in zip(bars, EPSILONS, strict=True):
                if e in mine and mine[e]["status"] == "timeout":
                    right.text(bar.get_x() + bar.get_width() / 2, bar.get_height() ** 0.5, "did not finish",
                               fontsize=6, rotation=90, ha="center", va="center")
        for axis, title in ((left, "max error (64 random 3-way marginals)"), (right, "seconds (fit + sample)")):
            axis.set_xticks(np.arange(len(EPSILONS)), [f"ε = {e}" for e in EPSILONS])
            axis.set_title(title, fontsize=9)
        right.set_yscale("log")
        left.legend(fontsize=7)

    save_plot(path, draw, size=(9, 3.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/smartnoise.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds), for the smoke test")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per smartnoise run")
    parser.add_argument("--mechanisms", default="dualquery,mst,aim")
    parser.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS))
    parser.add_argument("--install", action="store_true", help="create .venv-smartnoise first")
    parser.add_argument("--smartnoise-python", type=Path, default=SMARTNOISE_PYTHON,
                        help="interpreter of the venv that has smartnoise-synth")
    args = parser.parse_args()
    if args.install:
        install()
    columns = SMOKE_COLUMNS if args.smoke else None
    data = load_adult(columns)
    workload = random_marginals(data.domain, 3, 8 if args.smoke else 64, make_rng(WORKLOAD_SEED))
    truth = answer_workload(data, workload)
    delta = 1.0 / data.n**2
    epsilons = [1.0] if args.smoke else [float(e) for e in args.epsilons.split(",")]
    report = {"command": " ".join([".venv/bin/python", *sys.argv]), "machine": machine(), "smoke": args.smoke,
              "smartnoise_synth": SMARTNOISE_VERSION if args.smartnoise_python.exists() else None, "n": data.n,
              "queries": len(workload), "marginals": workload.n_marginals, "delta": delta, "rows": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="smartnoise-bench-") as scratch:
        work = Path(scratch)
        codes_csv = work / "adult_codes.csv"
        pd.DataFrame(data.to_codes(), columns=[a.name for a in data.domain.attributes]).to_csv(codes_csv, index=False)
        for epsilon in epsilons:
            for mechanism in args.mechanisms.split(","):
                load = os.getloadavg()[0]
                if mechanism == "dualquery":
                    row = run_dualquery(data, workload, truth, epsilon, delta, args.smoke)
                else:
                    row = run_smartnoise(mechanism, python=args.smartnoise_python, codes_csv=codes_csv, data=data,
                                         workload=workload, truth=truth, epsilon=epsilon, delta=delta,
                                         timeout=args.timeout, work=work, smoke=args.smoke)
                row.update(epsilon=epsilon, delta=delta, load_1min=load)
                report["rows"].append(row)
                print(f"ε={epsilon} {mechanism:>9}: {row['status']} max {row['max_error']} mean {row['mean_error']} "
                      f"seconds {row['seconds']} (subprocess {row['subprocess_seconds']})", flush=True)
                args.out.write_text(json.dumps(report, indent=1, default=float))
    ratios = []
    for epsilon in epsilons:
        mine = {r["mechanism"]: r for r in report["rows"] if r["epsilon"] == epsilon}
        reference = mine.get("dualquery")
        for name in ("mst", "aim"):
            other = mine.get(name)
            if reference is None or other is None:
                continue
            finished = other["status"] == "ok"
            ratios.append({
                "epsilon": epsilon, "mechanism": name, "status": other["status"],
                "max_error_ratio": other["max_error"] / reference["max_error"] if finished else None,
                "mean_error_ratio": other["mean_error"] / reference["mean_error"] if finished else None,
                "time_ratio": other["seconds"] / reference["seconds"] if finished else None,
                "time_ratio_at_least": (other["subprocess_seconds"] / reference["seconds"]
                                        if other["status"] == "timeout" else None),
            })
    report["ratios"] = ratios
    report["machine"]["load_average_end"] = os.getloadavg()
    args.out.write_text(json.dumps(report, indent=1, default=float))
    with args.out.with_suffix(".csv").open("w", newline="") as handle:
        fields = ["epsilon", "delta", "mechanism", "status", "max_error", "mean_error", "rmse", "seconds",
                  "subprocess_seconds", "tight_epsilon", "load_1min", "parameters", "note"]
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in report["rows"]:
            writer.writerow({**row, "parameters": json.dumps(row["parameters"])})
    plot(report["rows"], args.out.with_suffix(".png"))
    for ratio in ratios:
        print(ratio, flush=True)


if __name__ == "__main__":
    main()
