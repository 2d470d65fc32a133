"""The error report's numbers: the dict written as ``error_report.json``, computed on the true private data.

:func:`build_error_report` computes every figure the report shows (the pages, :mod:`.render`, and the charts,
:mod:`.charts`, read this dict and compute nothing more): the summary with its plain-language warnings, the
fidelity evaluation (:mod:`dq_engine.evaluation.fidelity`) of the published rows, of the mechanism's synthetic
distribution and of the baselines at the same budget, per column, per pair and per workload part, the worst
cells and marginals, error versus round, the oracle's solver statistics and the privacy spent.

The release's workload answers are those of its synthetic distribution, except for randomized response: its
published rows are the randomized records, whose raw answers are biased towards the uniform distribution, so
its answers are randomized response's unbiased estimator applied to them
(:func:`~dq_engine.mechanisms.randomized_response.estimate_answers`). All answering goes through contingency
tables (:class:`~dq_engine.data.marginal_tables.MarginalIndex`), never through the one-hot encoding.

Every value is labelled as the published table writes it (:func:`dqrelease.outputs.decode.published_labels`, the
labels decoding uses): ``16``, not ``[16, 17)``, for a one-value integer bucket published as a number.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from dq_engine import ComposedCost, Dataset, Domain, SynthesisResult, Workload, answer_workload, error_summary
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
from dqrelease.outputs.report.formatting import fmt, pct

if TYPE_CHECKING:
    from dqrelease.outputs.decode import PublishedLabels

__all__ = [
    "COMPARED_FIGURES",
    "INTERNAL_BANNER",
    "NEIGHBOURING",
    "baseline_comparisons",
    "build_error_report",
    "cited",
    "gaussian_baseline_rho",
    "n_status",
    "release_answers",
    "rounds_stages",
]

INTERNAL_BANNER = (
    "INTERNAL - NOT FOR RELEASE: this report is computed on the true private data and is not differentially private."
)

COMPARED_FIGURES = {
    "headline": "headline (worst of four)",
    "worst_one_way_cell": "worst one-way cell",
    "max_one_way_tvd": "largest one-way TVD",
    "mean_one_way_tvd": "mean one-way TVD",
    "max_two_way_tvd": "largest two-way TVD",
    "mean_two_way_tvd": "mean two-way TVD",
    "workload_max_error": "workload max error",
    "workload_mean_error": "workload mean error",
    "workload_rmse": "workload RMSE",
}
"""The error figures the release is compared with every baseline on, by key of the fidelity results, with their
names. A baseline is compared on a figure only where it has one (answers-only baselines: the workload's three);
the headline only where a baseline has all four of its parts, so that like is compared with like."""

REFERENCES = {
    "Gaboardi et al. 2014": (
        "Gaboardi, Gallego Arias, Hsu, Roth, Wu 2014: Dual Query: Practical Private Query Release for High "
        "Dimensional Data"
    ),
    "Vietri, Tian, Bun, Steinke, Wu 2020": (
        "Vietri, Tian, Bun, Steinke, Wu 2020: New Oracle-Efficient Algorithms for Private Synthetic Data Release"
    ),
    "Hardt, Ligett": (
        "Hardt, Ligett, McSherry 2012: A Simple and Practical Algorithm for Differentially Private Data Release"
    ),
    "Bun and Steinke 2016": (
        "Bun, Steinke 2016: Concentrated Differential Privacy: Simplifications, Extensions, and Lower Bounds"
    ),
    "Canonne, Kamath, Steinke 2020": "Canonne, Kamath, Steinke 2020: The Discrete Gaussian for Differential Privacy",
    "minimax distortion of query-set-independent mechanisms": (
        "Minimax distortion of query-set-independent mechanisms (no authors or year in the project's copy): "
        "randomized response over the record domain and its unbiased estimators"
    ),
}
"""The papers the report may cite, by the short form its texts use (authors and year), in full: authors, year,
title. The report lists those its texts cite (:func:`cited`)."""

RELEASE_LABELS = ("synthetic", "published rows")
"""The fidelity results of the release itself; every other result is a baseline."""

NEIGHBOURING = {
    "replace-one": "replace-one: neighbouring data sets have the same number of records and differ in one record's "
    "values",
    "add-remove": "add-remove: neighbouring data sets differ by one record added or removed",
}
"""The summary's words for ``privacy.neighbouring``."""

FEW_DISTINCT_SHARE = 0.1
"""The summary warns when the published rows have fewer distinct rows than this share of the true table's
distinct rows (of the published rows when the true table's are not counted, e.g. sparse binary data)."""

DEFINITIONS = {
    "synthetic": (
        "the mechanism's output: its synthetic records (weighted when the mechanism gives weights), the "
        "distribution the published rows are drawn from. For randomized response, the answers of the unbiased "
        "estimator of 'minimax distortion of query-set-independent mechanisms' applied to the randomized records."
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
    "neighbouring relation": (
        "which two data sets differential privacy keeps indistinguishable. Replace-one: data sets of the same size "
        "that differ in one record's values (the number of records is public). Add-remove: data sets that differ "
        "by one record added or removed (the number of records is private too)."
    ),
}
"""Plain-language definitions shown on the report's first screen."""


# ---------------------------------------------------------------------- answers
def release_answers(result: SynthesisResult, workload: Workload) -> tuple[np.ndarray, str]:
    """The workload answers the release gives, and how they are computed (one line for the report)."""
    if result.mechanism == "randomized_response":
        return estimate_answers(result, workload), (
            "Answers: the unbiased estimator of 'minimax distortion of query-set-independent mechanisms' (its "
            "equation 12) applied to the randomized records; the raw answers of those records (the published rows) "
            "are biased towards the uniform distribution."
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
def _published_labels(reference: FidelityReference, labels: PublishedLabels | None) -> FidelityReference:
    """``reference`` with its domain's values labelled as the published table writes them (``labels``).

    Only the labels change (the evaluation reads them through :func:`value_label`); None keeps the domain's.
    """
    if labels is None:
        return reference
    domain = reference.marginals.domain
    if len(labels.labels) != len(domain):
        raise ValueError(
            f"the value labels name {len(labels.labels)} columns but the data has {len(domain)}; "
            "pass published_labels of the release's own schema"
        )
    attributes = tuple(replace(attribute, labels=tuple(published))
                       for attribute, published in zip(domain.attributes, labels.labels, strict=True))
    return replace(reference, marginals=replace(reference.marginals, domain=Domain(attributes)))


def _has_oracle(result: SynthesisResult) -> bool:
    from dqrelease.mechanisms import MECHANISMS

    entry = MECHANISMS.get(result.mechanism)
    return entry.has_oracle if entry is not None else any(d.status != "NOT_RUN" for d in result.diagnostics)


def _release_results(
    reference: FidelityReference,
    result: SynthesisResult,
    published_counts: np.ndarray | None,
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
    if published_counts is not None:
        results.append(evaluate_rows(reference, result.records, counts=published_counts, label="published rows",
                                     constraints=constraints))
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


def baseline_comparisons(results: dict[str, dict[str, Any]], ours: str) -> list[dict[str, Any]]:
    """Every baseline that beats the release ``ours`` on some figure of :data:`COMPARED_FIGURES`.

    Args:
        results: The fidelity results by label, as the report's JSON holds them (``fidelity.results``).
        ours: The label of the release's result compared (``"published rows"``, or ``"synthetic"`` when
            nothing is published).

    Returns:
        One entry per such baseline, in the results' order: ``{"baseline", "answers_only", "figures": [{"figure",
        "name", "baseline", "release"}]}``, a figure where the baseline's value is strictly smaller.
    """
    release = results[ours]
    beaten = []
    for label, baseline in results.items():
        if label in RELEASE_LABELS:
            continue
        answers_only = baseline["max_one_way_tvd"] is None
        figures = [
            {"figure": key, "name": name, "baseline": baseline[key], "release": release[key]}
            for key, name in COMPARED_FIGURES.items()
            if not (key == "headline" and answers_only)
            and baseline[key] is not None and release[key] is not None and baseline[key] < release[key]
        ]
        if figures:
            beaten.append({"baseline": label, "answers_only": answers_only, "figures": figures})
    return beaten


def _comparison_warning(beaten: dict[str, Any], ours: str) -> str:
    figures = "; ".join(f"{f['name']} {fmt(f['baseline'])} against {fmt(f['release'])}" for f in beaten["figures"])
    kind = " (noisy answers to the workload's marginals, not rows)" if beaten["answers_only"] else ""
    return f"The {beaten['baseline']} baseline{kind} beats the {ours} at the same budget on: {figures}."


def _warnings(
    results: dict[str, Fidelity], published: Fidelity | None, true_distinct: int | None,
    beaten: list[dict[str, Any]],
) -> list[str]:
    """Plain-language warnings about the published rows (or the synthetic answers when nothing is published)."""
    ours = published or results["synthetic"]
    name = ours.label
    notes = [_comparison_warning(b, name) for b in beaten]
    expected = min(true_distinct, ours.rows) if true_distinct and ours.rows else ours.rows
    if expected and ours.distinct_rows is not None and ours.distinct_rows < FEW_DISTINCT_SHARE * expected:
        truth = f" (the true table has {true_distinct:,})" if true_distinct else ""
        notes.append(
            f"Only {ours.distinct_rows:,} distinct rows among {ours.rows:,} published rows{truth}: the most "
            f"repeated row appears {ours.max_multiplicity:,} times. Analyses that count distinct records, fit "
            "models or look at rare combinations will mislead."
        )
    if ours.constraint_violations:
        notes.append(
            f"{ours.constraint_violations:,} {name} ({pct(ours.constraint_violation_share)}) break a declared "
            "constraint."
        )
    return notes


CITED_AS = {
    "Gaboardi et al. 2014": re.compile(r"Gaboardi\b[^()]{0,40}?2014"),
    "Vietri, Tian, Bun, Steinke, Wu 2020": re.compile(r"Vietri\b[^()]{0,40}?2020"),
    "Hardt, Ligett": re.compile(r"Hardt, Ligett"),
    "Bun and Steinke 2016": re.compile(r"\bBun (?:and|&) Steinke 2016"),
    "Canonne, Kamath, Steinke 2020": re.compile(r"Canonne\b[^()]{0,40}?2020"),
    "minimax distortion of query-set-independent mechanisms": re.compile(
        r"minimax distortion of query-set-independent mechanisms", re.IGNORECASE
    ),
}
"""How a text cites each paper of :data:`REFERENCES`: first author and year, in any of the short forms the method
lines and the mechanisms' references use ("Vietri et al. 2020", "Vietri, Tian, Bun, Steinke, Wu 2020")."""


def cited(*texts: str) -> list[str]:
    """The full references (:data:`REFERENCES`) of the papers ``texts`` cite, in :data:`REFERENCES`' order."""
    joined = " ".join(texts)
    return [reference for short, reference in REFERENCES.items() if CITED_AS[short].search(joined)]


def n_status(declared: int | str, n_epsilon: float = 0.0) -> str:
    """The summary's words for how the number of records was known (``privacy.n`` and ``privacy.n_epsilon``)."""
    if declared == "noisy":
        return (
            f"private: the release planned with a noisy count of the records (Laplace, epsilon {fmt(n_epsilon)}, "
            "charged to the ledger); the true n is shown here because this report is internal"
        )
    return "public: declared in the config (privacy.n) and checked against the source, not estimated from the data"


def rounds_stages(mechanism: str, parameters: dict[str, Any]) -> dict[str, str]:
    """What each round's error curve shows, by diagnostics ``source`` class: ``"mechanism"`` and ``"table fit"``.

    A mechanism with a table fit (a ``fit`` section in its parameters) first runs its own rounds, whose records
    are not what is published, then fits a table to them; the published rows are drawn from the fitted table.
    """
    fit = parameters.get("fit")
    if isinstance(fit, dict) and fit.get("rounds"):
        return {"mechanism": f"{mechanism}'s own records, before the table fit", "table fit": "the fitted table"}
    return {"mechanism": f"{mechanism}'s records so far"}


def build_error_report(
    *,
    data: Dataset,
    workload: Workload,
    result: SynthesisResult,
    costs: dict[str, ComposedCost],
    published_counts: np.ndarray | None,
    rng: np.random.Generator,
    release_name: str,
    run_id: str,
    delta: float,
    neighbouring: str,
    n_status: str,
    accounting: str = "tight",
    constraints: SupportsFeasible | None = None,
    true_answers: np.ndarray | None = None,
    labels: PublishedLabels | None = None,
) -> dict[str, Any]:
    """Compute the report's numbers (internal).

    Args:
        data: The private dataset.
        workload: The workload.
        result: The mechanism's output.
        costs: The privacy cost charged for the mechanism, per accounting mode (the plan's).
        published_counts: How many of the rows actually published copy each of ``result.records``
            (:meth:`dqrelease.outputs.published_rows.PublishedRows.record_counts`): the published rows are evaluated
            from them, as well as the synthetic distribution, with the same figures as from the rows themselves.
        rng: Generator for the noisy baselines (their noise never leaves the report).
        release_name: Public name of the release.
        run_id: Run id.
        delta: The mechanism's target δ (sizes the Gaussian baseline when the cost is pure ε).
        neighbouring: The neighbouring relation of the guarantee (``privacy.neighbouring``: ``"replace-one"``
            or ``"add-remove"``).
        n_status: How the number of records was known, in words (public and declared, or a charged noisy count).
        accounting: The accounting mode charged to the ledger (``costs[accounting]`` was charged).
        constraints: Declared constraints (an object with ``feasible(codes)``), or None.
        true_answers: The workload's exact answers if already computed.
        labels: How the published table writes each value (:func:`dqrelease.outputs.decode.published_labels`),
            the labels of every table and chart; None: the domain's own labels.
    """
    truth = answer_workload(data, workload) if true_answers is None else true_answers
    reference = _published_labels(fidelity_reference(data, workload=workload, true_answers=truth), labels)
    tight = costs["tight"]
    laplace_label = f"independent Laplace (eps={fmt(tight.epsilon)})"
    rho = gaussian_baseline_rho(tight, delta)
    gaussian_label = f"independent Gaussian (rho={fmt(rho)}, zCDP)"
    laplace, _ = independent_laplace_answers(data, workload, truth, epsilon=tight.epsilon, rng=rng)
    gaussian, _ = independent_gaussian_answers(data, workload, truth, rho=rho, rng=rng)

    ours, answers_note = _release_results(reference, result, published_counts, constraints)
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
    evaluation = _evaluation_dict(reference, results)
    beaten = baseline_comparisons(evaluation["results"], rows_figures.label)
    stages = rounds_stages(result.mechanism, result.parameters)
    return {
        "banner": INTERNAL_BANNER,
        "release": release_name,
        "run_id": run_id,
        "mechanism": result.mechanism,
        "summary": {
            "mechanism": result.mechanism,
            "mechanism_reference": _mechanism_reference(result.mechanism),
            "accounting": accounting,
            "neighbouring": NEIGHBOURING[neighbouring],
            "n_status": n_status,
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
            "baseline_headlines": {b.label: b.headline for b in baselines if b.one_way_tvd is not None},
            "beaten_by": beaten,
            "warnings": _warnings(results, published, true_distinct, beaten),
            "definitions": DEFINITIONS,
        },
        "parameters": result.parameters,
        "n": result.n,
        "workload": {"description": workload.description, "queries": len(workload), "marginals": workload.n_marginals},
        "answers": answers_note,
        "errors": {label: r.workload for label, r in results.items()},
        "value_labels": None if labels is None else labels.as_dict(),
        "fidelity": {
            **evaluation,
            "evaluated": shown.label,
            "columns": columns,
            "pairs": _pair_details(reference, shown) if shown.tables is not None else [],
            "worst_cells": _worst_cells(columns),
        },
        "workload_parts": _parts(workload, truth, {label: r.answers for label, r in results.items()}),
        "per_marginal_max_error": [{"marginal": names[i], "max_error": float(per_marginal[i])} for i in order],
        "error_by_round": [
            {"round": d.round, "stage": "table fit" if d.source == "mw" and "table fit" in stages else "mechanism",
             "max_error": d.internal_max_error, "mean_error": d.internal_mean_error}
            for d in diagnostics
            if d.internal_max_error is not None
        ],
        "rounds_stages": stages,
        "references": cited(_mechanism_reference(result.mechanism), answers_note, *DEFINITIONS.values(),
                            *(cost.method for cost in costs.values())),
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
