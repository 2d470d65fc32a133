"""The [workload] section: one part or several [[workload.parts]], the default, round trips and plan's sizes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dq_engine import make_rng, random_marginals
from dq_engine.data.domain import Domain
from dqrelease.cli import app
from dqrelease.errors import ConfigInvalidError, ExitCode
from dqrelease.inputs.config import ReleaseConfig, WorkloadConfig, config_hash, default_workload, load_config
from dqrelease.inputs.encoding import domain_from_columns
from dqrelease.inputs.schema import Schema
from dqrelease.plan import build_workload

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"
EXAMPLES = [ADULT / "release.toml", ADULT / "release-mwem.toml", ROOT / "examples" / "kdd99" / "release.toml"]

PARTS = """
[workload]
seed = 7

[[workload.parts]]
kind = "all_kway"
k = 1

[[workload.parts]]
kind = "all_kway"
k = 2

[[workload.parts]]
kind = "random_marginals"
k = 3
count = 64
"""


@pytest.fixture(scope="module")
def adult_domain() -> Domain:
    return domain_from_columns(Schema.model_validate(tomllib.loads((ADULT / "schema.toml").read_text())).columns)


def _config(tmp_path: Path, workload: str) -> Path:
    text = (ADULT / "release.toml").read_text()
    start = text.index("[workload]")
    end = text.index("[mechanism]")
    path = tmp_path / "release.toml"
    path.write_text(text[:start] + workload.strip() + "\n\n" + text[end:])
    (tmp_path / "schema.toml").write_text((ADULT / "schema.toml").read_text())
    return path


def test_parts_load_from_toml_and_round_trip(tmp_path: Path):
    config = load_config(_config(tmp_path, PARTS))

    parts = config.workload.part_list()
    assert [(p.kind, p.k, p.count) for p in parts] == [("all_kway", 1, None), ("all_kway", 2, None),
                                                       ("random_marginals", 3, 64)]
    again = ReleaseConfig.model_validate(config.model_dump())
    assert again == config
    assert config_hash(again) == config_hash(config)
    assert WorkloadConfig.model_validate_json(config.workload.model_dump_json()) == config.workload


def test_parts_build_one_workload_with_every_parts_size_in_its_description(tmp_path: Path, adult_domain: Domain):
    config = load_config(_config(tmp_path, PARTS))

    workload = build_workload(config.workload, adult_domain)

    assert [p.n_marginals for p in workload.parts] == [15, 105, 64]
    assert [p.n_queries for p in workload.parts][:2] == [172, 13159]  # Adult: 172 bits; sum of pairwise products
    assert workload.n_marginals == 15 + 105 + 64
    assert len(workload) == sum(p.n_queries for p in workload.parts)  # no 1-, 2- and 3-way query coincide
    assert workload.description.startswith("all 1-way marginals (15 marginals, 172 queries) + all 2-way marginals")
    again = build_workload(config.workload, adult_domain)
    np.testing.assert_array_equal(again.marginals, workload.marginals)  # the public seed fixes the draw


def test_omitted_workload_is_all_one_and_two_way_plus_64_random_three_way(tmp_path: Path, adult_domain: Domain):
    config = load_config(_config(tmp_path, ""))

    assert config.workload == default_workload()
    workload = build_workload(config.workload, adult_domain)
    assert [p.description for p in workload.parts] == [
        "all 1-way marginals", "all 2-way marginals", "64 random 3-way marginals",
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_examples_use_the_default_workload(path: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DQRELEASE_DATA", str(tmp_path))  # the kdd99 example's path placeholder
    assert load_config(path).workload.part_list() == default_workload().part_list()


def test_the_one_part_form_builds_the_same_workload_as_before(tmp_path: Path, adult_domain: Domain):
    config = load_config(_config(tmp_path, '[workload]\nkind = "random_marginals"\nk = 3\ncount = 64\nseed = 0'))

    workload = build_workload(config.workload, adult_domain)

    expected = random_marginals(adult_domain, 3, 64, make_rng(0))
    np.testing.assert_array_equal(workload.marginals, expected.marginals)
    np.testing.assert_array_equal(workload.query_values, expected.query_values)
    assert workload.parts == ()


def test_more_random_marginals_than_exist_gives_all_of_them_and_says_so(adult_domain: Domain):
    settings = WorkloadConfig(parts=[{"kind": "random_marginals", "k": 2, "count": 500}])
    workload = build_workload(settings, adult_domain)
    assert workload.n_marginals == 105
    assert workload.parts[0].description == "all 105 2-way marginals (500 asked for)"


def test_all_kway_on_a_wide_schema_is_a_public_sample_of_max_marginals():
    domain = Domain.binary(120)  # 7,140 pairs
    settings = WorkloadConfig(parts=[{"kind": "all_kway", "k": 1}, {"kind": "all_kway", "k": 2, "max_marginals": 300}])
    workload = build_workload(settings, domain)
    assert [p.n_marginals for p in workload.parts] == [120, 300]
    assert workload.parts[1].description == "300 of the 7,140 2-way marginals (public sample)"


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (PARTS.replace("seed = 7", 'seed = 7\nkind = "all_kway"'), "has both [[workload.parts]] and kind"),
        ("[workload]\nparts = []", "workload.parts is empty"),
        ("[workload]\nseed = 1", "give workload.kind (one part) or a list of [[workload.parts]]"),
        ('[workload]\n[[workload.parts]]\nkind = "random_marginals"\nk = 3', "needs 'count'"),
        ('[workload]\nkind = "random_queries"\ncount = 5\nmax_marginals = 3', "max_marginals applies to 'all_kway'"),
        ('[workload]\n[[workload.parts]]\nkind = "all_kway"\nk = 2\ncolour = "blue"', "colour"),
    ],
)
def test_bad_workload_sections_are_one_line_errors_naming_the_fix(tmp_path: Path, workload: str, message: str):
    with pytest.raises(ConfigInvalidError, match=re.escape(message)) as caught:
        load_config(_config(tmp_path, workload))
    assert "\n" not in str(caught.value)


def test_a_part_wider_than_the_schema_names_the_part():
    domain = Domain.categorical({"a": 2, "b": 3})
    with pytest.raises(ConfigInvalidError, match=re.escape("workload.parts[2]: k (3) exceeds the schema's 2 columns")):
        build_workload(default_workload(), domain)


def test_plan_prints_each_parts_size(tmp_path: Path):
    result = CliRunner().invoke(app, ["plan", str(_config(tmp_path, PARTS))], catch_exceptions=False)
    assert result.exit_code == ExitCode.OK, result.output
    text = " ".join(result.output.split())
    assert "all 1-way marginals (15 marginals, 172 queries)" in text
    assert "all 2-way marginals (105 marginals, 13,159 queries)" in text
    assert "64 random 3-way marginals (64 marginals," in text
