"""The internal error report: how far the synthetic table is from the truth, and from the baselines.

The report is computed on the true private data, so it is **internal**: it says so on its first line, it is
written next to (not inside) the published table's files, and it must not be released. It contains:
max / mean / RMSE error over the workload's positive queries for the synthetic data and for the zeros,
uniform, independent-Laplace and independent-Gaussian baselines at the same budget; error per marginal;
error versus round; solver status counts and solve times; privacy spent in paper and tight accounting.

The release's answers are the workload answers of the synthetic records, except for randomized response:
its published rows are the randomized records, whose raw answers are biased towards the uniform
distribution, so its answers are seed 003's unbiased estimator applied to them (the report says so; the
raw answers are the "published rows" line).

Formats: JSON, Markdown, and a self-contained HTML page with matplotlib plots embedded as base64 PNGs.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dq_engine import ComposedCost, Dataset, SynthesisResult, Workload, answer_workload, error_summary
from dq_engine.answers import answer_records, per_marginal_max_error
from dq_engine.baselines import (
    independent_gaussian_answers,
    independent_laplace_answers,
    uniform_answers,
    zeros_answers,
)
from dq_engine.public import largest_rho
from dq_engine.randomized_response import estimate_answers

__all__ = [
    "INTERNAL_BANNER",
    "build_error_report",
    "gaussian_baseline_rho",
    "release_answers",
    "write_error_report",
]

INTERNAL_BANNER = (
    "INTERNAL - NOT FOR RELEASE: this report is computed on the true private data and is not differentially private."
)


def synthetic_answers(result: SynthesisResult, workload: Workload) -> np.ndarray:
    """Workload answers of the synthetic distribution (records, weighted if the mechanism gives weights)."""
    bits = result.domain.encode_records(result.records)
    return answer_records(workload, bits, result.weights)


def release_answers(result: SynthesisResult, workload: Workload) -> tuple[np.ndarray, str]:
    """The workload answers the release gives, and how they are computed (one line for the report)."""
    if result.mechanism == "randomized_response":
        return estimate_answers(result, workload), (
            "Answers: seed 003's unbiased estimator (eq. 12) applied to the randomized records; the raw answers "
            "of those records (the published rows) are biased towards the uniform distribution."
        )
    return synthetic_answers(result, workload), "Answers: the workload answers of the synthetic records."


def gaussian_baseline_rho(tight: ComposedCost, delta: float) -> float:
    """ρ of the Gaussian baseline at the run's budget.

    The run's own zCDP ρ when its tight cost is that ρ's (ε, δ) conversion; for a pure-ε cost (δ = 0, e.g.
    randomized response) the largest ρ whose optimal conversion fits (ε, ``delta``), ``delta`` being the
    mechanism's target δ (a Gaussian mechanism has no pure-ε guarantee).
    """
    if tight.delta > 0 and tight.rho:
        return float(tight.rho)
    return largest_rho(tight.epsilon, delta)


def build_error_report(
    *,
    data: Dataset,
    workload: Workload,
    result: SynthesisResult,
    costs: dict[str, ComposedCost],
    published_codes: np.ndarray | None,
    rng: np.random.Generator,
    release_name: str,
    run_id: str,
    delta: float,
) -> dict[str, Any]:
    """Compute the report's numbers (internal).

    Args:
        data: The private dataset.
        workload: The workload.
        result: The mechanism's output.
        costs: The privacy cost charged for the mechanism, per accounting mode (the plan's).
        published_codes: The expanded rows actually published (value codes), to measure the error of the
            published table as well as of the synthetic distribution.
        rng: Generator for the noisy baselines (their noise never leaves the report).
        release_name: Public name of the release.
        run_id: Run id.
        delta: The mechanism's target δ (sizes the Gaussian baseline when the cost is pure ε).
    """
    truth = answer_workload(data, workload)
    estimates, answers_note = release_answers(result, workload)
    tight = costs["tight"]
    rows: dict[str, dict[str, float]] = {"synthetic": error_summary(truth, estimates)}
    if published_codes is not None:
        published = answer_workload(Dataset.from_codes(workload.domain, published_codes), workload)
        rows["published rows"] = error_summary(truth, published)
    rows["zeros"] = error_summary(truth, zeros_answers(workload))
    rows["uniform"] = error_summary(truth, uniform_answers(workload))
    laplace_epsilon = tight.epsilon
    laplace, _ = independent_laplace_answers(data, workload, truth, epsilon=laplace_epsilon, rng=rng)
    rows[f"independent Laplace (eps={laplace_epsilon:.3g})"] = error_summary(truth, laplace)
    rho = gaussian_baseline_rho(tight, delta)
    gaussian, _ = independent_gaussian_answers(data, workload, truth, rho=rho, rng=rng)
    rows[f"independent Gaussian (rho={rho:.3g}, zCDP)"] = error_summary(truth, gaussian)

    per_marginal = per_marginal_max_error(workload, truth, estimates)
    names = workload.marginal_names()
    order = np.argsort(-per_marginal)
    diagnostics = result.diagnostics
    statuses = Counter(d.status for d in diagnostics)
    sources = Counter(d.source for d in diagnostics)
    solve_times = np.array([d.solver_seconds + d.local_seconds for d in diagnostics]) if diagnostics else np.zeros(0)
    return {
        "banner": INTERNAL_BANNER,
        "release": release_name,
        "run_id": run_id,
        "mechanism": result.mechanism,
        "parameters": result.parameters,
        "n": result.n,
        "workload": {"description": workload.description, "queries": len(workload), "marginals": workload.n_marginals},
        "answers": answers_note,
        "errors": rows,
        "per_marginal_max_error": [
            {"marginal": names[i], "max_error": float(per_marginal[i])} for i in order
        ],
        "error_by_round": [
            {"round": d.round, "max_error": d.internal_max_error, "mean_error": d.internal_mean_error}
            for d in diagnostics
            if d.internal_max_error is not None
        ],
        "solver": {
            "status_counts": dict(statuses),
            "source_counts": dict(sources),
            "median_seconds": float(np.median(solve_times)) if len(solve_times) else None,
            "p95_seconds": float(np.percentile(solve_times, 95)) if len(solve_times) else None,
            "max_seconds": float(solve_times.max()) if len(solve_times) else None,
            "per_round_seconds": [float(x) for x in solve_times],
        },
        "privacy": {mode: cost.as_dict() for mode, cost in costs.items()},
    }


# ---------------------------------------------------------------------- rendering
def _png(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def _plots(report: dict[str, Any]) -> dict[str, str]:
    plots = {}
    errors = report["errors"]
    figure = Figure(figsize=(7, 3.2))
    axis = figure.subplots()
    labels = list(errors)
    axis.barh(labels, [errors[k]["max_error"] for k in labels], color="#4c72b0", label="max")
    axis.barh(labels, [errors[k]["mean_error"] for k in labels], color="#dd8452", label="mean")
    axis.set_xlabel("absolute error (fraction of records)")
    axis.invert_yaxis()
    axis.legend()
    plots["errors"] = _png(figure)
    if report["error_by_round"]:
        figure = Figure(figsize=(7, 3.2))
        axis = figure.subplots()
        rounds = [r["round"] for r in report["error_by_round"]]
        axis.plot(rounds, [r["max_error"] for r in report["error_by_round"]], label="max error")
        axis.plot(rounds, [r["mean_error"] for r in report["error_by_round"]], label="mean error")
        axis.set_xlabel("round")
        axis.set_ylabel("error of records so far")
        axis.legend()
        plots["rounds"] = _png(figure)
    top = report["per_marginal_max_error"][:30]
    if top:
        figure = Figure(figsize=(7, max(2.5, 0.22 * len(top))))
        axis = figure.subplots()
        axis.barh([m["marginal"] for m in top], [m["max_error"] for m in top], color="#55a868")
        axis.invert_yaxis()
        axis.set_xlabel("max error within the marginal")
        axis.tick_params(axis="y", labelsize=7)
        plots["marginals"] = _png(figure)
    seconds = report["solver"]["per_round_seconds"]
    if seconds:
        figure = Figure(figsize=(7, 3))
        axis = figure.subplots()
        axis.plot(range(1, len(seconds) + 1), seconds, ".", markersize=4)
        axis.set_xlabel("round")
        axis.set_ylabel("oracle seconds")
        plots["solver"] = _png(figure)
    return plots


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"**{INTERNAL_BANNER}**",
        "",
        f"# Error report: {report['release']} (run {report['run_id']})",
        "",
        f"Mechanism `{report['mechanism']}`, n = {report['n']:,}, workload: {report['workload']['description']} "
        f"({report['workload']['queries']:,} queries, {report['workload']['marginals']:,} marginals).",
        "",
        "## Error over the workload's positive queries",
        "",
        report["answers"],
        "",
        "| answers | max | mean | RMSE |",
        "|---|---:|---:|---:|",
    ]
    for name, row in report["errors"].items():
        lines.append(f"| {name} | {row['max_error']:.4f} | {row['mean_error']:.5f} | {row['rmse']:.5f} |")
    lines += ["", "## Privacy spent", "", "| mode | epsilon | delta | rho | analysis |", "|---|---:|---:|---:|---|"]
    for mode, cost in report["privacy"].items():
        rho = "" if cost["rho"] is None else f"{cost['rho']:.5g}"
        lines.append(f"| {mode} | {cost['epsilon']:.5g} | {cost['delta']:.3g} | {rho} | {cost['method']} |")
    solver = report["solver"]
    lines += [
        "",
        "## Oracle",
        "",
        f"Status counts: {solver['status_counts']}; record source: {solver['source_counts']}; "
        f"median {solver['median_seconds'] or 0:.3f} s, p95 {solver['p95_seconds'] or 0:.3f} s per round.",
        "",
        "## Worst marginals",
        "",
        "| marginal | max error |",
        "|---|---:|",
    ]
    lines += [f"| {m['marginal']} | {m['max_error']:.4f} |" for m in report["per_marginal_max_error"][:15]]
    return "\n".join(lines) + "\n"


def write_error_report(report: dict[str, Any], directory: Path) -> dict[str, Path]:
    """Write ``error_report.json``, ``error_report.md`` and ``error_report.html`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": directory / "error_report.json",
        "markdown": directory / "error_report.md",
        "html": directory / "error_report.html",
    }
    paths["json"].write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    markdown = _markdown(report)
    paths["markdown"].write_text(markdown)
    plots = _plots(report)
    body = [f"<p class='banner'>{html.escape(INTERNAL_BANNER)}</p>"]
    in_table = False
    for line in markdown.splitlines()[2:]:
        if line.startswith("|"):
            cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-:"):
                continue
            tag = "th" if not in_table else "td"
            if not in_table:
                body.append("<table>")
                in_table = True
            body.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            title = line[3:]
            body.append(f"<h2>{html.escape(title)}</h2>")
            key = {"Error over the workload's positive queries": "errors", "Oracle": "solver",
                   "Worst marginals": "marginals", "Privacy spent": None}.get(title)
            if key and key in plots:
                body.append(f"<img alt='{key}' src='data:image/png;base64,{plots[key]}'/>")
            if title == "Oracle" and "rounds" in plots:
                image = f"<img alt='rounds' src='data:image/png;base64,{plots['rounds']}'/>"
                body.append(f"<h2>Error versus round</h2>{image}")
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        body.append("</table>")
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>INTERNAL error report</title><style>"
        "body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px}.banner{background:#c0392b;color:white;padding:.5em;"
        "font-weight:bold}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
    paths["html"].write_text(page)
    return paths
