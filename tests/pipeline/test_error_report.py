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
from dqrelease.outputs.report import _fmt, build_error_report, n_status, write_error_report
from dqrelease.outputs.report.charts import TOP_VALUES, WORST_MARGINALS, column_panel
from dqrelease.outputs.report.data import COMPARED_FIGURES, REFERENCES, RELEASE_LABELS, baseline_comparisons
from tests.budgets import study_grant

N = 600
COLUMNS = {
    "colour": ("red", "green", "blue"),
    "size": ("S", "M", "L", "XL"),
    "shape": ("round", "square"),
    "grade": ("A", "B", "C", "D", "E"),
}
COMMON_SECTIONS = ("summary", "fidelity", "columns", "pairs", "worst-cells", "workload", "worst-marginals", "privacy")
PUBLIC_N = {"neighbouring": "replace-one", "n_status": n_status(N)}
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
    records = len(result.records)
    if mechanism != "randomized_response":  # as the pipeline publishes them: the rows' counts per record
        counts = np.bincount(result.sample_index(data.n, make_rng(6)), minlength=records)
    else:
        counts = np.ones(records, dtype=np.int64)
    report = build_error_report(
        data=data, workload=workload, result=result, costs=plan.costs, published_counts=counts, rng=make_rng(7),
        release_name="toy", run_id="run-1", delta=1e-6, accounting=plan.mode, **PUBLIC_N,
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
                             published_counts=np.bincount(result.sample_index(N, make_rng(1)), minlength=4),
                             rng=make_rng(2), release_name="toy",
                             run_id="r", delta=1e-6, **PUBLIC_N)
    warnings = " ".join(few["summary"]["warnings"])
    assert few["summary"]["distinct_true_rows"] == len(data.codes) > 40  # 4 < 10 % of the true distinct rows
    assert "Only 4 distinct rows among 600 published rows (the true table has" in warnings
    assert "the most repeated row appears 150 times" in warnings
    uniform_beats = [b for b in few["summary"]["beaten_by"] if b["baseline"] == "uniform"]
    assert uniform_beats, "four records drawn 150 times each are worse than uniform on some figure"
    assert "The uniform baseline beats the published rows at the same budget on: " in warnings


# ---------------------------------------------------------------------- comparisons with the baselines
def test_every_baseline_that_beats_the_release_on_any_figure_is_warned_about(reports):
    for mechanism, (report, directory) in reports.items():
        results = report["fidelity"]["results"]
        ours = results[report["summary"]["headline_of"]]
        warnings = report["summary"]["warnings"]
        for label, baseline in results.items():
            if label in RELEASE_LABELS:
                continue
            answers_only = baseline["max_one_way_tvd"] is None
            beaten = [name for key, name in COMPARED_FIGURES.items()
                      if baseline[key] is not None and ours[key] is not None and baseline[key] < ours[key]
                      and not (key == "headline" and answers_only)]
            warned = [w for w in warnings if w.startswith(f"The {label} baseline")]
            assert bool(warned) == bool(beaten), (mechanism, label)
            for name in beaten:
                assert f"{name} " in warned[0], (mechanism, label, name)
        markdown = (directory / "error_report.md").read_text()
        assert ("No warning" in markdown) == (not warnings)


def test_a_gaussian_baseline_better_on_the_workload_max_alone_is_a_warning():
    results = {
        "published rows": {**dict.fromkeys(COMPARED_FIGURES, 0.05), "headline": 0.0957, "workload_max_error": 0.0144,
                           "max_one_way_tvd": 0.01},
        "uniform": {**dict.fromkeys(COMPARED_FIGURES, 0.9), "max_one_way_tvd": 0.9},
        "independent Gaussian (rho=0.01, zCDP)": {
            **dict.fromkeys(COMPARED_FIGURES), "headline": 0.00937, "workload_max_error": 0.00937,
            "workload_mean_error": 0.5, "workload_rmse": 0.5,
        },
    }
    [beaten] = baseline_comparisons(results, "published rows")
    assert beaten["baseline"] == "independent Gaussian (rho=0.01, zCDP)" and beaten["answers_only"]
    # its "headline" is its workload max alone: compared as the workload max, not against the worst of four
    assert [f["figure"] for f in beaten["figures"]] == ["workload_max_error"]
    assert (beaten["figures"][0]["baseline"], beaten["figures"][0]["release"]) == (0.00937, 0.0144)


def test_the_headline_compares_like_with_like(reports):
    report, directory = reports["dualquery"]
    results = report["fidelity"]["results"]
    answers_only = [label for label, r in results.items() if r["max_one_way_tvd"] is None]
    assert answers_only and not set(answers_only) & set(report["summary"]["baseline_headlines"])
    markdown = (directory / "error_report.md").read_text()
    headline_row = next(line for line in markdown.splitlines() if line.startswith("| headline"))
    cells = [cell.strip() for cell in headline_row.strip("|").split("|")][1:]
    for label, cell in zip(results, cells, strict=True):
        assert (cell == "n/a") == (label in answers_only), label
    assert "so they have no headline; compare them on the workload max error" in markdown


def test_the_summary_states_the_neighbouring_relation_and_whether_n_is_public(reports, table, tmp_path):
    report, directory = reports["mwem"]
    summary = report["summary"]
    assert summary["neighbouring"].startswith("replace-one: neighbouring data sets have the same number of records")
    assert summary["n_status"].startswith("public: declared in the config")
    markdown = (directory / "error_report.md").read_text()
    assert f"- **Neighbouring relation**: {summary['neighbouring']}" in markdown
    assert f"- **Number of records (n)**: {summary['n_status']}" in markdown
    noisy = n_status("noisy", 0.05)
    assert noisy.startswith("private: the release planned with a noisy count") and "epsilon 0.05" in noisy


def test_papers_are_cited_by_authors_year_and_title_never_by_file_numbers(reports):
    for _, (report, directory) in reports.items():
        text = (directory / "error_report.md").read_text() + (directory / "error_report.html").read_text()
        assert not re.search(r"seed 00\d|CKS 20|HLM 20|file 00\d", text)
        assert report["references"] and set(report["references"]) <= set(REFERENCES.values())
    dualquery = reports["dualquery"][0]
    assert "Gaboardi et al. 2014" in dualquery["summary"]["mechanism_reference"]
    assert REFERENCES["Gaboardi et al. 2014"] in dualquery["references"]
    assert REFERENCES["Canonne, Kamath, Steinke 2020"] in dualquery["references"]  # the tight conversion


def test_one_number_of_worst_marginals_for_text_caption_and_table():
    from dqrelease.outputs.report import render_markdown
    from dqrelease.outputs.report.charts import CHARTS

    report = json.loads((Path(__file__).parent / "data" / "error_report_adult.json").read_text())
    assert len(report["per_marginal_max_error"]) > WORST_MARGINALS  # the stored Adult report has 20
    markdown = render_markdown(report, {name: "PNG" for name in CHARTS})
    section = markdown.split("### Worst marginals of the workload")[1].split("\n## ")[0]
    assert set(re.findall(r"the (\d+) worst", section)) == {str(WORST_MARGINALS)}  # text and caption
    rows = re.findall(r"^\| (?!marginal )[^|]+ \| [\d.e-]+ \|$", section, re.M)
    assert len(rows) == WORST_MARGINALS


def test_error_versus_round_says_it_is_before_the_table_fit(reports):
    report, directory = reports["dualquery"]
    assert "table fit" in report["rounds_stages"]  # DualQuery's records are fitted to a table before publishing
    markdown = (directory / "error_report.md").read_text()
    assert "## Error versus round, before the table fit" in markdown
    assert "These records are not what is published" in markdown
    mwem = (reports["mwem"][1] / "error_report.md").read_text()
    assert ("before the table fit" in mwem) == ("table fit" in reports["mwem"][0]["rounds_stages"])


def test_a_wide_column_is_drawn_as_its_top_values_and_other():
    values = [f"Country-with-a-long-name-{i}" for i in range(41)]
    true = np.r_[0.9, np.full(40, 0.1 / 40)]
    published = true[::-1] / true.sum()
    column = {"column": "native-country", "tvd": 0.1, "uniform_tvd": 0.9, "values": values, "true": list(true),
              "published": list(published), "worst_value": values[20], "worst_error": 0.1}
    panel = column_panel(column)
    assert len(panel["labels"]) == TOP_VALUES
    assert panel["labels"][-1] == f"other ({41 - (TOP_VALUES - 1)} values)"
    assert panel["labels"][panel["worst"]] == values[20]  # the worst value is always shown
    assert values[0] in panel["labels"] and values[40] in panel["labels"]  # the largest true and published shares
    assert all(label in values for label in panel["labels"][:-1])  # whole labels, none cut
    assert sum(panel["true"]) == pytest.approx(1.0) and sum(panel["published"]) == pytest.approx(1.0)
    narrow = {**column, "values": values[:5], "true": list(true[:5]), "published": list(published[:5]),
              "worst_value": values[3]}
    assert column_panel(narrow)["labels"] == values[:5]


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
    report = build_error_report(data=data, workload=workload, result=result, costs=costs,
                                published_counts=np.ones(len(codes), dtype=np.int64), rng=make_rng(1),
                                release_name="toy", run_id="r", delta=1e-6, constraints=rule,
                                **PUBLIC_N)
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


_BLOCKS = {"p", "li", "dt", "dd", "td", "th", "tr", "h1", "h2", "h3", "figcaption", "summary", "table", "ul", "dl"}


class _Page(HTMLParser):
    """Collects ids, images (and their alt texts), number spans, ``<details>`` and the visible text of a page.

    ``details`` maps each ``<details>`` element's id to ``(open, ids inside it, text inside it)``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.images: list[str] = []
        self.alts: list[str] = []
        self.text: list[str] = []
        self.numbers: list[str] = []
        self.details: dict[str, tuple[bool, set[str], list[str]]] = {}
        self._open_details: list[str] = []
        self._in_number = False
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes:
            self.ids.add(attributes["id"])
            for name in self._open_details:
                self.details[name][1].add(attributes["id"])
        if tag in _BLOCKS:
            self.handle_data(" ")  # a block's text never runs into the next one's
        if tag == "details":
            name = attributes.get("id", f"details-{len(self.details)}")
            self.details[name] = ("open" in attributes, set(), [])
            self._open_details.append(name)
        if tag == "img":
            self.images.append(attributes.get("src", ""))
            self.alts.append(attributes.get("alt", ""))
        if tag in ("style", "script", "title"):
            self._skip += 1
        self._in_number = tag == "span" and attributes.get("class") == "num"

    def handle_endtag(self, tag):
        if tag in ("style", "script", "title"):
            self._skip -= 1
        if tag == "details" and self._open_details:
            self._open_details.pop()
        self._in_number = False

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            for name in self._open_details:
                self.details[name][2].append(data)
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


def _summary_checks(page: _Page, report: dict) -> str:
    """Check what every rendered report's summary and layout must show; return the page's text (one line)."""
    text = re.sub(r"\s+", " ", "".join(page.text))
    summary = report["summary"]
    assert f"Neighbouring relation {summary['neighbouring']}" in text
    assert f"Number of records (n) {summary['n_status']}" in text
    for warning in summary["warnings"]:
        assert re.sub(r"\s+", " ", warning) in text
    assert ("No warning" in text) == (not summary["warnings"])
    # the parameters are collapsed: a closed <details> holding the parameters' heading and table
    closed, inside, shown = page.details["parameters-details"]
    assert not closed and "parameters" in inside
    assert any(row[0] in " ".join(shown) for row in report_parameter_rows(report["parameters"]))
    assert text.index("Papers cited") < text.index("Mechanism parameters")
    # panels: horizontal bars with whole labels; no label cut short anywhere on the page
    assert any("one panel of horizontal bars per column" in alt for alt in page.alts)
    assert "…" not in text and "..." not in text
    assert not re.search(r"seed 00\d|CKS 20", text)
    return text


def report_parameter_rows(parameters: dict) -> list[tuple[str, str]]:
    from dqrelease.outputs.report.render import parameter_rows

    return parameter_rows(parameters)


@pytest.mark.parametrize("mechanism", ["dualquery", "mwem", "randomized_response"])
def test_the_rendered_page_states_the_summary_the_warnings_and_collapses_the_parameters(reports, mechanism):
    report, directory = reports[mechanism]
    _summary_checks(_render(directory / "error_report.html"), report)


def test_the_rendered_adult_report_warns_that_the_gaussian_baseline_beats_the_workload_max(tmp_path):
    """The stored Adult report (DualQuery, ε = 1): the independent Gaussian baseline's workload max error (0.00884)
    is below the published rows' (0.015), so the summary warns, with both numbers."""
    import base64
    import io

    from matplotlib.image import imread

    report = json.loads((Path(__file__).parent / "data" / "error_report_adult.json").read_text())
    write_error_report(report, tmp_path)
    page = _render(tmp_path / "error_report.html")
    text = _summary_checks(page, report)
    assert ("The independent Gaussian (rho=0.0149, zCDP) baseline (noisy answers to the workload's marginals, not "
            "rows) beats the published rows at the same budget on: workload max error 0.00884 against 0.015.") in text
    assert "Error versus round, before the table fit" in text and "These records are not what is published" in text
    # the column panels are drawn 12 inches wide at 100 dpi: 8-point labels stay about 11 pixels high on the page
    columns = next(src for src, alt in zip(page.images, page.alts, strict=True) if "horizontal bars" in alt)
    image = imread(io.BytesIO(base64.b64decode(columns.split(",", 1)[1])), format="png")
    assert image.shape[1] >= 1200
