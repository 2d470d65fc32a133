r"""Fidelity of a release: how far its rows are from the true table, on what a statistician checks first.

Every figure is a fraction of records in [0, 1], computed from contingency tables (one weighted ``bincount``
per marginal through :class:`~dq_engine.data.marginal_tables.MarginalIndex`, after merging duplicate rows):

* **one-way** -- for every column, the total variation distance (TVD) between the column's true and released
  distributions, ``½ Σ_v |p_v - q_v|``, which is the largest error of *any* question about that column
  ("what share of records has a value in this set?"), and the **worst cell**: the value with the largest
  ``|p_v - q_v|``, with its column and value index;
* **two-way** -- the TVD of the joint distribution of every pair of columns. Wide schemas use a public sample
  of pairs (:func:`~dq_engine.data.workload.kway_attribute_sets`): every pair when there are at most
  :data:`MAX_PAIRS` (2,000: every pair of up to 63 columns), else 2,000 distinct pairs drawn uniformly by a
  generator seeded with the public constant :data:`PAIR_SEED`; the pairs depend on the number of columns
  only, never on the data;
* **workload** -- max, mean and RMSE of the absolute error over the configured workload's positive queries;
* **rows** -- the number of rows, of distinct rows and the largest multiplicity of one row (for a weighted
  distribution: records with positive weight and the largest weight share);
* **constraints** -- the rows breaking a declared constraint (any object with ``feasible(codes) -> bool
  array``); None when no constraints are declared.

**Headline.** The worst figure, never the best-looking one: ``headline = max(max one-way TVD, worst one-way
cell, max two-way TVD, workload max error)`` over the figures that apply. It bounds the error of every
question about one column, every question about an evaluated pair of columns, and every workload query.
For distributions the two-way TVD of a pair is at least the one-way TVD of either column, which is at least
that column's worst cell, so with every pair evaluated the headline is ``max(max two-way TVD, workload max)``.

**Baselines** at the same budget: ``zeros`` (every cell 0; not a distribution, so its "TVD" is half its L1
error, 0.5) and ``uniform`` (the uniform distribution over the domain) get the one-way, two-way and workload
figures; answers-only baselines (independent noisy marginals) get only the workload figures; no baseline has
rows.

Everything here is computed on the true data: it is **internal** and must never be released.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from dq_engine.data.answers import answer_workload, error_summary, uniform_answers
from dq_engine.data.dataset import Dataset
from dq_engine.data.domain import Domain
from dq_engine.data.marginal_tables import MarginalIndex
from dq_engine.data.rows import unique_rows
from dq_engine.data.workload import MAX_KWAY_MARGINALS, Workload, kway_attribute_sets, marginal_queries
from dq_engine.evaluation.baselines import zeros_answers
from dq_engine.privacy.rng import make_rng

__all__ = [
    "HEADLINE_DEFINITION",
    "HEADLINE_FIGURES",
    "MAX_PAIRS",
    "PAIR_SEED",
    "Fidelity",
    "FidelityEvaluation",
    "FidelityMarginals",
    "FidelityReference",
    "SupportsFeasible",
    "evaluate_answers",
    "evaluate_baselines",
    "evaluate_release",
    "evaluate_rows",
    "fidelity_marginals",
    "fidelity_reference",
    "value_label",
]

MAX_PAIRS = MAX_KWAY_MARGINALS
"""Every pair of columns is evaluated up to this many pairs; above it, a public sample of this many."""

PAIR_SEED = 0
"""Public seed of the pair sample of wide schemas (a constant: the sample never depends on the data)."""

ROUND_OFF = 1e-12
"""Cell differences below this are floating-point round-off of shares (e.g. ``1/3`` summed two ways) and count
as 0; a real difference of two shares of at most a million rows each is at least ``1e-12``."""

HEADLINE_FIGURES = ("max_one_way_tvd", "worst_one_way_cell", "max_two_way_tvd", "workload_max_error")
"""The figures whose maximum is the headline (see the module docstring)."""

HEADLINE_DEFINITION = (
    "the worst of: the largest one-way TVD, the worst one-way cell, the largest two-way TVD and the workload's "
    "max error (over the figures that apply); it bounds the error of every question about one column, about an "
    "evaluated pair of columns, and of every workload query"
)
"""The headline's definition in words (the report prints it)."""


class SupportsFeasible(Protocol):
    """Declared constraints: which records (value codes ``(r, m)``) satisfy every constraint."""

    def feasible(self, codes: np.ndarray) -> np.ndarray:
        """Bool array ``(r,)``: True where the record breaks no constraint."""
        ...


# ---------------------------------------------------------------------- the marginals compared
@dataclass(frozen=True, kw_only=True, eq=False)
class FidelityMarginals:
    """The public marginals the evaluation compares: every column, and every (or a sampled) pair.

    Attributes:
        domain: The public domain.
        index: Cell layout of the ``m`` one-way marginals (marginals ``0 .. m-1``, column ``j`` is marginal
            ``j``) followed by the pairs (marginal ``m + i`` is ``pairs[i]``).
        pairs: Column indices of the evaluated pairs, shape ``(P, 2)``, ascending.
        n_pairs_total: Number of pairs of the schema, ``C(m, 2)``.
        rule: Public, one-line description of how the pairs were chosen.
    """

    domain: Domain
    index: MarginalIndex
    pairs: np.ndarray
    n_pairs_total: int
    rule: str

    @property
    def n_columns(self) -> int:
        """Number of columns ``m``."""
        return len(self.domain)

    @property
    def sampled(self) -> bool:
        """True when the pairs are a sample of the schema's pairs."""
        return len(self.pairs) < self.n_pairs_total


def fidelity_marginals(domain: Domain, *, max_pairs: int = MAX_PAIRS, seed: int = PAIR_SEED) -> FidelityMarginals:
    """The one-way marginals and the evaluated pairs of ``domain`` (public: depends on the schema only).

    Args:
        domain: The public domain.
        max_pairs: Every pair is evaluated up to this many pairs; above it, a public sample of this many.
        seed: Public seed of that sample.
    """
    m = len(domain)
    if m >= 2:
        pair_sets, total = kway_attribute_sets(m, 2, rng=make_rng(seed), limit=max_pairs)
    else:
        pair_sets, total = [], 0
    sets = [(j,) for j in range(m)] + pair_sets
    # marginal_queries orders sets by (k, attributes): the one-way marginals come first, column by column
    workload = marginal_queries(domain, sets, description="fidelity marginals", max_queries=2**62)
    pairs = np.array(pair_sets, dtype=np.int64).reshape(-1, 2)
    if len(pair_sets) == total:
        rule = f"all {total:,} pairs of columns"
    else:
        rule = (
            f"a public sample of {len(pair_sets):,} of the {total:,} pairs of columns (more than {max_pairs:,}; "
            f"drawn uniformly with the fixed seed {seed}, never from the data)"
        )
    return FidelityMarginals(domain=domain, index=MarginalIndex(workload), pairs=pairs, n_pairs_total=total, rule=rule)


# ---------------------------------------------------------------------- contingency tables
def _merge_rows(
    domain: Domain, codes: np.ndarray, weights: np.ndarray | None, counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (column-major int64, for fast column reads) and their total weight (or count).

    ``counts`` (plain rows, each repeated): rows repeated 0 times are left out, so the distinct rows and their
    counts are those of the expanded rows, bit for bit.
    """
    codes = np.asarray(codes)
    if counts is not None:
        counts = np.asarray(counts)
        kept = counts > 0
        distinct, inverse = unique_rows(codes[kept], domain.sizes, return_inverse=True)
        total = np.bincount(inverse, weights=counts[kept].astype(np.float64), minlength=len(distinct))
    elif weights is None:
        distinct, row_counts = unique_rows(codes, domain.sizes, return_counts=True)
        total = row_counts.astype(np.float64)
    else:
        distinct, inverse = unique_rows(codes, domain.sizes, return_inverse=True)
        total = np.bincount(inverse, weights=np.asarray(weights, dtype=np.float64), minlength=len(distinct))
    return np.asfortranarray(distinct, dtype=np.int64), total


def _tables_from_rows(marginals: FidelityMarginals, codes: np.ndarray, weights: np.ndarray) -> list[np.ndarray]:
    """Contingency table (fractions) of every compared marginal, from distinct rows and their weights."""
    index = marginals.index
    probabilities = weights / weights.sum()
    return [index.table(m, index.cells(m, codes), probabilities) for m in range(index.n_marginals)]


def _tables_from_binary_data(marginals: FidelityMarginals, data: Dataset) -> list[np.ndarray]:
    """Tables of an all-binary dataset kept as bits (sparse or packed layout).

    One-way shares come from the column counts; each pair's 2 x 2 table from ``P(a=1)``, ``P(b=1)`` and
    ``P(a=1, b=1)`` by inclusion-exclusion.
    """
    ones = np.array([counts[1] for counts in data.one_way_counts()], dtype=np.float64) / data.n
    tables = [np.array([1.0 - p, p]) for p in ones]
    if len(marginals.pairs):
        both = answer_workload(data, marginal_queries(data.domain, [tuple(p) for p in marginals.pairs]))
        a, b = ones[marginals.pairs[:, 0]], ones[marginals.pairs[:, 1]]
        cells = np.stack([1.0 - a - b + both, b - both, a - both, both], axis=1)  # C order: 00, 01, 10, 11
        tables += list(cells)
    return tables


@dataclass(frozen=True, kw_only=True, eq=False)
class FidelityReference:
    """The true side of the comparison, computed once per release (private).

    Attributes:
        marginals: The compared marginals.
        tables: True contingency table (fractions) of every compared marginal.
        workload: The configured workload, or None.
        answers: Its true answers, or None.
    """

    marginals: FidelityMarginals
    tables: list[np.ndarray]
    workload: Workload | None = None
    answers: np.ndarray | None = None

    @cached_property
    def workload_index(self) -> MarginalIndex:
        """The workload's cell layout (built on first use)."""
        return MarginalIndex(self.workload)


def fidelity_reference(
    data: Dataset,
    *,
    workload: Workload | None = None,
    true_answers: np.ndarray | None = None,
    marginals: FidelityMarginals | None = None,
) -> FidelityReference:
    """Tables of the true data for the compared marginals, and the workload's true answers.

    Args:
        data: The private dataset (any layout).
        workload: The configured workload, or None to skip the workload figures.
        true_answers: Its exact answers if already computed (else computed here).
        marginals: The compared marginals (default: :func:`fidelity_marginals` of the data's domain).
    """
    marginals = marginals or fidelity_marginals(data.domain)
    if data.codes is not None:
        codes = np.asfortranarray(data.codes, dtype=np.int64)
        tables = _tables_from_rows(marginals, codes, data.counts.astype(np.float64))
    else:
        tables = _tables_from_binary_data(marginals, data)
    if workload is not None and true_answers is None:
        true_answers = answer_workload(data, workload)
    return FidelityReference(marginals=marginals, tables=tables, workload=workload, answers=true_answers)


# ---------------------------------------------------------------------- one evaluated answer set
@dataclass(frozen=True, kw_only=True, eq=False)
class Fidelity:
    """The fidelity figures of one answer set (the release, or a baseline). Figures that do not apply are None.

    Attributes:
        label: What was evaluated (``"published rows"``, ``"synthetic"``, ``"uniform"``, ...).
        one_way_tvd: TVD of every column, shape ``(m,)``.
        one_way_worst_cell: Largest absolute cell error of every column, shape ``(m,)``.
        one_way_worst_value: Value index of that cell, shape ``(m,)``.
        two_way_tvd: TVD of every evaluated pair (``FidelityMarginals.pairs``), shape ``(P,)``.
        tables: The answer set's tables of the compared marginals (for the report's figures).
        workload: ``max_error``, ``mean_error``, ``rmse`` over the workload's positive queries.
        answers: The answer set's workload answers (private through the true data's comparison: internal).
        rows: Number of rows (weighted distributions: None).
        distinct_rows: Distinct rows (weighted distributions: records with positive weight).
        max_multiplicity: Copies of the most repeated row (weighted distributions: None).
        largest_row_share: Largest share of one distinct row (its multiplicity over the rows, or its weight).
        constraint_violations: Rows breaking a declared constraint (weighted distributions: records with
            positive weight that break one); None without constraints.
        constraint_violation_share: Share of the rows (or of the weight) breaking a constraint.
    """

    label: str
    one_way_tvd: np.ndarray | None = None
    one_way_worst_cell: np.ndarray | None = None
    one_way_worst_value: np.ndarray | None = None
    two_way_tvd: np.ndarray | None = None
    tables: list[np.ndarray] | None = None
    workload: dict[str, float] | None = None
    answers: np.ndarray | None = None
    rows: int | None = None
    distinct_rows: int | None = None
    max_multiplicity: int | None = None
    largest_row_share: float | None = None
    constraint_violations: int | None = None
    constraint_violation_share: float | None = None

    def figures(self) -> dict[str, float | None]:
        """The scalar figures (None where they do not apply), including the headline's inputs."""
        one_way = self.one_way_tvd is not None and len(self.one_way_tvd) > 0
        two_way = self.two_way_tvd is not None and len(self.two_way_tvd) > 0
        return {
            "worst_one_way_cell": float(self.one_way_worst_cell.max()) if one_way else None,
            "mean_one_way_tvd": float(self.one_way_tvd.mean()) if one_way else None,
            "max_one_way_tvd": float(self.one_way_tvd.max()) if one_way else None,
            "mean_two_way_tvd": float(self.two_way_tvd.mean()) if two_way else None,
            "max_two_way_tvd": float(self.two_way_tvd.max()) if two_way else None,
            "workload_max_error": None if self.workload is None else self.workload["max_error"],
            "workload_mean_error": None if self.workload is None else self.workload["mean_error"],
            "workload_rmse": None if self.workload is None else self.workload["rmse"],
        }

    @property
    def headline(self) -> float | None:
        """The worst of :data:`HEADLINE_FIGURES` that apply (None if none does)."""
        figures = self.figures()
        values = [figures[name] for name in HEADLINE_FIGURES if figures[name] is not None]
        return max(values) if values else None

    @property
    def headline_figure(self) -> str | None:
        """Which of :data:`HEADLINE_FIGURES` gives the headline."""
        figures = self.figures()
        present = [name for name in HEADLINE_FIGURES if figures[name] is not None]
        return max(present, key=lambda name: figures[name]) if present else None

    def worst_one_way(self) -> tuple[int, int, float] | None:
        """``(column, value, error)`` of the worst one-way cell over all columns, or None."""
        if self.one_way_worst_cell is None or not len(self.one_way_worst_cell):
            return None
        column = int(np.argmax(self.one_way_worst_cell))
        return column, int(self.one_way_worst_value[column]), float(self.one_way_worst_cell[column])

    def as_dict(self, marginals: FidelityMarginals) -> dict[str, Any]:
        """JSON-friendly figures, with column names and value labels (internal)."""
        domain = marginals.domain
        out: dict[str, Any] = {"label": self.label, **self.figures(), "headline": self.headline,
                               "headline_figure": self.headline_figure}
        worst = self.worst_one_way()
        out["worst_one_way_cell_at"] = None if worst is None else {
            "column": domain.names[worst[0]], "value": worst[1], "value_label": value_label(domain, *worst[:2]),
        }
        if self.two_way_tvd is not None and len(self.two_way_tvd):
            i = int(np.argmax(self.two_way_tvd))
            out["max_two_way_tvd_at"] = [domain.names[int(a)] for a in marginals.pairs[i]]
        else:
            out["max_two_way_tvd_at"] = None
        for key in ("rows", "distinct_rows", "max_multiplicity", "largest_row_share", "constraint_violations",
                    "constraint_violation_share"):
            out[key] = getattr(self, key)
        return out


def value_label(domain: Domain, column: int, value: int) -> str:
    """Public label of a value code (the schema's label when the domain has one, else the code)."""
    labels = domain.attributes[column].labels
    return str(labels[value]) if labels is not None else str(value)


def _compare_tables(
    reference: FidelityReference, tables: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    m = reference.marginals.n_columns
    tvd = np.empty(len(tables))
    worst = np.empty(m)
    where = np.empty(m, dtype=np.int64)
    for i, (truth, table) in enumerate(zip(reference.tables, tables, strict=True)):
        error = np.abs(table - truth)
        error[error < ROUND_OFF] = 0.0
        tvd[i] = 0.5 * error.sum()
        if i < m:
            where[i] = int(np.argmax(error))
            worst[i] = error[where[i]]
    return tvd[:m], worst, where, tvd[m:]


def _workload_answers(
    reference: FidelityReference, tables: list[np.ndarray], codes: np.ndarray, mass: np.ndarray
) -> np.ndarray:
    """Workload answers of weighted rows (one table per workload marginal).

    A workload marginal that is also a compared marginal (e.g. every 1-way and 2-way marginal of the default
    workload) is read from the table already built instead of being counted again.
    """
    index = reference.workload_index
    compared = reference.marginals.index
    position = {tuple(attrs.tolist()): m for m, attrs in enumerate(compared.attributes)}
    probabilities = mass / mass.sum()
    starts = index.workload.marginal_starts
    out = np.empty(len(index.workload), dtype=np.float64)
    for m, attrs in enumerate(index.attributes):
        same = position.get(tuple(attrs.tolist()))
        table = tables[same] if same is not None else index.table(m, index.cells(m, codes), probabilities)
        out[starts[m] : starts[m + 1]] = table[index.query_cells[m]]
    return out


def _workload_figures(reference: FidelityReference, answers: np.ndarray | None) -> dict[str, float] | None:
    if reference.workload is None or answers is None:
        return None
    return error_summary(reference.answers, answers)


def evaluate_rows(
    reference: FidelityReference,
    codes: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    label: str,
    constraints: SupportsFeasible | None = None,
    workload_answers: np.ndarray | None = None,
    counts: np.ndarray | None = None,
) -> Fidelity:
    """Every figure of a set of rows (published rows) or of a weighted synthetic distribution.

    Args:
        reference: The true side (:func:`fidelity_reference`).
        codes: Rows as value codes ``(r, m)``.
        weights: Non-negative weight per row (a distribution over the rows), or None for plain rows.
        label: What the rows are.
        constraints: Declared constraints, or None.
        workload_answers: The answers to score on the workload instead of the rows' own (e.g. randomized
            response's unbiased estimator); None: the rows' answers.
        counts: Plain rows given compactly: row ``i`` of ``codes`` stands for ``counts[i]`` identical rows (e.g.
            how many published rows copy each synthetic record). The figures are those of the expanded rows, bit
            for bit, without building them. Not with ``weights``.

    Raises:
        ValueError: If both ``weights`` and ``counts`` are given.
    """
    if weights is not None and counts is not None:
        raise ValueError("give weights (a distribution) or counts (repeated plain rows), not both")
    domain = reference.marginals.domain
    distinct, mass = _merge_rows(domain, codes, weights, counts)
    tables = _tables_from_rows(reference.marginals, distinct, mass)
    one_way, worst, where, two_way = _compare_tables(reference, tables)
    if workload_answers is None and reference.workload is not None:
        workload_answers = _workload_answers(reference, tables, distinct, mass)
    positive = mass > 0
    share = mass / mass.sum()
    violations = share_broken = None
    if constraints is not None:
        broken = ~np.asarray(constraints.feasible(distinct), dtype=bool) & positive
        violations = int(mass[broken].sum()) if weights is None else int(broken.sum())
        share_broken = float(share[broken].sum())
    return Fidelity(
        label=label,
        one_way_tvd=one_way,
        one_way_worst_cell=worst,
        one_way_worst_value=where,
        two_way_tvd=two_way,
        tables=tables,
        workload=_workload_figures(reference, workload_answers),
        answers=workload_answers,
        rows=int(mass.sum()) if weights is None else None,
        distinct_rows=int(positive.sum()),
        max_multiplicity=int(mass.max()) if weights is None else None,
        largest_row_share=float(share.max()),
        constraint_violations=violations,
        constraint_violation_share=share_broken,
    )


def evaluate_answers(reference: FidelityReference, answers: np.ndarray, *, label: str) -> Fidelity:
    """Workload figures only, for an answer set that has no rows (e.g. independent noisy marginals)."""
    return Fidelity(label=label, workload=_workload_figures(reference, answers), answers=answers)


def _evaluate_tables(
    reference: FidelityReference, tables: list[np.ndarray], answers: np.ndarray | None, label: str
) -> Fidelity:
    one_way, worst, where, two_way = _compare_tables(reference, tables)
    return Fidelity(
        label=label, one_way_tvd=one_way, one_way_worst_cell=worst, one_way_worst_value=where, two_way_tvd=two_way,
        tables=tables, workload=_workload_figures(reference, answers), answers=answers,
    )


def evaluate_baselines(
    reference: FidelityReference, noisy_answers: Mapping[str, np.ndarray] | None = None
) -> list[Fidelity]:
    """The baselines' figures: ``zeros`` and ``uniform`` (tables and workload), then each answers-only baseline.

    Args:
        reference: The true side.
        noisy_answers: Workload answers of baselines that spend the release's budget (e.g. independent
            Laplace or Gaussian marginals), by label.
    """
    index = reference.marginals.index
    workload = reference.workload
    zeros = [np.zeros(int(cells)) for cells in index.n_cells]
    uniform = [np.full(int(cells), 1.0 / cells) for cells in index.n_cells]
    results = [
        _evaluate_tables(reference, zeros, None if workload is None else zeros_answers(workload), "zeros"),
        _evaluate_tables(reference, uniform, None if workload is None else uniform_answers(workload), "uniform"),
    ]
    for label, answers in (noisy_answers or {}).items():
        results.append(evaluate_answers(reference, answers, label=label))
    return results


# ---------------------------------------------------------------------- a whole release
@dataclass(frozen=True, kw_only=True, eq=False)
class FidelityEvaluation:
    """The fidelity of a release and of its baselines.

    Attributes:
        reference: The true side (tables, workload, true answers).
        results: Figures by label: the release's answer sets first, then the baselines.
    """

    reference: FidelityReference
    results: dict[str, Fidelity]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly figures of every answer set, plus the rules they follow (internal)."""
        marginals = self.reference.marginals
        return {
            "pairs_rule": marginals.rule,
            "pairs_evaluated": len(marginals.pairs),
            "pairs_total": marginals.n_pairs_total,
            "headline_definition": HEADLINE_DEFINITION,
            "results": {label: result.as_dict(marginals) for label, result in self.results.items()},
        }


def evaluate_release(
    data: Dataset,
    *,
    codes: np.ndarray,
    weights: np.ndarray | None = None,
    label: str = "published rows",
    workload: Workload | None = None,
    true_answers: np.ndarray | None = None,
    constraints: SupportsFeasible | None = None,
    noisy_answers: Mapping[str, np.ndarray] | None = None,
    max_pairs: int = MAX_PAIRS,
    seed: int = PAIR_SEED,
) -> FidelityEvaluation:
    """Evaluate published rows (or a weighted synthetic distribution) against the true data and the baselines.

    Args:
        data: The private dataset.
        codes: The published rows (value codes ``(r, m)``), or the records of a synthetic distribution.
        weights: The distribution's weight per record, or None for plain rows.
        label: What ``codes`` are.
        workload: The configured workload (None: no workload figures).
        true_answers: Its exact answers if already computed.
        constraints: Declared constraints (None: no constraint figure).
        noisy_answers: Workload answers of answers-only baselines at the same budget, by label.
        max_pairs: Pair rule's limit (:data:`MAX_PAIRS`).
        seed: Pair rule's public seed (:data:`PAIR_SEED`).
    """
    marginals = fidelity_marginals(data.domain, max_pairs=max_pairs, seed=seed)
    reference = fidelity_reference(data, workload=workload, true_answers=true_answers, marginals=marginals)
    release = evaluate_rows(reference, codes, weights, label=label, constraints=constraints)
    results = {release.label: release}
    results.update({b.label: b for b in evaluate_baselines(reference, noisy_answers)})
    return FidelityEvaluation(reference=reference, results=results)
