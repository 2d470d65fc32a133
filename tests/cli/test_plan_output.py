"""``dqrelease plan`` fits a 120-column terminal without splitting a word, and prints time and memory estimates.

The Adult example is planned once at 120 columns and once with no width limit; every word of the narrow output must be
a word of the wide one.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from dqrelease.cli import app
from dqrelease.errors import ExitCode
from dqrelease.mechanisms import ReleasePlan
from dqrelease.time_estimate import estimate_release_time

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult" / "release.toml"
BOX = re.compile(r"[\u2500-\u257f]")
"""Rich's table borders."""


def _plan(columns: int) -> str:
    result = CliRunner().invoke(app, ["plan", str(ADULT)], env={"COLUMNS": str(columns)})
    assert result.exit_code == ExitCode.OK, result.output
    return result.stdout


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    """Adult's plan at 120 columns ("narrow") and unlimited ("wide").

    The accuracy targets' search for the smallest ε (about 90% of a plan's time, tested in tests/forecast) is
    replaced by a fixed answer: its lines are printed all the same.
    """
    import dqrelease.cli.plan_view as plan_view
    import dqrelease.mechanisms.dispatch as dispatch

    def found(keys, *args, **kwargs):
        return 0.0814, SimpleNamespace(mechanism=keys.name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dispatch, "smallest_epsilon", found)
        narrow = _plan(120)
        patch.setattr(plan_view, "PLAN_WIDTH", 10_000)
        wide = _plan(10_000)
    return {"narrow": narrow, "wide": wide}


def _words(text: str) -> set[str]:
    return set(BOX.sub(" ", text).split())


def _seconds(value: str, unit: str) -> float:
    return float(value) * {"s": 1, "min": 60, "h": 3600}[unit]


def test_plan_fits_120_columns(outputs):
    lines = outputs["narrow"].splitlines()
    assert max(len(line) for line in lines) <= 120
    assert max(len(line) for line in outputs["wide"].splitlines()) > 120  # the narrow output really was wrapped


def test_plan_splits_no_word_at_120_columns(outputs):
    assert _words(outputs["narrow"]) - _words(outputs["wide"]) == set()


def test_plan_prints_a_positive_time_estimate_with_its_basis(outputs):
    text = " ".join(outputs["narrow"].split())
    found = re.search(r"time estimate about ([\d.]+) (s|min|h) to ([\d.]+) (s|min|h) for `dqrelease run`", text)
    assert found is not None, text
    low, high = _seconds(found[1], found[2]), _seconds(found[3], found[4])
    assert 0 < low <= high
    assert "41 oracle calls" in text and "a rough estimate" in text and "docs/benchmarks.md" in text


def test_plan_says_how_the_budget_is_split_between_the_mechanism_and_the_fit(outputs):
    text = " ".join(outputs["wide"].split())
    assert "T = 41 is the largest number of rounds within dualquery's own epsilon = 0.3022" in text
    assert "the table fit takes 90% of rho" in text
    assert "90% is the default because the records add little next to the fit's measurements" in text
    assert "the two cost epsilon = 0.9963 within the target epsilon = 1 (tight accounting)" in text


def test_plan_names_the_papers_of_its_analyses(outputs):
    text = " ".join(outputs["wide"].split())
    assert "zCDP as in Vietri et al. 2020, New Oracle-Efficient Algorithms for Private Synthetic Data Release" in text
    assert "Canonne, Kamath & Steinke 2020, The Discrete Gaussian for Differential Privacy" in text
    assert not re.search(r"seed 00\d|CKS", text)


def _plan_with(parameters: dict, mechanism: str = "dualquery") -> ReleasePlan:
    return ReleasePlan(mechanism=mechanism, n=1, engine_config=None, parameters=parameters, events=(), costs={},
                       mode="tight")


ORACLE = {"kind": "portfolio", "time_limit": 1.0, "local_time_limit": 0.25}


@pytest.mark.parametrize(
    ("smaller", "larger", "size"),
    [
        ({"rounds": 10, "oracle": ORACLE}, {"rounds": 100, "oracle": ORACLE}, {}),
        ({"rounds": 10, "oracle": ORACLE}, {"rounds": 10, "oracle": ORACLE}, {"n": 10_000_000}),
        ({"rounds": 10, "support_size": 200_000}, {"rounds": 10, "support_size": 2_000_000}, {}),
        ({"rounds": 10, "oracle": ORACLE},
         {"rounds": 10, "oracle": ORACLE, "fit": {"rounds": 40, "particles": 200_000}}, {}),
    ],
    ids=["rounds", "rows", "particles", "table-fit"],
)
def test_the_time_estimate_grows_with_the_work(smaller: dict, larger: dict, size: dict):
    base = {"n": 10_000, "columns": 10, "queries": 1_000}
    small = estimate_release_time(_plan_with(smaller), **base)
    large = estimate_release_time(_plan_with(larger), **{**base, **size})
    assert 0 < small.low <= small.high
    assert large.low > small.low and large.high > small.high


def test_the_time_estimate_of_an_oracle_round_is_bounded_by_the_oracle_time_limits():
    oracle_only = estimate_release_time(_plan_with({"rounds": 100, "oracle": ORACLE}), n=1, columns=1, queries=1)
    nothing = estimate_release_time(_plan_with({}, mechanism="independent"), n=1, columns=1, queries=1)
    assert oracle_only.low - nothing.low == pytest.approx(100 * 0.25, rel=1e-3)
    assert oracle_only.high - nothing.high == pytest.approx(100 * 1.25, rel=1e-3)
    assert "100 oracle calls of 0.25 to 1.25 s" in oracle_only.basis


def test_plan_prints_the_memory_forecast_by_part_and_its_limit(outputs):
    text = " ".join(outputs["narrow"].split())
    found = re.search(r"memory about ([\d.]+) MiB \(particles ([\d.]+) MiB, oracle ([\d.]+) MiB, answers ([\d.]+) MiB, "
                      r"rows ([\d.]+) MiB, data ([\d.]+) MiB; the ingest before them ([\d.]+) MiB\) at the peak; "
                      r"limit [\d.]+ GiB", text)
    assert found is not None, text
    total, *parts, ingest = (float(value) for value in found.groups())
    assert ingest < total == pytest.approx(sum(parts), abs=len(parts))  # each part is rounded to a MiB
    assert "docs/benchmarks.md, 'Memory forecast'" in text


def test_plan_prints_the_forecast_error_bars_from_the_benchmark_tables(outputs):
    from dq_engine.evaluation.forecast import FIT_FORECAST_RATIOS

    text = " ".join(outputs["wide"].split())
    found = re.search(r"error bars: on the benchmark tables such forecasts were ([\d.]+) to ([\d.]+) times the "
                      r"measured median .*? so expect worst one-way cell ([\d.]+) to ([\d.]+); workload max ([\d.]+) "
                      r"to ([\d.]+);", text)
    assert found, text
    assert (float(found[1]), float(found[2])) == FIT_FORECAST_RATIOS
    row = re.search(r"dualquery \+ table fit\s*│\s*([\d.]+)\s*│\s*([\d.]+)", outputs["wide"])
    one_way, workload = float(row[1]), float(row[2])  # the table's forecast, 3 significant digits
    low, high = FIT_FORECAST_RATIOS
    assert float(found[3]) == pytest.approx(one_way / high, rel=0.01)
    assert float(found[4]) == pytest.approx(one_way / low, rel=0.01)
    assert float(found[5]) == pytest.approx(workload / high, rel=0.01)
    assert float(found[6]) == pytest.approx(workload / low, rel=0.01)
