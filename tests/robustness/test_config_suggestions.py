"""A misspelt key, section, mechanism name or choice is answered in the project's words with the closest valid name.

Each case edits the shipped Adult config or schema once (a typo, as a person makes it) and asserts the one-line
refusal names the key as the file has it, suggests the intended name, and says nothing in pydantic's words.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.config import load_config
from dqrelease.inputs.schema import load_schema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "adult"
RELEASE = (EXAMPLE / "release.toml").read_text()
SCHEMA = (EXAMPLE / "schema.toml").read_text()

PYDANTIC_WORDS = ("Input tag", "Input should be", "Extra inputs", "extra_forbidden", "does not match any")


def _replace(old: str, new: str) -> tuple[str, str]:
    return old, new


def _append(text: str) -> tuple[str, str]:
    return "", text


CONFIG_CASES = [
    # top-level sections (the ones the example has, and the optional ones it omits)
    pytest.param(_replace("[source]", "[sorce]"), "[sorce]", "did you mean [source]?", id="section-source"),
    pytest.param(_replace("[privacy]", "[privacyy]"), "[privacyy]", "did you mean [privacy]?", id="section-privacy"),
    pytest.param(_replace("[workload]", "[workoad]"), "[workoad]", "did you mean [workload]?", id="section-workload"),
    pytest.param(_replace("[mechanism]", "[mechanismm]"), "[mechanismm]", "did you mean [mechanism]?",
                 id="section-mechanism"),
    pytest.param(_replace("[ledger]", "[leger]"), "[leger]", "did you mean [ledger]?", id="section-ledger"),
    pytest.param(_replace("[output]", "[outptu]"), "[outptu]", "did you mean [output]?", id="section-output"),
    pytest.param(_append('\n[runn]\nseed_mode = "secure"\n'), "[runn]", "did you mean [run]?", id="section-run"),
    pytest.param(_append("\n[acuracy]\nworst_one_way_cell = 0.1\n"), "[acuracy]", "did you mean [accuracy]?",
                 id="section-accuracy"),
    # a key in each section
    pytest.param(_replace('name = "uci-adult"', 'nmae = "uci-adult"'), "nmae", "did you mean 'name'?",
                 id="key-top-level"),
    pytest.param(_replace("header = false", "heder = false"), "source.heder", "did you mean 'header'?",
                 id="key-source"),
    pytest.param(_replace("epsilon = 1.0", "epsilom = 1.0"), "privacy.epsilom", "did you mean 'epsilon'?",
                 id="key-privacy"),
    pytest.param(_replace("seed = 0", "sed = 0"), "workload.sed", "did you mean 'seed'?", id="key-workload"),
    pytest.param(_replace('name = "dualquery"', 'name = "dualquery"\netaa = 1.0'), "mechanism.etaa",
                 "did you mean 'eta'?", id="key-mechanism"),
    pytest.param(_replace('dataset_id = "uci-adult"', 'dataset_ud = "uci-adult"'), "ledger.dataset_ud",
                 "did you mean 'dataset_id'?", id="key-ledger"),
    pytest.param(_replace("[output]", '[output]\nformts = ["csv"]'), "output.formts", "did you mean 'formats'?",
                 id="key-output"),
    pytest.param(_append('\n[run]\nseed_mod = "secure"\n'), "run.seed_mod", "did you mean 'seed_mode'?",
                 id="key-run"),
    pytest.param(_append("\n[accuracy]\nworst_oneway_cell = 0.1\n"), "accuracy.worst_oneway_cell",
                 "did you mean 'worst_one_way_cell'?", id="key-accuracy"),
    # nested sections and their keys
    pytest.param(_replace('name = "dualquery"', 'name = "dualquery"\n[mechanism.fitt]\nenabled = false'),
                 "[mechanism.fitt]", "did you mean [mechanism.fit]?", id="section-mechanism-fit"),
    pytest.param(_replace('name = "dualquery"', 'name = "dualquery"\n[mechanism.fit]\nenabeld = false'),
                 "mechanism.fit.enabeld", "did you mean 'enabled'?", id="key-mechanism-fit"),
    pytest.param(_replace('name = "dualquery"', 'name = "dualquery"\n[mechanism.oracle]\ntim_limit = 1.0'),
                 "mechanism.oracle.tim_limit", "did you mean 'time_limit'?", id="key-mechanism-oracle"),
    pytest.param(_replace("k = 1", "kk = 1"), "workload.parts[1].kk", "did you mean 'k'?", id="key-workload-part"),
    pytest.param(_replace("[[workload.parts]]", "[[workload.prats]]"), "workload.prats", "did you mean 'parts'?",
                 id="section-workload-parts"),
    # the mechanism's name, without a name (the default mechanism), and choices of other keys
    pytest.param(_replace('name = "dualquery"', 'name = "dualqeury"'), "mechanism.name = 'dualqeury'",
                 "did you mean 'dualquery'?", id="mechanism-dualquery"),
    pytest.param(_replace('name = "dualquery"', 'name = "mwem-particle"'), "mechanism.name = 'mwem-particle'",
                 "did you mean 'mwem-particles'?", id="mechanism-mwem-particles"),
    pytest.param(_replace('name = "dualquery"', 'name = "randomised_response"'),
                 "mechanism.name = 'randomised_response'", "did you mean 'randomized_response'?",
                 id="mechanism-randomized-response"),
    pytest.param(_replace('name = "dualquery"', 'name = "indepedent"'), "mechanism.name = 'indepedent'",
                 "did you mean 'independent'?", id="mechanism-independent"),
    pytest.param(_replace('name = "dualquery"', "samples = 100\nroudns = 10"), "mechanism.roudns",
                 "did you mean 'rounds'?", id="key-default-mechanism"),
    pytest.param(_replace('accounting = "tight"', 'accounting = "tigth"'), "privacy.accounting = 'tigth'",
                 "did you mean 'tight'?", id="choice-accounting"),
    pytest.param(_replace('kind = "all_kway"', 'kind = "all_kwy"'), "workload.parts[1].kind = 'all_kwy'",
                 "did you mean 'all_kway'?", id="choice-workload-kind"),
]


def _refusal(load, path: Path, text: str) -> str:
    path.write_text(text)
    with pytest.raises(ConfigInvalidError) as refused:
        load(path)
    message = str(refused.value)
    assert "\n" not in message
    assert not any(words in message for words in PYDANTIC_WORDS), message
    return message


@pytest.mark.parametrize(("edit", "named", "suggestion"), CONFIG_CASES)
def test_a_misspelt_config_name_gets_a_suggestion(tmp_path: Path, edit: tuple[str, str], named: str,
                                                  suggestion: str):
    old, new = edit
    assert old in RELEASE
    text = RELEASE.replace(old, new, 1) if old else RELEASE + new
    message = _refusal(load_config, tmp_path / "release.toml", text)
    assert f"{named} is not" in message, message
    assert suggestion in message, message
    assert "1 problems" not in message and "problems:" not in message, message  # one problem, said once


def test_a_key_of_another_mechanism_is_named_as_such(tmp_path: Path):
    message = _refusal(load_config, tmp_path / "release.toml",
                       RELEASE.replace('name = "dualquery"', 'name = "dualquery"\ntopup_fraction = 0.5'))
    assert "mechanism.topup_fraction is not used by 'dualquery'; remove it (it is a key of 'dqrs'" in message


def test_a_short_list_of_valid_names_is_given(tmp_path: Path):
    message = _refusal(load_config, tmp_path / "release.toml", RELEASE.replace("epsilon = 1.0", "epsiloon = 1.0"))
    assert "valid keys: neighbouring, n, n_epsilon, epsilon, delta, accounting" in message
    assert re.search(r"did you mean 'epsilon'\? Fix the spelling or remove it", message)


SCHEMA_CASES = [
    pytest.param(_replace("[[columns]]", "[[colums]]"), "colums", "did you mean 'columns'?", id="schema-section"),
    pytest.param(_replace("edges = [17", "egdes = [17"), "column 'age': egdes", "did you mean 'edges'?",
                 id="schema-column-key"),
    pytest.param(_replace('type = "integer"', 'type = "integr"'), "column 'age': type = 'integr'",
                 "did you mean 'integer'?", id="schema-column-type"),
    pytest.param(_replace('type = "integer"', 'typ = "integer"'), "column 'age': type is required",
                 "'typ' is given: did you mean 'type'?", id="schema-column-type-key"),
    pytest.param(_replace('\non_violation = "report"', '\non_violaton = "report"'), "rules[2].on_violaton",
                 "did you mean 'on_violation'?", id="schema-rule-key"),
]


@pytest.mark.parametrize(("edit", "named", "suggestion"), SCHEMA_CASES)
def test_a_misspelt_schema_name_gets_a_suggestion(tmp_path: Path, edit: tuple[str, str], named: str,
                                                  suggestion: str):
    old, new = edit
    assert old in SCHEMA
    message = _refusal(load_schema, tmp_path / "schema.toml", SCHEMA.replace(old, new, 1))
    assert named in message, message
    assert suggestion in message, message
