"""The internal error report: how far the release is from the truth, and from the baselines at the same budget.

The report is computed on the true private data, so it is **internal**: it says so on its first line, it is
written next to (not inside) the published table's files, and it must not be released.

What it holds (the JSON carries every number the Markdown and HTML pages show; both pages are rendered from
the JSON's dict, never recomputed):

* a **summary** -- mechanism, the (ε, δ) charged and under which accounting (the other accounting is a
  secondary figure), ``n``, published rows, distinct rows, the headline and plain-language warnings;
* the **fidelity evaluation** (:mod:`dq_engine.evaluation.fidelity`) of the published rows, of the mechanism's synthetic
  distribution and of the baselines (zeros, uniform, independent Laplace and Gaussian marginals): one-way TVD
  and worst cell per column, two-way TVD of every pair (a public sample on wide schemas), workload max / mean
  / RMSE, distinct rows and the largest multiplicity, constraint violations;
* true-versus-published bars for every column (small multiples), the two-way TVD heat map, the worst cells
  and pairs;
* the workload's errors, per part and per marginal; error versus round where the mechanism tracks it; the
  oracle's solver statistics only for mechanisms with an oracle; the privacy spent in both accountings; the
  mechanism's parameters.

The release's workload answers are those of its synthetic distribution, except for randomized response: its
published rows are the randomized records, whose raw answers are biased towards the uniform distribution, so
its answers are seed 003's unbiased estimator applied to them. All answering goes through contingency tables
(:class:`~dq_engine.data.marginal_tables.MarginalIndex`), never through the one-hot encoding.

Formats: JSON, Markdown, and a self-contained HTML page with matplotlib plots embedded as base64 PNGs.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator

from dq_engine import ComposedCost, Dataset, SynthesisResult, Workload, answer_workload, error_summary
from dq_engine.data.answers import per_marginal_max_error
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.evaluation.baselines import independent_gaussian_answers, independent_laplace_answers
from dq_engine.evaluation.fidelity import (
    Fidelity,
    FidelityEvaluation,
    FidelityReference,
    SupportsFeasible,
    evaluate_answers,
    evaluate_baselines,
    evaluate_rows,
    fidelity_reference,
    value_label,
)
from dq_engine.mechanisms.randomized_response import estimate_answers
from dq_engine.privacy.public import largest_rho
from dqrelease.runtime import side_process

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

FEW_DISTINCT_SHARE = 0.1
"""The summary warns when the published rows have fewer distinct rows than this share of the true table's
distinct rows (of the published rows when the true table's are not counted, e.g. sparse binary data)."""

MAX_PANELS = 30
"""Columns drawn as small multiples (the largest TVDs first when the schema has more)."""

MAX_HEATMAP_COLUMNS = 100
"""Above this many columns the pair heat map becomes a histogram of the pairs' TVDs."""

DEFINITIONS = {
    "synthetic": (
        "the mechanism's output: its synthetic records (weighted when the mechanism gives weights), the "
        "distribution the published rows are drawn from. For randomized response, the answers of seed 003's "
        "unbiased estimator applied to the randomized records."
    ),
    "published rows": "the rows of the released synthetic table, as a user downloads them.",
    "positive queries": (
        "the workload's queries in their positive form, 'the share of records with these values'; a query's "
        "negation (1 minus it) has the same error, so errors are reported once."
    ),
    "TVD": (
        "total variation distance between two distributions of a column (or pair of columns): half the sum of the "
        "absolute differences of their shares. It is the largest error of any question about that column (or "
        "pair), e.g. 'what share of records has one of these values'."
    ),
    "worst cell": "the single value (or value pair) whose share is furthest from the truth.",
    "workload": "the queries the mechanism was steered by ([workload] in the config); the headline covers them too.",
    "baselines": (
        "what simpler releases at the same budget achieve: zeros (every share 0), uniform (every value equally "
        "likely), and independent Laplace or Gaussian noise added to each workload marginal (answers only, not "
        "rows, so only their workload figures exist)."
    ),
}
"""Plain-language definitions shown on the report's first screen."""


# ---------------------------------------------------------------------- answers
def release_answers(result: SynthesisResult, workload: Workload) -> tuple[np.ndarray, str]:
    """The workload answers the release gives, and how they are computed (one line for the report)."""
    if result.mechanism == "randomized_response":
        return estimate_answers(result, workload), (
            "Answers: seed 003's unbiased estimator (eq. 12) applied to the randomized records; the raw answers "
            "of those records (the published rows) are biased towards the uniform distribution."
        )
    answers = MarginalIndex(workload).answers(result.records, result.weights)
    return answers, "Answers: the workload answers of the synthetic records."


def gaussian_baseline_rho(tight: ComposedCost, delta: float) -> float:
    """ρ of the Gaussian baseline at the run's budget.

    The run's own zCDP ρ when its tight cost is that ρ's (ε, δ) conversion; for a pure-ε cost (δ = 0, e.g.
    randomized response) the largest ρ whose optimal conversion fits (ε, ``delta``), ``delta`` being the
    mechanism's target δ (a Gaussian mechanism has no pure-ε guarantee).
    """
    if tight.delta > 0 and tight.rho:
        return float(tight.rho)
    return largest_rho(tight.epsilon, delta)


# ---------------------------------------------------------------------- the report's numbers
def _has_oracle(result: SynthesisResult) -> bool:
    from dqrelease.mechanisms import MECHANISMS

    entry = MECHANISMS.get(result.mechanism)
    return entry.has_oracle if entry is not None else any(d.status != "NOT_RUN" for d in result.diagnostics)


def _release_results(
    reference: FidelityReference,
    result: SynthesisResult,
    published_codes: np.ndarray | None,
    constraints: SupportsFeasible | None,
) -> tuple[list[Fidelity], str]:
    """The fidelity of the synthetic distribution and of the published rows, and the answers note."""
    workload = reference.workload
    results = []
    if result.mechanism == "randomized_response":
        estimates, note = release_answers(result, workload)
        results.append(evaluate_answers(reference, estimates, label="synthetic"))
    else:
        note = "Answers: the workload answers of the synthetic records."
        results.append(
            evaluate_rows(reference, result.records, result.weights, label="synthetic", constraints=constraints)
        )
    if published_codes is not None:
        results.append(evaluate_rows(reference, published_codes, label="published rows", constraints=constraints))
    return results, note


def _column_details(reference: FidelityReference, published: Fidelity, uniform: Fidelity) -> list[dict[str, Any]]:
    domain = reference.marginals.domain
    details = []
    for j, attribute in enumerate(domain.attributes):
        truth, ours = reference.tables[j], published.tables[j]
        worst = int(published.one_way_worst_value[j])
        details.append({
            "column": attribute.name,
            "tvd": float(published.one_way_tvd[j]),
            "uniform_tvd": float(uniform.one_way_tvd[j]),
            "worst_value": value_label(domain, j, worst),
            "worst_error": float(published.one_way_worst_cell[j]),
            "values": [value_label(domain, j, v) for v in range(attribute.size)],
            "true": [float(x) for x in truth],
            "published": [float(x) for x in ours],
        })
    return details


def _worst_cells(columns: list[dict[str, Any]], count: int = 15) -> list[dict[str, Any]]:
    cells = [
        {"column": c["column"], "value": label, "true": t, "published": p, "error": abs(p - t)}
        for c in columns
        for label, t, p in zip(c["values"], c["true"], c["published"], strict=True)
    ]
    return sorted(cells, key=lambda cell: -cell["error"])[:count]


def _pair_details(reference: FidelityReference, published: Fidelity) -> list[dict[str, Any]]:
    marginals = reference.marginals
    domain, index = marginals.domain, marginals.index
    m = marginals.n_columns
    details = []
    for i, (a, b) in enumerate(marginals.pairs):
        error = published.tables[m + i] - reference.tables[m + i]
        cell = int(np.argmax(np.abs(error)))
        size_b = int(index.n_cells[m + i] // domain.sizes[a])
        details.append({
            "columns": [domain.names[a], domain.names[b]],
            "tvd": float(published.two_way_tvd[i]),
            "worst_cell": [value_label(domain, int(a), cell // size_b), value_label(domain, int(b), cell % size_b)],
            "worst_true": float(reference.tables[m + i][cell]),
            "worst_published": float(published.tables[m + i][cell]),
        })
    return details


def _parts(workload: Workload, truth: np.ndarray, answers: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    parts = [(p.description, p.positions, p.n_marginals) for p in workload.parts] or [
        (workload.description, np.arange(len(workload)), workload.n_marginals)
    ]
    return [
        {"part": description, "marginals": n_marginals, "queries": len(positions),
         "errors": {label: error_summary(truth[positions], values[positions]) for label, values in answers.items()}}
        for description, positions, n_marginals in parts
    ]


def _warnings(results: dict[str, Fidelity], published: Fidelity | None, true_distinct: int | None) -> list[str]:
    """Plain-language warnings about the published rows (or the synthetic answers when nothing is published)."""
    ours = published or results["synthetic"]
    name = ours.label
    notes = []
    uniform = results["uniform"]
    if ours.headline is not None and uniform.headline is not None and ours.headline >= uniform.headline:
        notes.append(
            f"The {name} are no better than uniform random data: headline {_fmt(ours.headline)} against "
            f"{_fmt(uniform.headline)} for uniform."
        )
    mean = (ours.workload or {}).get("mean_error")
    for trivial in ("zeros", "uniform"):
        other = (results[trivial].workload or {}).get("mean_error")
        if mean is not None and other is not None and mean >= other:
            notes.append(
                f"The {name}' mean workload error ({_fmt(mean)}) is no better than publishing {trivial} "
                f"({_fmt(other)})."
            )
    expected = min(true_distinct, ours.rows) if true_distinct and ours.rows else ours.rows
    if expected and ours.distinct_rows is not None and ours.distinct_rows < FEW_DISTINCT_SHARE * expected:
        truth = f" (the true table has {true_distinct:,})" if true_distinct else ""
        notes.append(
            f"Only {ours.distinct_rows:,} distinct rows among {ours.rows:,} published rows{truth}: the most "
            f"repeated row appears {ours.max_multiplicity:,} times. Analyses that count distinct records, fit "
            "models or look at rare combinations will mislead."
        )
    best_noisy = min(
        (r for label, r in results.items() if label.startswith("independent") and r.workload),
        key=lambda r: r.workload["max_error"], default=None,
    )
    if best_noisy is not None and ours.workload and ours.workload["max_error"] > 2 * best_noisy.workload["max_error"]:
        ratio = ours.workload["max_error"] / max(best_noisy.workload["max_error"], 1e-300)
        notes.append(
            f"Independent noisy marginals at the same budget ({best_noisy.label}) answer the workload "
            f"{ratio:.1f} times more accurately (max error); they are answers, not synthetic rows."
        )
    if ours.constraint_violations:
        notes.append(
            f"{ours.constraint_violations:,} {name} ({_pct(ours.constraint_violation_share)}) break a declared "
            "constraint."
        )
    return notes


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
    accounting: str = "tight",
    constraints: SupportsFeasible | None = None,
    true_answers: np.ndarray | None = None,
) -> dict[str, Any]:
    """Compute the report's numbers (internal).

    Args:
        data: The private dataset.
        workload: The workload.
        result: The mechanism's output.
        costs: The privacy cost charged for the mechanism, per accounting mode (the plan's).
        published_codes: The expanded rows actually published (value codes), evaluated as well as the
            synthetic distribution.
        rng: Generator for the noisy baselines (their noise never leaves the report).
        release_name: Public name of the release.
        run_id: Run id.
        delta: The mechanism's target δ (sizes the Gaussian baseline when the cost is pure ε).
        accounting: The accounting mode charged to the ledger (``costs[accounting]`` was charged).
        constraints: Declared constraints (an object with ``feasible(codes)``), or None.
        true_answers: The workload's exact answers if already computed.
    """
    truth = answer_workload(data, workload) if true_answers is None else true_answers
    reference = fidelity_reference(data, workload=workload, true_answers=truth)
    tight = costs["tight"]
    laplace_label = f"independent Laplace (eps={_fmt(tight.epsilon)})"
    rho = gaussian_baseline_rho(tight, delta)
    gaussian_label = f"independent Gaussian (rho={_fmt(rho)}, zCDP)"
    laplace, _ = independent_laplace_answers(data, workload, truth, epsilon=tight.epsilon, rng=rng)
    gaussian, _ = independent_gaussian_answers(data, workload, truth, rho=rho, rng=rng)

    ours, answers_note = _release_results(reference, result, published_codes, constraints)
    baselines = evaluate_baselines(reference, {laplace_label: laplace, gaussian_label: gaussian})
    results = {r.label: r for r in (*ours, *baselines)}
    published = results.get("published rows")
    synthetic = results["synthetic"]
    shown = published or synthetic  # the rows a user gets; the synthetic distribution when nothing is published
    marginals = reference.marginals

    per_marginal = per_marginal_max_error(workload, truth, synthetic.answers)
    names = workload.marginal_names()
    order = np.argsort(-per_marginal)
    diagnostics = result.diagnostics
    has_oracle = _has_oracle(result)
    # the solver section counts best-response calls only: the table fit's MWEM rounds (source "mw") call no oracle
    oracle_calls = tuple(d for d in diagnostics if d.source != "mw")
    solve_times = np.array([d.solver_seconds + d.local_seconds for d in oracle_calls]) if oracle_calls else np.zeros(0)
    columns = _column_details(reference, shown, results["uniform"]) if shown.tables is not None else []
    charged = costs[accounting]
    other_modes = {mode: cost for mode, cost in costs.items() if mode != accounting}
    rows_figures = published or synthetic
    true_distinct = None if data.codes is None else int(data.codes.shape[0])
    return {
        "banner": INTERNAL_BANNER,
        "release": release_name,
        "run_id": run_id,
        "mechanism": result.mechanism,
        "summary": {
            "mechanism": result.mechanism,
            "mechanism_reference": _mechanism_reference(result.mechanism),
            "accounting": accounting,
            "epsilon": charged.epsilon,
            "delta": charged.delta,
            "rho": charged.rho,
            "other_accounting": {mode: {"epsilon": c.epsilon, "delta": c.delta} for mode, c in other_modes.items()},
            "n": result.n,
            "distinct_true_rows": true_distinct,
            "published_rows": None if published is None else published.rows,
            "distinct_published_rows": None if published is None else published.distinct_rows,
            "largest_multiplicity": None if published is None else published.max_multiplicity,
            "synthetic_records": int(result.records.shape[0]),
            "distinct_synthetic_records": synthetic.distinct_rows,
            "headline_of": rows_figures.label,
            "headline": rows_figures.headline,
            "headline_figure": rows_figures.headline_figure,
            "baseline_headlines": {b.label: b.headline for b in baselines},
            "warnings": _warnings(results, published, true_distinct),
            "definitions": DEFINITIONS,
        },
        "parameters": result.parameters,
        "n": result.n,
        "workload": {"description": workload.description, "queries": len(workload), "marginals": workload.n_marginals},
        "answers": answers_note,
        "errors": {label: r.workload for label, r in results.items()},
        "fidelity": {
            **_evaluation_dict(reference, results),
            "evaluated": shown.label,
            "columns": columns,
            "pairs": _pair_details(reference, shown) if shown.tables is not None else [],
            "worst_cells": _worst_cells(columns),
        },
        "workload_parts": _parts(workload, truth, {label: r.answers for label, r in results.items()}),
        "per_marginal_max_error": [{"marginal": names[i], "max_error": float(per_marginal[i])} for i in order],
        "error_by_round": [
            {"round": d.round, "max_error": d.internal_max_error, "mean_error": d.internal_mean_error}
            for d in diagnostics
            if d.internal_max_error is not None
        ],
        "solver": _solver(oracle_calls, solve_times) if has_oracle else None,
        "privacy": {mode: cost.as_dict() for mode, cost in costs.items()},
        "accounting": accounting,
        "pairs_rule": marginals.rule,
    }


def _evaluation_dict(reference: FidelityReference, results: dict[str, Fidelity]) -> dict[str, Any]:
    return FidelityEvaluation(reference=reference, results=results).as_dict()


def _mechanism_reference(name: str) -> str:
    from dqrelease.mechanisms import MECHANISMS

    entry = MECHANISMS.get(name)
    return "" if entry is None else entry.reference


def _solver(diagnostics: tuple, solve_times: np.ndarray) -> dict[str, Any]:
    return {
        "status_counts": dict(Counter(d.status for d in diagnostics)),
        "source_counts": dict(Counter(d.source for d in diagnostics)),
        "median_seconds": float(np.median(solve_times)) if len(solve_times) else None,
        "p95_seconds": float(np.percentile(solve_times, 95)) if len(solve_times) else None,
        "max_seconds": float(solve_times.max()) if len(solve_times) else None,
        "per_round_seconds": [float(x) for x in solve_times],
    }


# ---------------------------------------------------------------------- number formatting
def _fmt(value: float | int | None, digits: int = 3) -> str:
    """A number for people.

    ``n/a`` for None, integers with separators, floats to ``digits`` significant digits, exponents without
    padding (``1e-9``, not ``1e-09``).
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), text)


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0%"
    return f"{100 * value:.3g}%" if abs(value) >= 1e-4 else f"{_fmt(100 * value)}%"


# ---------------------------------------------------------------------- a small document model
@dataclass
class _Document:
    """Blocks rendered both to Markdown and to HTML, so both pages say the same thing."""

    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def heading(self, text: str, anchor: str | None = None, level: int = 2) -> None:
        self.blocks.append(("heading", (level, text, anchor)))

    def paragraph(self, text: str) -> None:
        self.blocks.append(("paragraph", text))

    def items(self, items: list[str], css: str = "") -> None:
        if items:
            self.blocks.append(("items", (items, css)))

    def terms(self, pairs: list[tuple[str, str]]) -> None:
        self.blocks.append(("terms", pairs))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        if rows:
            self.blocks.append(("table", (header, rows)))

    def figure(self, png: str | None, alt: str) -> None:
        if png:
            self.blocks.append(("figure", (png, alt)))


def _markdown(document: _Document) -> str:
    lines: list[str] = []
    for kind, value in document.blocks:
        if kind == "heading":
            level, text, _ = value
            lines += ["#" * level + " " + text, ""]
        elif kind == "paragraph":
            lines += [value, ""]
        elif kind == "items":
            lines += [f"- {item}" for item in value[0]] + [""]
        elif kind == "terms":
            lines += [f"- **{term}**: {text}" for term, text in value] + [""]
        elif kind == "table":
            header, rows = value
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
            lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
            lines.append("")
        elif kind == "figure":
            lines += [f"(figure in the HTML report: {value[1]})", ""]
    return "\n".join(lines).rstrip() + "\n"


_NUMBER = re.compile(r"(?<![\w.#-])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?%?(?![\w])")


def _inline(text: str) -> str:
    """Escape text for HTML; numbers never break across lines (``1e-9``, ``48,842``, ``70.8%``)."""
    return _NUMBER.sub(lambda m: f"<span class='num'>{m.group(0)}</span>", html.escape(text))


def _cell_class(text: str) -> str:
    """Numbers are right-aligned in tables; text stays left-aligned."""
    return " class='n'" if text == "n/a" or _NUMBER.fullmatch(text) else ""


def _html(document: _Document, title: str) -> str:
    body = [f"<p class='banner'>{html.escape(INTERNAL_BANNER)}</p>"]
    for kind, value in document.blocks:
        if kind == "heading":
            level, text, anchor = value
            ident = f" id='{anchor}'" if anchor else ""
            body.append(f"<h{level}{ident}>{_inline(text)}</h{level}>")
        elif kind == "paragraph":
            body.append(f"<p>{_inline(value)}</p>")
        elif kind == "items":
            items, css = value
            klass = f" class='{css}'" if css else ""
            body.append(f"<ul{klass}>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>")
        elif kind == "terms":
            body.append("<dl>" + "".join(f"<dt>{_inline(t)}</dt><dd>{_inline(d)}</dd>" for t, d in value) + "</dl>")
        elif kind == "table":
            header, rows = value
            head = "".join(f"<th>{_inline(cell)}</th>" for cell in header)
            cells = "".join(
                "<tr>" + "".join(f"<td{_cell_class(cell)}>{_inline(cell)}</td>" for cell in row) + "</tr>"
                for row in rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>")
        elif kind == "figure":
            png, alt = value
            body.append(f"<figure><img alt='{html.escape(alt, quote=True)}' src='data:image/png;base64,{png}'/>"
                        f"<figcaption>{_inline(alt)}</figcaption></figure>")
    style = (
        "body{font-family:system-ui,sans-serif;max-width:68em;margin:1.5em auto;padding:0 1em;color:#222;"
        "line-height:1.45}table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;"
        "padding:2px 8px;text-align:left;vertical-align:top}td.n{text-align:right}"
        "th{background:#f3f3f3}.num{white-space:nowrap}.banner{background:#c0392b;color:white;padding:.5em;"
        "font-weight:bold}.warn li{color:#a0301f}dt{font-weight:bold;margin-top:.3em}dd{margin-left:1.5em}"
        "figure{margin:.5em 0 1.5em}img{max-width:100%}figcaption{font-size:.85em;color:#555}"
        "h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}"
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )


# ---------------------------------------------------------------------- plots
def _png(figure: Figure) -> str:
    """The figure as a base64 PNG.

    Margins are set by each chart (:func:`_margins`), not trimmed with ``bbox_inches="tight"``: that draws every
    figure twice, a third of the report's drawing time.
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode()


def _text_inches(labels: Any, fontsize: float) -> float:
    """About the width of the longest label (DejaVu Sans: under 0.6 em per character on average)."""
    return max((len(str(label)) for label in labels), default=0) * fontsize * 0.6 / 72


def _margins(figure: Figure, *, left: float, bottom: float, right: float = 0.2, top: float = 0.3, **spacing) -> None:
    """Place the axes ``left`` / ``bottom`` / ``right`` / ``top`` inches from the figure's edges."""
    width, height = figure.get_size_inches()
    figure.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                           **spacing)


TRUE_COLOUR, OUR_COLOUR, BASELINE_COLOUR = "#9a9a9a", "#1f6fb4", "#d9822b"


def _short(label: str, width: int = 16) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _columns_plot(columns: list[dict[str, Any]], evaluated: str) -> str | None:
    if not columns:
        return None
    shown = sorted(columns, key=lambda c: -c["tvd"])[:MAX_PANELS] if len(columns) > MAX_PANELS else columns
    per_row = 3
    rows = math.ceil(len(shown) / per_row)
    figure = Figure(figsize=(12, 2.6 * rows))
    axes = figure.subplots(rows, per_row, squeeze=False)
    for axis, column in zip(axes.ravel(), shown, strict=False):
        k = len(column["values"])
        x = np.arange(k)
        top = max(max(column["true"]), max(column["published"]))
        logarithmic = _dominated(column["true"])
        if logarithmic:  # one value holds most records: a linear axis would hide every other value
            positive = [v for v in (*column["true"], *column["published"]) if v > 0]
            _log_scale(axis.yaxis)
            bottom = max(min(positive) / 2, 1e-6)
            axis.set_ylim(bottom, top * 1.5)
        else:
            bottom = 0.0
            axis.set_ylim(0, top * 1.12 or 1)
            axis.yaxis.set_major_formatter(_percent_formatter())
        _bars(axis, x - 0.2, column["true"], bottom=bottom, facecolors=TRUE_COLOUR, label="true")
        _bars(axis, x + 0.2, column["published"], bottom=bottom, facecolors=OUR_COLOUR, label=evaluated)
        worst = column["values"].index(column["worst_value"])
        _bars(axis, [worst + 0.2], [column["published"][worst]], bottom=bottom, facecolors=OUR_COLOUR,
              edgecolors="#c0392b", linewidths=1.5)
        axis.set_xlim(-0.4 - 0.05 * k, k - 0.6 + 0.05 * k)  # about the margins ``bar`` leaves
        scale = ", log scale" if logarithmic else ""
        axis.set_title(f"{column['column']}  (TVD {_fmt(column['tvd'], 2)}{scale})", fontsize=9, y=1.0)
        axis.set_xticks(x)
        axis.set_xticklabels([_short(v, 12) for v in column["values"]], rotation=90,
                             fontsize=7 if k <= 16 else 5)
        axis.tick_params(axis="y", labelsize=7)
    for axis in axes.ravel()[len(shown):]:
        axis.set_visible(False)
    axes.ravel()[0].legend(fontsize=7, loc="upper right")
    # fixed spacing (room for the rotated value labels) instead of tight_layout: laying out thousands of tick
    # labels twice took most of the report's time
    height = 2.6 * rows
    figure.subplots_adjust(left=0.05, right=0.99, top=1 - 0.35 / height, bottom=0.9 / height, wspace=0.22,
                           hspace=0.85)
    return _png(figure)


def _bars(axis, x, heights, *, bottom: float, width: float = 0.4, **style: Any) -> None:
    """Bars from ``bottom`` as one collection (``Axes.bar`` makes a patch per bar: most of a chart's time).

    The axis's limits are left to the caller.
    """
    from matplotlib.collections import PolyCollection

    left = np.asarray(x, dtype=float) - width / 2
    top = np.maximum(np.asarray(heights, dtype=float), bottom)
    low = np.full_like(left, bottom)
    corners = np.stack([np.stack(pair, axis=1) for pair in
                        ((left, low), (left, top), (left + width, top), (left + width, low))], axis=1)
    axis.add_collection(PolyCollection(corners, **{"edgecolors": "none", **style}), autolim=False)


def _log_scale(axis) -> None:
    """Make ``axis`` logarithmic with plain-text tick labels (``0.01``) and no minor ticks.

    The default labels are mathtext (``10^-2``), whose parsing took about a third of the report's drawing time;
    the minor ticks, unlabelled, another tenth (:class:`_DecadeLocator` labels more values on a short axis).
    """
    from matplotlib.ticker import FuncFormatter, NullLocator

    axis.axes.set_yscale("log") if axis.axis_name == "y" else axis.axes.set_xscale("log")
    axis.set_major_locator(_DecadeLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_locator(NullLocator())


class _DecadeLocator(LogLocator):
    """Ticks at 1, 2 and 5 of each decade on an axis of at most 2.5 decades, at the powers of 10 beyond."""

    def tick_values(self, vmin: float, vmax: float) -> np.ndarray:
        wide = vmin > 0 and vmax > 0 and math.log10(max(vmin, vmax) / min(vmin, vmax)) > 2.5
        self.set_params(subs=(1.0,) if wide else (1.0, 2.0, 5.0))
        return super().tick_values(vmin, vmax)


def _dominated(shares: list[float]) -> bool:
    """True when one value's share exceeds 20 times the median share of the others (log scale needed)."""
    positive = sorted(v for v in shares if v > 0)
    return len(positive) >= 3 and positive[-1] > 20 * float(np.median(positive[:-1]))


def _percent_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{100 * value:.{0 if value >= 0.01 or value == 0 else 1}f}%")


def _column_tvd_plot(columns: list[dict[str, Any]], evaluated: str) -> str | None:
    if not columns:
        return None
    ordered = sorted(columns, key=lambda c: -c["tvd"])[:60]
    figure = Figure(figsize=(7, max(2.2, 0.24 * len(ordered) + 0.8)))
    axis = figure.subplots()
    y = np.arange(len(ordered))
    values = np.array([[c["tvd"], c["uniform_tvd"]] for c in ordered])
    floor = max(float(values[values > 0].min()) / 3 if np.any(values > 0) else 1e-6, 1e-6)
    axis.barh(y, np.maximum(values[:, 0], floor), color=OUR_COLOUR, label=evaluated)
    axis.plot(np.maximum(values[:, 1], floor), y, "o", color=BASELINE_COLOUR, markersize=4, label="uniform")
    _log_scale(axis.xaxis)
    axis.set_xlim(floor, max(1.0, float(values.max()) * 1.5))
    axis.set_yticks(y)
    axis.set_yticklabels([c["column"] for c in ordered], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("one-way TVD (log scale; 0 = identical, 1 = disjoint)")
    axis.legend(fontsize=8, loc="lower right")
    _margins(figure, left=_text_inches([c["column"] for c in ordered], 8) + 0.2, bottom=0.55, top=0.15)
    return _png(figure)


def _pairs_plot(pairs: list[dict[str, Any]], names: list[str]) -> str | None:
    if not pairs:
        return None
    values = np.array([p["tvd"] for p in pairs])
    if len(names) > MAX_HEATMAP_COLUMNS:
        figure = Figure(figsize=(7, 3))
        axis = figure.subplots()
        axis.hist(values, bins=40, color=OUR_COLOUR)
        axis.set_xlabel("two-way TVD")
        axis.set_ylabel("pairs")
        _margins(figure, left=0.7, bottom=0.55, top=0.15)
        return _png(figure)
    position = {name: i for i, name in enumerate(names)}
    matrix = np.full((len(names), len(names)), np.nan)
    for pair in pairs:
        a, b = (position[c] for c in pair["columns"])
        matrix[a, b] = matrix[b, a] = pair["tvd"]
    size = min(11.0, 2.5 + 0.32 * len(names))
    figure = Figure(figsize=(size + 1.2, size))
    axis = figure.subplots()
    from matplotlib import colormaps

    cmap = colormaps["viridis"].copy()
    cmap.set_bad("#f0f0f0")
    image = axis.imshow(matrix, cmap=cmap, vmin=0, vmax=max(float(np.nanmax(matrix)), 1e-6))
    axis.set_xticks(range(len(names)))
    axis.set_yticks(range(len(names)))
    fontsize = 8 if len(names) <= 20 else 6 if len(names) <= 45 else 4
    axis.set_xticklabels(names, rotation=90, fontsize=fontsize)
    axis.set_yticklabels(names, fontsize=fontsize)
    if len(names) <= 16:
        for a in range(len(names)):
            for b in range(len(names)):
                if not np.isnan(matrix[a, b]):
                    axis.text(b, a, f"{matrix[a, b]:.2f}", ha="center", va="center", fontsize=6,
                              color="white" if matrix[a, b] < 0.6 * np.nanmax(matrix) else "black")
    label = _text_inches(names, fontsize) + 0.2
    _margins(figure, left=label, bottom=label, right=0.9, top=0.1)  # right: the colour bar's ticks and label
    colorbar = figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    colorbar.set_label("two-way TVD")
    return _png(figure)


def _workload_plot(errors: dict[str, dict[str, float] | None]) -> str | None:
    labels = [label for label, row in errors.items() if row]
    if not labels:
        return None
    figure = Figure(figsize=(11, 0.45 * len(labels) + 1.2))
    left, right = figure.subplots(1, 2, sharey=True)
    y = np.arange(len(labels))
    colours = [OUR_COLOUR if label in ("synthetic", "published rows") else BASELINE_COLOUR for label in labels]
    for axis, key, title in ((left, "max_error", "max error"), (right, "mean_error", "mean error")):
        values = np.array([errors[label][key] for label in labels])
        floor = max(values[values > 0].min() / 3 if np.any(values > 0) else 1e-6, 1e-9)
        axis.barh(y, np.maximum(values, floor), color=colours)
        _log_scale(axis.xaxis)
        axis.set_title(f"{title} (log scale)", fontsize=9)
        for i, value in enumerate(values):
            axis.text(max(value, floor), i, f" {_fmt(value)}", va="center", fontsize=7)
        axis.set_xlim(floor / 1.5, values.max() * 6 if values.max() > 0 else 1)
    left.set_yticks(y)
    left.set_yticklabels(labels, fontsize=8)
    left.invert_yaxis()
    _margins(figure, left=_text_inches(labels, 8) + 0.2, bottom=0.45, right=0.25, wspace=0.08)
    return _png(figure)


def _rounds_plot(rounds: list[dict[str, Any]]) -> str | None:
    series = [(key, [r[key] for r in rounds]) for key in ("max_error", "mean_error")]
    series = [(key, values) for key, values in series if any(v for v in values if v is not None)]
    if not rounds or not series:
        return None
    figure = Figure(figsize=(11, 3))
    axes = figure.subplots(1, len(series), squeeze=False).ravel()
    x = [r["round"] for r in rounds]
    for axis, (key, values) in zip(axes, series, strict=True):
        positive = [v if v and v > 0 else np.nan for v in values]
        axis.plot(x, positive, color=OUR_COLOUR, linewidth=1)
        _log_scale(axis.yaxis)
        axis.set_xlabel("round")
        axis.set_title(f"{key.replace('_', ' ')} of the records so far (log scale)", fontsize=9)
    _margins(figure, left=0.6, bottom=0.5, wspace=0.2)
    return _png(figure)


def _marginals_plot(per_marginal: list[dict[str, Any]]) -> str | None:
    top = per_marginal[:25]
    if not top:
        return None
    figure = Figure(figsize=(7, max(2.5, 0.24 * len(top) + 0.8)))
    axis = figure.subplots()
    labels = [_short(m["marginal"], 48) for m in top]
    axis.barh(labels, [m["max_error"] for m in top], color=OUR_COLOUR)
    axis.invert_yaxis()
    axis.set_xlabel("largest error of one query of the marginal")
    axis.tick_params(axis="y", labelsize=7)
    _margins(figure, left=_text_inches(labels, 7) + 0.2, bottom=0.55, right=0.3, top=0.15)
    return _png(figure)


def _solver_plot(seconds: list[float]) -> str | None:
    if not seconds:
        return None
    figure = Figure(figsize=(7, 2.8))
    axis = figure.subplots()
    values = np.maximum(np.asarray(seconds), 1e-4)
    axis.plot(range(1, len(values) + 1), values, ".", markersize=4, color=OUR_COLOUR)
    axis.set_xlabel("round")
    if values.max() > 10 * values.min():  # a few slow calls among fast ones
        _log_scale(axis.yaxis)
        axis.set_ylabel("oracle seconds (log scale)")
    else:
        axis.set_ylim(0, values.max() * 1.1)
        axis.set_ylabel("oracle seconds")
    _margins(figure, left=0.75, bottom=0.5, top=0.15)
    return _png(figure)


# ---------------------------------------------------------------------- the document
def _flatten(parameters: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows = []
    for key, value in parameters.items():
        if isinstance(value, dict):
            rows += _flatten(value, f"{prefix}{key}.")
        elif isinstance(value, list | tuple):
            rows.append((prefix + key, ", ".join(_fmt(v) if isinstance(v, float | int) else str(v) for v in value)))
        elif isinstance(value, float | int):
            rows.append((prefix + key, _fmt(value, 6)))
        else:
            rows.append((prefix + key, str(value)))
    return rows


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {value:,}" for key, value in sorted(counts.items(), key=lambda kv: -kv[1]))


FIGURE_NAMES = {
    "worst_one_way_cell": "worst one-way cell",
    "max_one_way_tvd": "largest one-way TVD",
    "max_two_way_tvd": "largest two-way TVD",
    "workload_max_error": "workload max error",
}


def _summary(document: _Document, report: dict[str, Any]) -> None:
    summary = report["summary"]
    fidelity = report["fidelity"]
    headline_at = fidelity["results"][summary["headline_of"]]
    where = ""
    if summary["headline_figure"] == "max_two_way_tvd" and headline_at["max_two_way_tvd_at"]:
        where = f" (columns {' and '.join(headline_at['max_two_way_tvd_at'])})"
    elif summary["headline_figure"] in ("worst_one_way_cell", "max_one_way_tvd") and headline_at[
        "worst_one_way_cell_at"
    ]:
        cell = headline_at["worst_one_way_cell_at"]
        where = f" ({cell['column']} = {cell['value_label']})"
    other = "; ".join(
        f"{mode} accounting would give epsilon {_fmt(c['epsilon'])}, delta {_fmt(c['delta'])} (not charged)"
        for mode, c in summary["other_accounting"].items()
    )
    rho = f", rho {_fmt(summary['rho'])}" if summary["rho"] else ""
    reference = summary["mechanism_reference"]
    facts = [
        ("Mechanism", summary["mechanism"] + (f": {reference}" if reference else "")),
        ("Privacy charged", f"epsilon {_fmt(summary['epsilon'])}, delta {_fmt(summary['delta'])}{rho}, under "
         f"{summary['accounting']} accounting: this is what the budget ledger was charged."
         + (f" For comparison, {other}." if other else "")),
        ("True records (n)", f"{_fmt(summary['n'])}: the rows of the private table"
         + (f" ({_fmt(summary['distinct_true_rows'])} distinct)." if summary["distinct_true_rows"] else ".")),
    ]
    if summary["published_rows"] is not None:
        facts.append((
            "Published rows",
            f"{_fmt(summary['published_rows'])} rows in the released table, of which "
            f"{_fmt(summary['distinct_published_rows'])} are distinct; the most repeated row appears "
            f"{_fmt(summary['largest_multiplicity'])} times.",
        ))
    if summary["distinct_synthetic_records"] is None:  # randomized response: its answers come from an estimator
        synthetic = (f"{_fmt(summary['synthetic_records'])} randomized records (the published rows); the synthetic "
                     "answers are an estimator's, not a table's.")
    else:
        synthetic = (f"{_fmt(summary['synthetic_records'])} records in the mechanism's output "
                     f"({_fmt(summary['distinct_synthetic_records'])} distinct with positive weight).")
    facts.append(("Synthetic records", synthetic))
    results = fidelity["results"]
    tables = ", ".join(f"{label} {_fmt(r['headline'])}" for label, r in results.items()
                       if r["max_one_way_tvd"] is not None and label not in ("synthetic", "published rows"))
    workload_max = ", ".join(f"{label} {_fmt(r['workload_max_error'])}" for label, r in results.items()
                             if r["workload_max_error"] is not None)
    facts.append((
        "Headline (worst error)",
        f"{_fmt(summary['headline'])} for the {summary['headline_of']}, from the "
        f"{FIGURE_NAMES.get(summary['headline_figure'], 'n/a')}{where}. It is the largest error, as a share of "
        f"records, of any question about one column, about a pair of columns ({report['pairs_rule']}) and of any "
        f"workload query. The same headline for the baselines: {tables}. On the workload alone (max error), "
        f"where the noisy-marginal baselines also apply: {workload_max}.",
    ))
    document.heading("Summary", "summary")
    document.terms(facts)
    if summary["warnings"]:
        document.paragraph("Warnings:")
        document.items(summary["warnings"], css="warn")
    else:
        document.paragraph(
            "No warning: the release beats the zeros and uniform baselines and has many distinct rows."
        )
    document.paragraph("What the words mean:")
    document.terms(list(summary["definitions"].items()))


def _fidelity_section(document: _Document, report: dict[str, Any]) -> None:
    fidelity = report["fidelity"]
    document.heading("Fidelity: the release against the truth and the baselines", "fidelity")
    document.paragraph(
        f"Every figure is a share of records (0 = exact). Pairs evaluated: {fidelity['pairs_rule']}. Headline: "
        f"{fidelity['headline_definition']}. n/a: the figure does not apply (answers-only baselines have no rows or "
        "tables)."
    )
    results = fidelity["results"]
    figures = [
        ("headline (worst of the four marked *)", "headline"), ("worst one-way cell *", "worst_one_way_cell"),
        ("mean one-way TVD", "mean_one_way_tvd"), ("max one-way TVD *", "max_one_way_tvd"),
        ("mean two-way TVD", "mean_two_way_tvd"), ("max two-way TVD *", "max_two_way_tvd"),
        ("workload max error *", "workload_max_error"), ("workload mean error", "workload_mean_error"),
        ("workload RMSE", "workload_rmse"), ("distinct rows", "distinct_rows"),
        ("largest multiplicity of one row", "max_multiplicity"),
        ("rows breaking a constraint", "constraint_violations"),
    ]
    def cell(label: str, key: str) -> str:
        value = results[label][key]
        if value is None and key == "constraint_violations" and results[label]["distinct_rows"] is not None:
            return "none declared"
        return _fmt(value)

    document.table(["figure", *results], [[name, *[cell(label, key) for label in results]] for name, key in figures])


def _columns_section(document: _Document, report: dict[str, Any], plots: dict[str, str | None]) -> None:
    fidelity = report["fidelity"]
    columns = fidelity["columns"]
    evaluated = fidelity["evaluated"]
    document.heading(f"Every column: true versus {evaluated}", "columns")
    many = len(columns) > MAX_PANELS
    document.paragraph(
        f"Share of records per value, true (grey) and {evaluated} (blue); the worst cell of each column is outlined "
        "in red. Each column has its own panel and scale."
        + (f" The {MAX_PANELS} columns with the largest TVD of {len(columns):,} are drawn; the JSON has all."
           if many else "")
    )
    document.figure(plots.get("columns"), f"true versus {evaluated}, one panel per column")
    document.figure(
        plots.get("column_tvd"), f"one-way TVD per column, log scale: {evaluated} (bars) and uniform (dots)"
    )
    ordered = sorted(columns, key=lambda c: -c["tvd"])[:60]
    document.table(
        ["column", "TVD", "uniform TVD", "worst value", "true share", f"{evaluated} share", "error"],
        [[c["column"], _fmt(c["tvd"]), _fmt(c["uniform_tvd"]), c["worst_value"],
          _pct(c["true"][c["values"].index(c["worst_value"])]),
          _pct(c["published"][c["values"].index(c["worst_value"])]), _fmt(c["worst_error"])] for c in ordered],
    )


def _pairs_section(document: _Document, report: dict[str, Any], plots: dict[str, str | None]) -> None:
    fidelity = report["fidelity"]
    pairs = fidelity["pairs"]
    document.heading("Every pair of columns: two-way TVD", "pairs")
    if not pairs:
        document.paragraph("The table has one column: there is no pair.")
        return
    heatmap = len(fidelity["columns"]) <= MAX_HEATMAP_COLUMNS
    document.paragraph(
        f"The TVD of the joint distribution of each pair of columns ({fidelity['pairs_rule']})"
        + ("; grey cells are pairs not evaluated." if heatmap and report["fidelity"]["pairs_total"] > len(pairs)
           else "; with more than 100 columns, a histogram of the pairs' TVDs." if not heatmap else ".")
    )
    document.figure(plots.get("pairs"), "two-way TVD of every evaluated pair of columns")
    document.paragraph("The worst pairs:")
    worst = sorted(pairs, key=lambda p: -p["tvd"])[:12]
    document.table(
        ["pair", "TVD", "worst cell", "true share", f"{fidelity['evaluated']} share"],
        [[" x ".join(p["columns"]), _fmt(p["tvd"]), " / ".join(p["worst_cell"]), _pct(p["worst_true"]),
          _pct(p["worst_published"])] for p in worst],
    )


def _worst_cells_section(document: _Document, report: dict[str, Any]) -> None:
    fidelity = report["fidelity"]
    document.heading("The worst cells", "worst-cells")
    document.paragraph(f"The single values whose share in the {fidelity['evaluated']} is furthest from the truth.")
    document.table(
        ["column", "value", "true share", f"{fidelity['evaluated']} share", "error"],
        [[c["column"], c["value"], _pct(c["true"]), _pct(c["published"]), _fmt(c["error"])]
         for c in fidelity["worst_cells"]],
    )


def _workload_section(document: _Document, report: dict[str, Any], plots: dict[str, str | None]) -> None:
    workload = report["workload"]
    document.heading("The workload", "workload")
    document.paragraph(
        f"Workload: {workload['description']}; {_fmt(workload['queries'])} positive queries in "
        f"{_fmt(workload['marginals'])} marginals. {report['answers']}"
    )
    document.table(
        ["answers", "max error", "mean error", "RMSE"],
        [[label, _fmt(row["max_error"]), _fmt(row["mean_error"]), _fmt(row["rmse"])]
         for label, row in report["errors"].items() if row],
    )
    document.figure(plots.get("workload"), "workload error of each answer set: max and mean, separate log scales")
    parts = report["workload_parts"]
    if len(parts) > 1:
        labels = [label for label in parts[0]["errors"] if label in ("synthetic", "published rows", "uniform")
                  or label.startswith("independent Gaussian")]
        document.paragraph("Max error by workload part:")
        document.table(
            ["part", "marginals", "queries", *labels],
            [[p["part"], _fmt(p["marginals"]), _fmt(p["queries"]),
              *[_fmt(p["errors"][label]["max_error"]) for label in labels]] for p in parts],
        )
    document.heading("Worst marginals of the workload", "worst-marginals", level=3)
    document.paragraph("The synthetic answers' largest error within each marginal (the 15 worst).")
    document.figure(plots.get("marginals"), "largest error within each workload marginal (the 25 worst)")
    document.table(["marginal", "max error"],
                   [[m["marginal"], _fmt(m["max_error"])] for m in report["per_marginal_max_error"][:15]])


def _mechanism_sections(document: _Document, report: dict[str, Any], plots: dict[str, str | None]) -> None:
    if plots.get("rounds"):
        document.heading("Error versus round", "rounds")
        document.paragraph("The workload error of the records produced up to each round (internal diagnostics).")
        document.figure(plots["rounds"], "max and mean error of the records so far, separate log scales")
    solver = report["solver"]
    if solver is not None:
        document.heading("Oracle", "oracle")
        document.paragraph(
            f"Best-response calls by solver status: {_counts(solver['status_counts'])}; record source: "
            f"{_counts(solver['source_counts'])}. Seconds per round: median {_fmt(solver['median_seconds'])}, 95th "
            f"percentile {_fmt(solver['p95_seconds'])}, max {_fmt(solver['max_seconds'])}."
        )
        document.figure(plots.get("solver"), "oracle seconds per round")


def _privacy_section(document: _Document, report: dict[str, Any]) -> None:
    document.heading("Privacy spent", "privacy")
    rows = []
    for mode, cost in report["privacy"].items():
        charged = "charged" if mode == report["accounting"] else "not charged (for comparison)"
        rows.append([mode, charged, _fmt(cost["epsilon"], 5), _fmt(cost["delta"]),
                     _fmt(cost["rho"], 5), cost["method"]])
    document.table(["accounting", "ledger", "epsilon", "delta", "rho", "analysis"], rows)
    document.heading("Mechanism parameters", "parameters", level=3)
    document.table(["parameter", "value"], [list(row) for row in _flatten(report["parameters"])])


def _document(report: dict[str, Any], plots: dict[str, str | None]) -> _Document:
    document = _Document()
    document.heading(f"Error report: {report['release']} (run {report['run_id']})", level=1)
    _summary(document, report)
    _fidelity_section(document, report)
    _columns_section(document, report, plots)
    _pairs_section(document, report, plots)
    _worst_cells_section(document, report)
    _workload_section(document, report, plots)
    _mechanism_sections(document, report, plots)
    _privacy_section(document, report)
    return document


def _plots(report: dict[str, Any]) -> dict[str, str | None]:
    """Every chart; the columns' small multiples (the costliest) are drawn in the side process, if one runs."""
    fidelity = report["fidelity"]
    names = [c["column"] for c in fidelity["columns"]]
    columns = side_process.begin(_columns_plot, fidelity["columns"], fidelity["evaluated"])
    plots = {
        "column_tvd": _column_tvd_plot(fidelity["columns"], fidelity["evaluated"]),
        "pairs": _pairs_plot(fidelity["pairs"], names),
        "workload": _workload_plot(report["errors"]),
        "marginals": _marginals_plot(report["per_marginal_max_error"]),
        "rounds": _rounds_plot(report["error_by_round"]),
        "solver": _solver_plot(report["solver"]["per_round_seconds"]) if report["solver"] else None,
    }
    return {"columns": columns.result(), **plots}


def warm_up() -> None:
    """Load matplotlib's PNG backend and a font (what the side process does before it draws)."""
    figure = Figure(figsize=(1, 1))
    figure.text(0.5, 0.5, "0")
    _png(figure)


def write_error_report(report: dict[str, Any], directory: Path) -> dict[str, Path]:
    """Write ``error_report.json``, ``error_report.md`` and ``error_report.html`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": directory / "error_report.json",
        "markdown": directory / "error_report.md",
        "html": directory / "error_report.html",
    }
    paths["json"].write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    plots = _plots(report)
    document = _document(report, plots)
    paths["markdown"].write_text(f"**{INTERNAL_BANNER}**\n\n" + _markdown(document))
    paths["html"].write_text(_html(document, f"INTERNAL error report: {report['release']}"))
    return paths
