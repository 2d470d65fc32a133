"""The error report's pages: Jinja2 renders the report's dict and its charts into Markdown and HTML.

The layout is in ``templates/`` (package data, hashed into the run's ``code_sha256`` with the code):

* ``report.md.j2`` and ``report.html.j2``: the two pages (the HTML page's head, style sheet and banner);
* ``_sections.j2``: the report's content, every heading, sentence and table in order, shared by both pages so
  that they say the same thing;
* ``_blocks.md.j2`` and ``_blocks.html.j2``: how each format writes a block (heading, paragraph, list, terms,
  table, figure).

The templates are fed ``report``, the dict written as ``error_report.json`` (:mod:`.data`), and ``plots``, the
charts by name (:data:`.charts.CHARTS`: a base64 PNG, or None where a chart does not apply). Nothing is
recomputed and there is no view function: what the pages derive from the dict (which rows a table shows, in
which order, the sentences around the numbers) is written in the templates, with the filters registered here
for what templates do badly: ``fmt`` and ``pct`` (numbers for people, :mod:`.formatting`), ``parameter_rows``
(the mechanism's nested parameters as rows), and for HTML ``html_text`` and ``html_escape``; the test
``numeric_text`` right-aligns the table cells that are numbers.

Escaping: ``_sections.j2`` composes plain text (it is not autoescaped) and writes nothing itself; every text
reaches the HTML page through ``html_text`` or ``html_escape``, which escape with :func:`html.escape` (quotes as
``&#x27;`` and ``&quot;``, as the page always has). Autoescape is on for every ``*.html.j2`` template, so a value
written there without a filter is escaped too. A key missing from the dict raises
:class:`jinja2.UndefinedError` (``StrictUndefined``), never a blank.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Mapping
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from dqrelease.outputs.report.charts import MAX_HEATMAP_COLUMNS, MAX_PANELS, TOP_VALUES, WORST_MARGINALS
from dqrelease.outputs.report.formatting import fmt, pct

__all__ = ["environment", "html_escape", "html_text", "numeric_text", "parameter_rows", "render_html",
           "render_markdown"]

NUMBER = re.compile(r"(?<![\w.#-])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?%?(?![\w])")
"""A number as the report writes it (``1e-9``, ``48,842``, ``70.8%``), not inside a word or an entity."""


def html_escape(text: Any) -> Markup:
    """``text`` escaped for HTML by :func:`html.escape` (quotes too)."""
    return Markup(html.escape(str(text)))


def html_text(text: Any) -> Markup:
    """``text`` escaped for HTML, its numbers in ``span.num`` so that they never break across lines."""
    return Markup(NUMBER.sub(lambda m: f"<span class='num'>{m.group(0)}</span>", html.escape(str(text))))


def numeric_text(text: str) -> bool:
    """True for a table cell that is a number or ``n/a`` (right-aligned); text stays left-aligned."""
    return text == "n/a" or NUMBER.fullmatch(text) is not None


def parameter_rows(parameters: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """The mechanism's parameters as ``(name, value)`` rows.

    Nested tables are flattened to dotted names (``fit.rounds``), numbers written to 6 significant digits (3 in
    a list), lists joined with commas.
    """
    rows = []
    for key, value in parameters.items():
        if isinstance(value, dict):
            rows += parameter_rows(value, f"{prefix}{key}.")
        elif isinstance(value, list | tuple):
            rows.append((prefix + key, ", ".join(fmt(v) if isinstance(v, float | int) else str(v) for v in value)))
        elif isinstance(value, float | int):
            rows.append((prefix + key, fmt(value, 6)))
        else:
            rows.append((prefix + key, str(value)))
    return rows


@functools.cache
def environment() -> Environment:
    """The report's Jinja2 environment (built once per process): templates, filters and chart limits.

    Block tags take their line break with them (``trim_blocks``, ``lstrip_blocks``), so a template's lines of
    text are the page's lines.
    """
    env = Environment(
        loader=PackageLoader("dqrelease.outputs.report", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False, default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        extensions=["jinja2.ext.do"],
    )
    env.filters.update(fmt=fmt, pct=pct, parameter_rows=parameter_rows, html_text=html_text, html_escape=html_escape)
    env.tests["numeric_text"] = numeric_text
    env.globals.update(max_panels=MAX_PANELS, max_heatmap_columns=MAX_HEATMAP_COLUMNS, top_values=TOP_VALUES,
                       worst_marginals=WORST_MARGINALS)
    return env


def render_markdown(report: Mapping[str, Any], plots: Mapping[str, str | None]) -> str:
    """``error_report.md``: the report's dict as Markdown (a figure is named, not shown)."""
    return environment().get_template("report.md.j2").render(report=report, plots=plots)


def render_html(report: Mapping[str, Any], plots: Mapping[str, str | None]) -> str:
    """``error_report.html``: the report's dict as a self-contained page, the charts embedded as base64 PNGs."""
    return environment().get_template("report.html.j2").render(report=report, plots=plots)
