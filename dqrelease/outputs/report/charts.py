"""The error report's charts: matplotlib figures drawn from the report's dict, each a base64 PNG for the HTML page.

Every chart reads only the report's dict (what ``error_report.json`` holds), never the data. The columns' small
multiples, the costliest, are drawn in the side process when one runs (:mod:`dqrelease.runtime.side_process`);
the others here. Figures are made with :class:`matplotlib.figure.Figure` (no pyplot state) and saved at a fixed
size and margins, so the same report gives the same PNG bytes.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator

from dqrelease.outputs.report.formatting import fmt
from dqrelease.runtime import side_process

__all__ = ["CHARTS", "MAX_HEATMAP_COLUMNS", "MAX_PANELS", "TOP_VALUES", "WORST_MARGINALS", "column_panel", "draw",
           "warm_up"]

CHARTS = ("columns", "column_tvd", "pairs", "workload", "marginals", "rounds", "solver")
"""The charts :func:`draw` returns, by name (the pages' templates look them up by these names)."""

MAX_PANELS = 30
"""Columns drawn as small multiples (the largest TVDs first when the schema has more)."""

TOP_VALUES = 12
"""Bars a column's panel draws at most: a wider column shows 11 values and one "other" bar (:func:`column_panel`)."""

WORST_MARGINALS = 15
"""Workload marginals the report's worst-marginals chart and table show (the worst first): one number for both."""

MAX_HEATMAP_COLUMNS = 100
"""Above this many columns the pair heat map becomes a histogram of the pairs' TVDs."""


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


def column_panel(column: dict[str, Any]) -> dict[str, Any]:
    """What a column's panel draws: at most :data:`TOP_VALUES` bars, the rest added up in one "other" bar.

    A column with more values keeps the ``TOP_VALUES - 1`` values with the largest true or published share and
    its worst value, in the column's own order (buckets stay ordered), and adds up the others' shares in a last
    bar ``other (k values)``. Labels are written whole.

    Returns:
        ``{"labels", "true", "published", "worst"}``: the bars' labels, shares, and the index of the worst value.
    """
    values, true, published = column["values"], column["true"], column["published"]
    worst = values.index(column["worst_value"])
    if len(values) <= TOP_VALUES:
        return {"labels": list(values), "true": list(true), "published": list(published), "worst": worst}
    by_share = sorted(range(len(values)), key=lambda i: -max(true[i], published[i]))
    kept = sorted({worst, *[i for i in by_share if i != worst][: TOP_VALUES - 2]})
    rest = [i for i in range(len(values)) if i not in set(kept)]
    return {
        "labels": [values[i] for i in kept] + [f"other ({len(rest)} values)"],
        "true": [true[i] for i in kept] + [float(sum(true[i] for i in rest))],
        "published": [published[i] for i in kept] + [float(sum(published[i] for i in rest))],
        "worst": kept.index(worst),
    }


def _columns_plot(columns: list[dict[str, Any]], evaluated: str) -> str | None:
    """Small multiples of horizontal bars, two panels a row, every label whole and horizontal."""
    if not columns:
        return None
    shown = sorted(columns, key=lambda c: -c["tvd"])[:MAX_PANELS] if len(columns) > MAX_PANELS else columns
    panels = [column_panel(column) for column in shown]
    per_row, fontsize, slot, gap = 2, 8, 0.3, 0.8  # slot: inches per value; gap: title and x labels between rows
    rows = math.ceil(len(panels) / per_row)
    bars = [max(len(p["labels"]) for p in panels[r * per_row:(r + 1) * per_row]) for r in range(rows)]
    heights = [slot * k + 0.15 for k in bars]
    label = _text_inches([text for p in panels for text in p["labels"]], fontsize) + 0.15
    width, right = 12.0, 0.25
    axis_width = (width - label - right - (per_row - 1) * (label + 0.35)) / per_row
    total = sum(heights) + gap * (rows - 1) + 0.45 + 0.55
    figure = Figure(figsize=(width, total))
    axes = figure.subplots(rows, per_row, squeeze=False, gridspec_kw={"height_ratios": heights})
    figure.subplots_adjust(left=label / width, right=1 - right / width, top=1 - 0.45 / total, bottom=0.55 / total,
                           wspace=(label + 0.35) / axis_width, hspace=gap / (sum(heights) / rows))
    for index, (axis, column, panel) in enumerate(zip(axes.ravel(), shown, panels, strict=False)):
        k = len(panel["labels"])
        y = np.arange(k)
        top = max(max(panel["true"]), max(panel["published"]))
        logarithmic = _dominated(panel["true"])
        if logarithmic:  # one value holds most records: a linear axis would hide every other value
            positive = [v for v in (*panel["true"], *panel["published"]) if v > 0]
            _log_scale(axis.xaxis)
            low = max(min(positive) / 2, 1e-6)
            axis.set_xlim(low, top * 1.5)
        else:
            low = 0.0
            axis.set_xlim(0, top * 1.12 or 1)
            axis.xaxis.set_major_formatter(_percent_formatter())
        _bars(axis, y - 0.2, panel["true"], bottom=low, horizontal=True, facecolors=TRUE_COLOUR, label="true")
        _bars(axis, y + 0.2, panel["published"], bottom=low, horizontal=True, facecolors=OUR_COLOUR, label=evaluated)
        worst = panel["worst"]
        _bars(axis, [worst + 0.2], [panel["published"][worst]], bottom=low, horizontal=True, facecolors=OUR_COLOUR,
              edgecolors="#c0392b", linewidths=1.5)
        axis.set_ylim(bars[index // per_row] - 0.5, -0.5)  # the first value on top; bars as thick in every panel
        scale = ", log scale" if logarithmic else ""
        axis.set_title(f"{column['column']}  (TVD {fmt(column['tvd'], 2)}{scale})", fontsize=9, loc="left")
        axis.set_yticks(y)
        axis.set_yticklabels(panel["labels"], fontsize=fontsize)
        axis.tick_params(axis="x", labelsize=7)
    for axis in axes.ravel()[len(shown):]:
        axis.set_visible(False)
    axes.ravel()[0].legend(fontsize=7, loc="lower right")
    return _png(figure)


def _bars(axis, x, heights, *, bottom: float, width: float = 0.4, horizontal: bool = False, **style: Any) -> None:
    """Bars from ``bottom`` as one collection (``Axes.bar`` makes a patch per bar: most of a chart's time).

    ``horizontal``: ``x`` are the bars' positions on the y axis and ``heights`` their lengths along x. The axis's
    limits are left to the caller.
    """
    from matplotlib.collections import PolyCollection

    left = np.asarray(x, dtype=float) - width / 2
    top = np.maximum(np.asarray(heights, dtype=float), bottom)
    low = np.full_like(left, bottom)
    corners = np.stack([np.stack(pair, axis=1) for pair in
                        ((left, low), (left, top), (left + width, top), (left + width, low))], axis=1)
    if horizontal:
        corners = corners[:, :, ::-1]
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
            axis.text(max(value, floor), i, f" {fmt(value)}", va="center", fontsize=7)
        axis.set_xlim(floor / 1.5, values.max() * 6 if values.max() > 0 else 1)
    left.set_yticks(y)
    left.set_yticklabels(labels, fontsize=8)
    left.invert_yaxis()
    _margins(figure, left=_text_inches(labels, 8) + 0.2, bottom=0.45, right=0.25, wspace=0.08)
    return _png(figure)


def _rounds_plot(rounds: list[dict[str, Any]], stages: dict[str, str], published: dict[str, Any] | None,
                 published_label: str) -> str | None:
    """Error after each round, one line per stage, and a dashed line at the release's own figure.

    The stages are the mechanism's own records and, with a table fit, the fitted table; the dashed line is the
    published rows' (or the synthetic distribution's) figure, what the release is judged by.
    """
    series = [(key, [r[key] for r in rounds]) for key in ("max_error", "mean_error")]
    series = [(key, values) for key, values in series if any(v for v in values if v is not None)]
    if not rounds or not series:
        return None
    figure = Figure(figsize=(11, 3.2))
    axes = figure.subplots(1, len(series), squeeze=False).ravel()
    colours = {"mechanism": BASELINE_COLOUR, "table fit": OUR_COLOUR}
    for axis, (key, _) in zip(axes, series, strict=True):
        for stage, description in stages.items():
            points = [(r["round"], r[key]) for r in rounds if r.get("stage", "mechanism") == stage]
            if points:
                x, values = zip(*points, strict=True)
                axis.plot(x, [v if v and v > 0 else np.nan for v in values], color=colours[stage], linewidth=1,
                          label=description)
        figure_key = "workload_max_error" if key == "max_error" else "workload_mean_error"
        final = (published or {}).get(figure_key)
        if final:
            axis.axhline(final, color=OUR_COLOUR, linestyle="--", linewidth=1, label=f"{published_label}: {fmt(final)}")
        _log_scale(axis.yaxis)
        axis.set_xlabel("round")
        axis.set_title(f"workload {key.replace('_', ' ')} (log scale)", fontsize=9)
        axis.legend(fontsize=7, loc="best")
    _margins(figure, left=0.6, bottom=0.5, wspace=0.2)
    return _png(figure)


def _marginals_plot(per_marginal: list[dict[str, Any]]) -> str | None:
    top = per_marginal[:WORST_MARGINALS]
    if not top:
        return None
    figure = Figure(figsize=(7, max(2.5, 0.24 * len(top) + 0.8)))
    axis = figure.subplots()
    labels = [m["marginal"] for m in top]
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



def draw(report: dict[str, Any]) -> dict[str, str | None]:
    """Every chart of ``report`` by name (:data:`CHARTS`), a base64 PNG or None where the chart does not apply.

    The columns' small multiples (the costliest) are drawn in the side process, if one runs.
    """
    fidelity = report["fidelity"]
    names = [c["column"] for c in fidelity["columns"]]
    columns = side_process.begin(_columns_plot, fidelity["columns"], fidelity["evaluated"])
    plots = {
        "column_tvd": _column_tvd_plot(fidelity["columns"], fidelity["evaluated"]),
        "pairs": _pairs_plot(fidelity["pairs"], names),
        "workload": _workload_plot(report["errors"]),
        "marginals": _marginals_plot(report["per_marginal_max_error"]),
        "rounds": _rounds_plot(report["error_by_round"], report["rounds_stages"],
                               fidelity["results"].get(report["summary"]["headline_of"]),
                               report["summary"]["headline_of"]),
        "solver": _solver_plot(report["solver"]["per_round_seconds"]) if report["solver"] else None,
    }
    return {"columns": columns.result(), **plots}


def warm_up() -> None:
    """Load matplotlib's PNG backend and a font (what the side process does before it draws)."""
    figure = Figure(figsize=(1, 1))
    figure.text(0.5, 0.5, "0")
    _png(figure)

