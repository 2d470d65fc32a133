"""The error report labels every value as the published table writes it (``output.single_value_numbers``).

A schema with an integer column of one-value buckets, one wider bucket and a missing bucket (``years``), a float
column whose buckets are one wide (``weight``, intervals whatever their width) and a categorical column. Its
report is built on a small seeded table and written as JSON, Markdown and HTML for each output setting; the
labels are compared with what :func:`~dqrelease.outputs.decode.decode_records` publishes for the same codes.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dq_engine import Dataset, SynthesisResult, make_rng
from dq_engine.data.workload import concatenate_workloads, kway_marginals
from dq_engine.privacy.accounting import ComposedCost
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.schema import Schema
from dqrelease.outputs.decode import decode_records, published_labels
from dqrelease.outputs.report import build_error_report, n_status, write_error_report
from dqrelease.outputs.report.charts import column_panel

SCHEMA = Schema.model_validate({"columns": [
    {"name": "years", "type": "integer", "edges": [14, 15, 16, 17, 20], "nullable": True, "missing_bucket": True},
    {"name": "weight", "type": "float", "edges": [0, 1, 2]},
    {"name": "colour", "type": "categorical", "values": ["red", "green"]},
]})
N = 400
NUMBERS = ["14", "15", "16", "[17, 20)", "missing"]
INTERVALS = ["[14, 15)", "[15, 16)", "[16, 17)", "[17, 20)", "missing"]
SETTINGS = {
    "numbers": {"numeric_values": "bucket_label", "single_value_numbers": True},
    "intervals": {"numeric_values": "bucket_label", "single_value_numbers": False},
    "uniform": {"numeric_values": "uniform", "single_value_numbers": True},
}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, tuple[dict, str, str, str]]:
    """Per output setting: the report dict and its JSON, Markdown and HTML files' text."""
    domain = domain_from_columns(SCHEMA.columns)
    rng = make_rng(3)
    codes = np.stack([rng.integers(0, column.size, N) for column in SCHEMA.columns], axis=1)
    data = Dataset.from_codes(domain, codes)
    workload = concatenate_workloads([kway_marginals(domain, k, rng=make_rng(k)) for k in (1, 2)])
    records = codes[:30]  # a few records, so that the published rows are visibly off
    result = SynthesisResult(mechanism="mwem", domain=domain, records=records, parameters={}, events=(), costs={},
                             n=N)
    cost = ComposedCost(mode="tight", epsilon=1.0, delta=1e-6, rho=None, pure_epsilon=None, method="test")
    out = {}
    for name, settings in SETTINGS.items():
        report = build_error_report(
            data=data, workload=workload, result=result, costs={"tight": cost, "paper": cost},
            published_counts=np.bincount(result.sample_index(N, make_rng(4)), minlength=len(records)),
            rng=make_rng(5), release_name="labels", run_id="r",
            delta=1e-6, neighbouring="replace-one", n_status=n_status(N),
            labels=published_labels(SCHEMA, **settings),
        )
        directory = tmp_path_factory.mktemp(name)
        paths = write_error_report(report, directory)
        out[name] = (report, *(Path(paths[kind]).read_text() for kind in ("json", "markdown", "html")))
    return out


def _columns(report: dict) -> dict[str, dict]:
    return {column["column"]: column for column in report["fidelity"]["columns"]}


def _html_cells(page: str) -> list[list[str]]:
    """The HTML tables' rows as their cells' plain text."""
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", page)]


def _cells_of(report_rows: list[list[str]], column: str) -> set[str]:
    """The second cells of the rows whose first cell is ``column`` (the worst cells table's values, etc.)."""
    return {row[1] for row in report_rows if len(row) > 1 and row[0] == column}


@pytest.mark.parametrize("setting", ["numbers", "intervals"])
def test_every_value_label_is_what_the_published_table_writes_for_that_code(written, setting):
    every_code = np.stack([np.minimum(np.arange(5), column.size - 1) for column in SCHEMA.columns], axis=1)
    frame = decode_records(every_code, SCHEMA, rng=make_rng(0), **SETTINGS[setting])
    columns = _columns(written[setting][0])
    for column in SCHEMA.columns:
        published = ["missing" if pd.isna(value) else str(value) for value in frame[column.name]]
        assert columns[column.name]["values"] == published[: column.size]


def test_one_value_integer_buckets_are_numbers_in_the_json_markdown_and_html(written):
    report, text, markdown, page = written["numbers"]
    columns = _columns(report)
    assert columns["years"]["values"] == NUMBERS
    assert columns["weight"]["values"] == ["[0, 1)", "[1, 2)"]  # float buckets stay intervals
    assert json.loads(text)["value_labels"] == {"numeric_values": "bucket_label", "single_value_numbers": True,
                                                "numeric_columns": ["years", "weight"]}
    for output in (text, markdown, page):
        assert "[16, 17)" not in output and "[14, 15)" not in output
    # the worst cells table lists all 9 cells; the per-column panel draws the same labels
    assert "| years | 16 |" in markdown and "| years | [17, 20) |" in markdown
    assert {"16", "[17, 20)"} <= _cells_of(_html_cells(page), "years")
    assert column_panel(columns["years"])["labels"] == NUMBERS
    labels = {name: set(column["values"]) for name, column in columns.items()}
    for pair in report["fidelity"]["pairs"]:
        assert all(value in labels[name] for name, value in zip(pair["columns"], pair["worst_cell"], strict=True))
    for result in report["fidelity"]["results"].values():
        at = result["worst_one_way_cell_at"]
        assert at is None or at["value_label"] == columns[at["column"]]["values"][at["value"]]
    note = "a bucket that holds one integer as that number (output.single_value_numbers)."
    assert note in markdown and note in page


def test_with_the_option_off_every_bucket_is_its_interval(written):
    report, _, markdown, page = written["intervals"]
    assert _columns(report)["years"]["values"] == INTERVALS
    assert "| years | [16, 17) |" in markdown and "[16, 17)" in _cells_of(_html_cells(page), "years")
    assert "| years | 16 |" not in markdown and "16" not in _cells_of(_html_cells(page), "years")
    note = "every numeric bucket as its interval [lo, hi)."
    assert note in markdown and note in page


def test_with_uniform_values_the_report_keeps_the_bucket_and_says_so(written):
    report, _, markdown, page = written["uniform"]
    assert _columns(report)["years"]["values"] == INTERVALS
    assert "| years | [16, 17) |" in markdown
    note = ("Numbers are labelled by their bucket, the interval [lo, hi): the published table has numbers drawn "
            "uniformly inside each bucket instead")
    assert note in markdown and note in page.replace("&quot;", '"')


def test_labels_of_another_schema_are_refused():
    other = Schema.model_validate({"columns": [{"name": "x", "type": "integer", "edges": [0, 1, 2]}]})
    domain = domain_from_columns(SCHEMA.columns)
    data = Dataset.from_codes(domain, np.zeros((4, 3), dtype=np.int64))
    workload = kway_marginals(domain, 1, rng=make_rng(1))
    result = SynthesisResult(mechanism="mwem", domain=domain, records=data.codes, parameters={}, events=(),
                             costs={}, n=4)
    cost = ComposedCost(mode="tight", epsilon=1.0, delta=1e-6, rho=None, pure_epsilon=None, method="test")
    with pytest.raises(ValueError, match="the value labels name 1 columns but the data has 3"):
        build_error_report(data=data, workload=workload, result=result, costs={"tight": cost, "paper": cost},
                           published_counts=None, rng=make_rng(2), release_name="labels", run_id="r", delta=1e-6,
                           neighbouring="replace-one", n_status=n_status(4),
                           labels=published_labels(other, numeric_values="bucket_label"))
