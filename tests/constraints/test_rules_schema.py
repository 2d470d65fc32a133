"""Schema rules: parsing into forbidden combinations, and every error (one line naming the rule, exit code 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dqrelease.errors import ConfigInvalidError, ExitCode
from dqrelease.inputs.schema import load_schema, schema_constraints

COLUMNS = '''
[[columns]]
name = "age"
type = "integer"
edges = [0, 15, 20, 65, 100]

[[columns]]
name = "marital-status"
type = "categorical"
values = ["Never-married", "Married", "Divorced"]
aliases = { "M" = "Married" }

[[columns]]
name = "weeks"
type = "integer"
edges = [0, 1, 27, 53]
out_of_range = "clip"

[[columns]]
name = "income"
type = "float"
edges = [0, 1000.5, 50000]
nullable = true
missing_bucket = true

[[columns]]
name = "flag"
type = "binary"

[[columns]]
name = "education"
type = "categorical"
values = ["HS", "BA", "MA"]

[[columns]]
name = "education-num"
type = "integer"
edges = [1, 9, 13, 14, 17]
'''


def _load(tmp_path: Path, rules: str):
    path = tmp_path / "schema.toml"
    path.write_text(COLUMNS + rules)
    return load_schema(path)


def test_schema_without_rules_has_no_constraints(tmp_path):
    schema = _load(tmp_path, "")
    assert not schema.has_rules and schema_constraints(schema) is None


def test_implication_forbid_and_recode_become_forbidden_combinations(tmp_path):
    schema = _load(tmp_path, '''
[[rules]]
name = "children are never married"
if = { age = "< 15" }
then = { "marital-status" = "Never-married" }

[[rules]]
name = "children do not work"
if = { age = "<= 14" }
then = { weeks = "< 1", flag = "0" }
on_violation = "report"

[[rules]]
name = "no high income with missing weeks"
forbid = { income = [">= 1000.5", "missing"], weeks = ">= 27" }

[[rules]]
name = "education-num recodes education"
recode = { from = "education", to = "education-num", map = { HS = "[1, 9)", BA = "= 13", MA = "[14, 17)" } }
''')
    assert [r.on_violation for r in schema.rules] == ["fail", "report", "fail", "fail"]
    assert schema_constraints(schema).combinations == (
        ("children are never married", ((0, (0,)), (1, (1, 2)))),
        ("children do not work", ((0, (0,)), (2, (1, 2)))),  # weeks bucket 0 is [-inf, 1) with clip
        ("children do not work", ((0, (0,)), (4, (1,)))),
        ("no high income with missing weeks", ((2, (2,)), (3, (1, 2)))),
        ("education-num recodes education", ((5, (0,)), (6, (1, 2, 3)))),
        ("education-num recodes education", ((5, (1,)), (6, (0, 1, 3)))),
        ("education-num recodes education", ((5, (2,)), (6, (0, 1, 2)))),
    )


def test_intervals_lists_and_bucket_labels_name_the_same_buckets(tmp_path):
    schema = _load(tmp_path, '''
[[rules]]
name = "a"
forbid = { age = ["[15, 20)", ">= 65"] }

[[rules]]
name = "b"
forbid = { age = "(14, 64]", "marital-status" = "Divorced" }
''')
    assert schema_constraints(schema).combinations == (
        ("a", ((0, (1, 3)),)),
        ("b", ((0, (1, 2)), (1, (2,)))),  # integers: (14, 64] is [15, 65)
    )


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ('name = "r"\nforbid = { agee = "< 15" }', "rule 'r': unknown column 'agee'; use a column declared in"),
        ('name = "r"\nforbid = { "marital-status" = "Widowed" }',
         "rule 'r': unknown value 'Widowed' of column 'marital-status'; use one of its values"),
        ('name = "r"\nforbid = { "marital-status" = "M" }',
         "rule 'r': 'M' is an alias of 'Married' in column 'marital-status'; name the declared value"),
        ('name = "r"\nforbid = { flag = "2" }', "rule 'r': binary column 'flag' has values '0' and '1', not '2'"),
        ('name = "r"\nif = { age = "< 16" }\nthen = { flag = "0" }',
         "rule 'r': '< 16' cuts bucket '[15, 20)' of column 'age'; add 16 to its edges"),
        ('name = "r"\nif = { age = "> 60" }\nthen = { flag = "0" }',
         "rule 'r': '> 60' cuts bucket '[20, 65)' of column 'age'; add 61 to its edges"),
        ('name = "r"\nif = { weeks = "= 0" }\nthen = { flag = "0" }',
         "rule 'r': '= 0' cuts bucket '[0, 1)' of column 'weeks', which holds [-inf, 1) with out_of_range = 'clip'; "
         "write '< 1' for that bucket"),
        ('name = "r"\nforbid = { income = "< 1000" }',
         "rule 'r': '< 1000' cuts bucket '[0, 1000.5)' of column 'income'; add 1000 to its edges"),
        ('name = "r"\nforbid = { age = "< 0" }', "rule 'r': '< 0' matches no bucket of column 'age'"),
        ('name = "r"\nforbid = { age = "[30, 20)" }', "rule 'r': interval '[30, 20)' of column 'age' is empty"),
        ('name = "r"\nforbid = { age = "old" }', "rule 'r': 'old' is not a value of numeric column 'age'"),
        ('name = "r"\nforbid = { age = "missing" }', "rule 'r': column 'age' has no missing bucket to match"),
        ('name = "r"\nif = { age = "< 15" }\nthen = { "marital-status" = ["Never-married", "Married", "Divorced"] }',
         "rule 'r': 'then' allows every value of 'marital-status', so the rule forbids nothing"),
        ('name = "r"\nforbid = { age = ">= 0" }', "rule 'r' forbids every record; it can never be satisfied"),
        ('name = "r"\nif = { age = "< 15" }\nthen = { age = "< 20" }', "rule 'r': column 'age' is in both"),
        ('name = "r"\nif = { age = "< 15" }', "rule 'r': an implication needs both 'if' and 'then'"),
        ('name = "r"\nforbid = { age = "< 15" }\nthen = { flag = "0" }',
         "rule 'r': give exactly one of if/then, forbid or recode"),
        ('name = "r"', "rule 'r': give exactly one of if/then, forbid or recode"),
        ('name = "r"\nforbid = {}', "rule 'r': 'forbid' names no column"),
        ('name = "r"\nforbid = { age = [] }', "rule 'r': the value list of column 'age' is empty"),
        ('name = "r"\nforbid = { flag = "1" }\non_violation = "warn"', "on_violation"),
        ('name = "r"\nforbid = { flag = "1" }\nseverity = 1', "rules[1].severity is not a known key"),
        ('name = "r"\nrecode = { from = "education", to = "education-num", map = { PhD = "= 16" } }',
         "rule 'r': unknown value 'PhD' of column 'education'"),
    ],
)
def test_invalid_rule_is_a_one_line_schema_error_naming_it(tmp_path, rules, message):
    with pytest.raises(ConfigInvalidError, match=re.escape(message)) as caught:
        _load(tmp_path, "\n[[rules]]\n" + rules + "\n")
    assert caught.value.exit_code == ExitCode.INVALID_CONFIG
    assert "\n" not in str(caught.value)


def test_rules_that_together_leave_no_record_are_named(tmp_path):
    with pytest.raises(ConfigInvalidError, match=re.escape(
        "rules 'flag only for children', 'nobody is a child', 'the flag is never set' together leave no feasible record"
    )):
        _load(tmp_path, '''
[[rules]]
name = "unrelated"
forbid = { "marital-status" = "Divorced" }

[[rules]]
name = "flag only for children"
if = { age = ">= 15" }
then = { flag = "1" }

[[rules]]
name = "nobody is a child"
forbid = { age = "< 15" }

[[rules]]
name = "the flag is never set"
forbid = { flag = "1" }
''')


def test_rule_names_are_unique(tmp_path):
    with pytest.raises(ConfigInvalidError, match=re.escape("rule names must be unique; repeated: ['r']")):
        _load(tmp_path, '[[rules]]\nname = "r"\nforbid = { flag = "1" }\n'
                        '[[rules]]\nname = "r"\nforbid = { age = "< 15" }\n')


@pytest.mark.parametrize("example", ["adult", "kdd99"])
def test_example_schemas_declare_satisfiable_rules(example):
    root = Path(__file__).resolve().parents[2] / "examples" / example
    schema = load_schema(root / "schema.toml")
    constraints = schema_constraints(schema)
    assert len(schema.rules) >= 8 and constraints is not None
    from dq_engine.oracle.feasible import with_witness

    assert constraints.feasible(with_witness(constraints).witness_codes)
