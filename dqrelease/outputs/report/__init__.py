"""The internal error report: how far the release is from the truth, and from the baselines at the same budget.

The report is computed on the true private data, so it is **internal**: it says so on its first line, it is
written next to (not inside) the published table's files, and it must not be released.

What it holds (the JSON carries every number the Markdown and HTML pages show; both pages are rendered from
the JSON's dict, never recomputed):

* a **summary** -- mechanism (its paper by authors, title and year), the (ε, δ) charged and under which
  accounting (the other accounting is a secondary figure), the neighbouring relation, whether ``n`` is public
  or a noisy count, published rows, distinct rows, the headline compared like with like (the same figure for
  the release and each baseline) and plain-language warnings, one for each baseline that beats the release
  on any figure;
* the **fidelity evaluation** (:mod:`dq_engine.evaluation.fidelity`) of the published rows, of the mechanism's
  synthetic distribution and of the baselines (zeros, uniform, independent Laplace and Gaussian marginals):
  one-way TVD and worst cell per column, two-way TVD of every pair (a public sample on wide schemas), workload
  max / mean / RMSE, distinct rows and the largest multiplicity, constraint violations;
* true-versus-published bars for every column (small multiples), the two-way TVD heat map, the worst cells
  and pairs, every value named as the published table writes it (``16`` for a one-value bucket published as a
  number, :func:`dqrelease.outputs.decode.published_labels`);
* the workload's errors, per part and per marginal; error versus round where the mechanism tracks it; the
  oracle's solver statistics only for mechanisms with an oracle; the privacy spent in both accountings; the
  papers cited; the mechanism's parameters (collapsed in HTML, last in Markdown).

Formats: JSON, Markdown, and a self-contained HTML page with matplotlib plots embedded as base64 PNGs.

The package, one module a concept: :mod:`.data` computes the dict (:func:`build_error_report`), :mod:`.charts`
draws it, :mod:`.render` lays it out through the Jinja2 templates in ``templates/``, :mod:`.formatting` writes
its numbers for people; :func:`write_error_report` writes the three files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dqrelease.outputs.private_files import write_internal
from dqrelease.outputs.report.charts import draw, warm_up
from dqrelease.outputs.report.data import (
    INTERNAL_BANNER,
    build_error_report,
    gaussian_baseline_rho,
    n_status,
    release_answers,
)
from dqrelease.outputs.report.formatting import fmt
from dqrelease.outputs.report.render import render_html, render_markdown

__all__ = [
    "INTERNAL_BANNER",
    "build_error_report",
    "fmt",
    "gaussian_baseline_rho",
    "n_status",
    "release_answers",
    "render_html",
    "render_markdown",
    "warm_up",
    "write_error_report",
]

_fmt = fmt  # the name this module had before it became a package (tests/pipeline/test_error_report.py imports it)


def write_error_report(report: dict[str, Any], directory: Path) -> dict[str, Path]:
    """Write ``error_report.json``, ``error_report.md`` and ``error_report.html`` into ``directory``.

    The pages are rendered from ``report``, the dict the JSON holds, and its charts (:func:`.charts.draw`). Each
    file is INTERNAL: created owner-only (0600) from the start
    (:func:`~dqrelease.outputs.private_files.write_internal`).
    """
    paths = {
        "json": directory / "error_report.json",
        "markdown": directory / "error_report.md",
        "html": directory / "error_report.html",
    }
    write_internal(paths["json"], json.dumps(report, indent=2, sort_keys=False) + "\n")
    plots = draw(report)
    write_internal(paths["markdown"], render_markdown(report, plots))
    write_internal(paths["html"], render_html(report, plots))
    return paths
