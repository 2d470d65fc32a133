"""The internal error report: its numbers, its sections per mechanism, and its HTML as a browser renders it.

Reports are built from real mechanism runs (through the registry's plan and run) on a small seeded table with
value labels; no Prefect server is needed. The browser test renders the HTML in headless Chromium and is
skipped, with the reason, only when no Chromium is installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from dq_engine import Dataset, Domain, answer_workload, make_rng
from dq_engine.data.domain import Attribute
from dq_engine.data.workload import concatenate_workloads, kway_marginals
from dq_engine.privacy.public import PublicQuantities
from dqrelease.mechanisms import MECHANISMS, PlanInputs, RunInputs, plan_mechanism, run_mechanism
from dqrelease.outputs.report import _fmt, build_error_report, write_error_report
from tests.budgets import study_grant

N = 600
COLUMNS = {
    "colour": ("red", "green", "blue"),
    "size": ("S", "M", "L", "XL"),
    "shape": ("round", "square"),
    "grade": ("A", "B", "C", "D", "E"),
}
COMMON_SECTIONS = ("summary", "fidelity", "columns", "pairs", "worst-cells", "workload", "worst-marginals", "privacy")
MECHANISM_KEYS = {
    "dualquery": {"eta": 1.0, "samples": 40, "rounds": 4},
    "mwem": {},
    "randomized_response": {},
}


@pytest.fixture(scope="module")
def table() -> tuple[Dataset, object]:
    return toy_table()


def toy_table() -> tuple[Dataset, object]:
    """A small correlated table and its all 1-way + 2-way workload."""
    domain = Domain(tuple(Attribute(name=name, size=len(labels), labels=labels) for name, labels in COLUMNS.items()))
    rng = make_rng(21)
    colour = rng.choice(3, size=N, p=[0.6, 0.3, 0.1])
    size = np.minimum(colour + rng.integers(0, 2, N), 3)  # correlated with colour
    shape = rng.integers(0, 2, N)
    grade = rng.choice(5, size=N, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    data = Dataset.from_codes(domain, np.stack([colour, size, shape, grade], axis=1))
    parts = [kway_marginals(domain, k, rng=make_rng(k)) for k in (1, 2)]
    return data, concatenate_workloads(parts)


def _report(table, mechanism: str, directory: Path, *, epsilon: float = 2.0) -> dict:
    data, workload = table
    public = PublicQuantities(n=data.n, epsilon=epsilon, delta=1e-6, domain=data.domain, n_queries=len(workload),
                              n_marginals=workload.n_marginals)
    keys = MECHANISMS[mechanism].keys(**MECHANISM_KEYS[mechanism])
    plan = plan_mechanism(keys, PlanInputs(public=public, mode="tight", deterministic=True))
    result = run_mechanism(study_grant(plan, directory), RunInputs(data=data, workload=workload, rng=make_rng(5)))
    codes = result.sample_rows(data.n, make_rng(6)) if mechanism != "randomized_response" else result.records
    report = build_error_report(
        data=data, workload=workload, result=result, costs=plan.costs, published_codes=codes, rng=make_rng(7),
        release_name="toy", run_id="run-1", delta=1e-6, accounting=plan.mode,
    )
    write_error_report(report, directory)
    return report


@pytest.fixture(scope="module")
def reports(table, tmp_path_factory) -> dict[str, tuple[dict, Path]]:
    out = {}
    for mechanism, epsilon in (("dualquery", 2.0), ("mwem", 2.0), ("randomized_response", 6.0)):
        directory = tmp_path_factory.mktemp(mechanism)
        out[mechanism] = (_report(table, mechanism, directory, epsilon=epsilon), directory)
    return out


# ---------------------------------------------------------------------- numbers
def test_the_json_holds_the_fidelity_of_the_published_rows_and_the_baselines(reports, table):
    data, workload = table
    report, directory = reports["dualquery"]
    on_disk = json.loads((directory / "error_report.json").read_text())
    assert on_disk == json.loads(json.dumps(report))

    results = report["fidelity"]["results"]
    assert list(results) == ["synthetic", "published rows", "zeros", "uniform",
                             *[k for k in results if k.startswith("independent")]]
    published = results["published rows"]
    assert published["headline"] == max(published[k] for k in ("max_one_way_tvd", "worst_one_way_cell",
                                                                "max_two_way_tvd", "workload_max_error"))
    assert report["summary"]["headline"] == published["headline"]
    assert report["summary"]["distinct_published_rows"] == published["distinct_rows"]
    assert report["fidelity"]["pairs_rule"] == "all 6 pairs of columns"
    # the workload figures are the same numbers in the errors table and in the fidelity results
    for label, errors in report["errors"].items():
        assert errors["max_error"] == results[label]["workload_max_error"]
    # per column: the shares are the true and published one-way marginals
    truth = answer_workload(data, workload)
    colour = next(c for c in report["fidelity"]["columns"] if c["column"] == "colour")
    np.testing.assert_allclose(colour["true"], truth[:3])
    assert colour["values"] == ["red", "green", "blue"]


def test_the_summary_names_the_charged_accounting_and_shows_the_other_as_secondary(reports):
    report, directory = reports["mwem"]
    summary = report["summary"]
    assert summary["accounting"] == "tight"
    assert summary["epsilon"] == report["privacy"]["tight"]["epsilon"]
    assert set(summary["other_accounting"]) == {"paper"}
    markdown = (directory / "error_report.md").read_text()
    assert "under tight accounting: this is what the budget ledger was charged" in markdown
    assert "paper accounting would give epsilon" in markdown and "(not charged)" in markdown


def test_few_distinct_rows_and_a_release_worse_than_uniform_are_warned_about(reports, table):
    data, workload = table
    records = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 1], [2, 3, 1, 4]])  # 4 records, like 4 rounds
    result = _result_with_records(data, records)
    costs = {"tight": _cost(), "paper": _cost()}
    few = build_error_report(data=data, workload=workload, result=result, costs=costs,
                             published_codes=result.sample_rows(N, make_rng(1)), rng=make_rng(2), release_name="toy",
                             run_id="r", delta=1e-6)
    warnings = " ".join(few["summary"]["warnings"])
    assert few["summary"]["distinct_true_rows"] == len(data.codes) > 40  # 4 < 10 % of the true distinct rows
    assert "Only 4 distinct rows among 600 published rows (the true table has" in warnings
    assert "the most repeated row appears 150 times" in warnings
    rr_warnings = " ".join(reports["randomized_response"][0]["summary"]["warnings"])
    rr = reports["randomized_response"][0]["fidelity"]["results"]["published rows"]
    uniform = reports["randomized_response"][0]["fidelity"]["results"]["uniform"]
    assert (rr["headline"] >= uniform["headline"]) == ("no better than uniform random data" in rr_warnings)


def test_randomized_response_answers_with_its_estimator_and_scores_its_published_rows(reports):
    report, _ = reports["randomized_response"]
    results = report["fidelity"]["results"]
    assert "unbiased estimator" in report["answers"]
    assert results["synthetic"]["max_one_way_tvd"] is None  # estimator answers: workload figures only
    assert results["published rows"]["distinct_rows"] is not None
    assert report["solver"] is None


def test_sections_fit_the_mechanism(reports):
    assert reports["dualquery"][0]["solver"]["status_counts"]
    assert reports["mwem"][0]["solver"] is None
    for mechanism, (_, directory) in reports.items():
        markdown = (directory / "error_report.md").read_text()
        assert ("## Oracle" in markdown) == (mechanism == "dualquery")


def test_published_rows_breaking_a_declared_rule_are_counted(table, tmp_path):
    from dq_engine.data.constraints import Constraints

    data, workload = table
    rule = Constraints(domain=data.domain, combinations=(("no blue S", ((0, (2,)), (1, (0,)))),))
    codes = np.array([[2, 0, 0, 0], [2, 0, 1, 1], [0, 0, 0, 0], [2, 1, 0, 0]] * 150)  # 300 rows are blue S
    result = _result_with_records(data, codes)
    costs = {"tight": _cost(), "paper": _cost()}
    report = build_error_report(data=data, workload=workload, result=result, costs=costs, published_codes=codes,
                                rng=make_rng(1), release_name="toy", run_id="r", delta=1e-6, constraints=rule)
    published = report["fidelity"]["results"]["published rows"]
    assert (published["constraint_violations"], published["constraint_violation_share"]) == (300, 0.5)
    assert report["fidelity"]["results"]["uniform"]["constraint_violations"] is None
    assert any("300 published rows (50%) break a declared constraint" in w for w in report["summary"]["warnings"])
    write_error_report(report, tmp_path)
    assert "| rows breaking a constraint | 300 | 300 |" in (tmp_path / "error_report.md").read_text()


def _result_with_records(data, codes):
    from dq_engine import SynthesisResult

    return SynthesisResult(mechanism="mwem", domain=data.domain, records=codes, parameters={}, events=(),
                           costs={}, n=data.n)


def _cost():
    from dq_engine.privacy.accounting import ComposedCost

    return ComposedCost(mode="tight", epsilon=1.0, delta=1e-6, rho=None, pure_epsilon=None, method="test")


@pytest.mark.parametrize(("value", "text"), [(1e-09, "1e-9"), (4.11e-05, "4.11e-5"), (48842, "48,842"),
                                             (0.07734, "0.0773"), (None, "n/a"), (0.0, "0"), (2.5e12, "2.5e12")])
def test_numbers_are_formatted_for_people(value, text):
    assert _fmt(value) == text


def test_markdown_has_no_raw_dicts_or_backticks(reports):
    for _, directory in reports.values():
        markdown = (directory / "error_report.md").read_text()
        assert markdown.splitlines()[0].startswith("**INTERNAL")
        assert "`" not in markdown
        assert not re.search(r"\{['\"]", markdown)


# ---------------------------------------------------------------------- the page in a browser
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _Page(HTMLParser):
    """Collects ids, images, number spans and the visible text of a rendered page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.images: list[str] = []
        self.text: list[str] = []
        self.numbers: list[str] = []
        self._in_number = False
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes:
            self.ids.add(attributes["id"])
        if tag == "img":
            self.images.append(attributes.get("src", ""))
        if tag in ("style", "script", "title"):
            self._skip += 1
        self._in_number = tag == "span" and attributes.get("class") == "num"

    def handle_endtag(self, tag):
        if tag in ("style", "script", "title"):
            self._skip -= 1
        self._in_number = False

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            if self._in_number:
                self.numbers.append(data)


def _render(html_file: Path) -> _Page:
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium found (chromium, chromium-browser or google-chrome); install it with "
                    "`apt-get install -y chromium` (.ci/run does) to render the report")
    completed = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--dump-dom", html_file.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )
    page = _Page()
    page.feed(completed.stdout)
    return page


@pytest.mark.parametrize("mechanism", ["dualquery", "mwem", "randomized_response"])
def test_the_rendered_page_has_its_sections_and_no_raw_dicts_or_backticks(reports, mechanism):
    report, directory = reports[mechanism]
    page = _render(directory / "error_report.html")
    text = " ".join(page.text)

    assert set(COMMON_SECTIONS) <= page.ids
    assert ("oracle" in page.ids) == (mechanism == "dualquery")
    assert text.lstrip().startswith("INTERNAL - NOT FOR RELEASE")
    assert page.ids & {"summary"} and text.index("Summary") < text.index("Fidelity")
    for term in ("synthetic", "published rows", "positive queries", "TVD"):
        assert f"{term} " in text  # defined on the first screen
    assert "`" not in text
    assert not re.search(r"\{['\"]", text), "a raw dict reached the page"
    assert all(src.startswith("data:image/png;base64,") for src in page.images) and len(page.images) >= 4
    # numbers that could break at a hyphen or comma are kept whole (white-space: nowrap on span.num)
    scientific = set(re.findall(r"(?<![\w.])\d(?:\.\d+)?e-\d+", text))
    assert scientific <= set(page.numbers)
    assert ("1e-6" in scientific) == (mechanism != "randomized_response")  # delta charged (pure epsilon for RR)
    assert f"{report['n']:,}" in page.numbers
    headline = _fmt(report["summary"]["headline"])
    assert headline in page.numbers  # the page shows the JSON's number
