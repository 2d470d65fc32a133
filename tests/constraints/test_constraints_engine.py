"""dq_engine.data.constraints.Constraints: evaluation, structure, repair and the CP-SAT witness / infeasibility core."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dq_engine import Domain, make_rng
from dq_engine.data.constraints import Constraints
from dq_engine.errors import ConfigError, InfeasibleConstraintsError
from dq_engine.oracle.feasible import feasible_record, infeasible_rules, with_witness
from tests.constraints.conftest import all_records


def _brute_violated(constraints: Constraints, records: np.ndarray) -> np.ndarray:
    """Reference: record i violates combination k when each literal's attribute takes a listed code."""
    out = np.zeros((len(records), len(constraints)), dtype=bool)
    for i, record in enumerate(records):
        for k, (_, literals) in enumerate(constraints.combinations):
            out[i, k] = all(int(record[a]) in codes for a, codes in literals)
    return out


def test_violated_and_feasible_match_the_definition_on_every_record(census_domain, census_rules):
    records = all_records(census_domain)
    expected = _brute_violated(census_rules, records)
    assert np.array_equal(census_rules.violated(records), expected)
    assert np.array_equal(census_rules.feasible(records), ~expected.any(axis=1))
    assert np.array_equal(census_rules.forbidden_mask().ravel(), expected.any(axis=1))
    # the feasible set is neither empty nor everything, so the check above can fail
    assert 0 < census_rules.feasible(records).sum() < len(records)


def test_feasible_restricted_to_attributes_checks_only_their_combinations(census_domain, census_rules):
    records = all_records(census_domain)
    only_flag = census_rules.feasible(records, attributes=np.array([3]))
    assert np.array_equal(only_flag, ~_brute_violated(census_rules, records)[:, 2])
    assert census_rules.feasible(records, attributes=np.array([4])).all()  # region is in no rule


def test_violations_by_rule_counts_records_per_rule(census_rules):
    records = np.array([[0, 1, 1, 1, 0], [0, 2, 0, 0, 0], [1, 2, 2, 1, 2], [0, 0, 0, 0, 0]])
    assert census_rules.violations_by_rule(records) == {
        "children are never married": 2, "children do not work": 1, "children have no flag": 1,
    }


def test_combinations_of_one_rule_count_a_record_once(census_domain):
    rules = Constraints(domain=census_domain, combinations=(
        ("recode", ((1, (0,)), (2, (1, 2)))), ("recode", ((1, (1,)), (2, (0,)))),
    ))
    records = np.array([[0, 0, 1, 0, 0], [0, 1, 0, 0, 0], [0, 1, 1, 0, 0]])
    assert rules.violations_by_rule(records) == {"recode": 2}


def test_structure_attributes_closure_and_components(census_domain):
    rules = Constraints(domain=census_domain, combinations=(
        ("a", ((0, (0,)), (1, (1,)))), ("b", ((1, (2,)), (2, (0,)))), ("c", ((3, (1,)),)),
    ))
    assert rules.attributes.tolist() == [0, 1, 2, 3]
    assert rules.closure(np.array([0])).tolist() == [0, 1, 2]
    assert rules.closure(np.array([4])).tolist() == [4]
    assert [c.tolist() for c in rules.components] == [[0, 1, 2], [3]]
    assert rules.involving(np.array([2])).tolist() == [1]
    restricted = rules.restrict(rules.involving(np.array([0, 3])))
    assert restricted.rule_names == ("a", "c") and restricted.domain == census_domain
    broken = rules.broken_components(np.array([[0, 1, 1, 0, 0], [1, 2, 0, 1, 0], [1, 1, 1, 0, 2]]))
    assert broken.tolist() == [[True, False], [True, True], [False, False]]


@pytest.mark.parametrize(
    ("combinations", "message"),
    [
        ((("", ((0, (0,)),)),), "non-empty rule name"),
        ((("r", ()),), "rule 'r': a combination without literals would forbid every record"),
        ((("r", ((9, (0,)),)),), "rule 'r': attribute index 9 is outside 0..4"),
        ((("r", ((0, ()),)),), "rule 'r': the literal on 'age' lists no value, so it never holds"),
        ((("r", ((0, (4,)),)),), "rule 'r': a code of 'age' is outside 0..3"),
        ((("r", ((0, (0,)), (0, (1,)))),), "rule 'r': a combination names an attribute twice; merge its values"),
    ],
)
def test_invalid_combinations_are_refused(census_domain, combinations, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Constraints(domain=census_domain, combinations=combinations)


def test_repair_ends_feasible_and_changes_only_free_attributes(census_domain, census_rules):
    rng = make_rng(8)
    reference = np.array([0, 0, 0, 0, 1])
    free = np.array([1, 2, 3])  # age and region keep their values
    records = np.stack([rng.integers(0, s, 300) for s in census_domain.sizes], axis=1)
    records[:, [0, 4]] = reference[[0, 4]]  # the precondition: agree with the reference off the free attributes
    assert not census_rules.feasible(records).all()
    repaired = census_rules.repair(records, reference, free)
    assert census_rules.feasible(repaired).all()
    assert np.array_equal(repaired[:, [0, 4]], records[:, [0, 4]])
    kept = census_rules.feasible(records)
    assert np.array_equal(repaired[kept], records[kept])  # feasible records are left alone
    changed = repaired != records
    assert np.all(repaired[changed] == np.broadcast_to(reference, records.shape)[changed])  # moved to the reference


def test_repair_refuses_when_the_precondition_fails(census_rules):
    infeasible_reference = np.array([0, 1, 0, 0, 0])
    with pytest.raises(InfeasibleConstraintsError, match="cannot repair"):
        census_rules.repair(np.array([0, 2, 0, 0, 0]), infeasible_reference, np.array([1]))


def test_witness_is_feasible_and_close_to_the_preferred_record(census_rules):
    assert census_rules.feasible(feasible_record(census_rules))
    preferred = np.array([0, 2, 2, 1, 2])  # a child married and working: three literals to change
    found = feasible_record(census_rules, prefer=preferred)
    assert census_rules.feasible(found)
    assert (found != preferred).sum() == 1  # changing the age alone is the closest feasible record
    assert with_witness(census_rules).witness == tuple(feasible_record(census_rules).tolist())


def test_a_witness_must_be_feasible(census_rules):
    with pytest.raises(InfeasibleConstraintsError, match="not a feasible record"):
        census_rules.with_witness(np.array([0, 1, 0, 0, 0]))


def test_infeasible_rules_name_a_core_and_spare_the_others(census_domain):
    rules = Constraints(domain=census_domain, combinations=(
        ("children are never married", ((0, (0,)), (1, (1, 2)))),
        ("nobody is unmarried", ((1, (0,)),)),
        ("nobody is married", ((1, (1, 2)),)),
    ))
    assert set(infeasible_rules(rules)) == {"nobody is unmarried", "nobody is married"}
    with pytest.raises(InfeasibleConstraintsError, match="'nobody is unmarried', 'nobody is married'"):
        with_witness(rules)


def test_rules_on_binary_attributes_allow_both_codes(census_domain):
    domain = Domain.binary(3)
    rules = Constraints(domain=domain, combinations=(("either", ((0, (0, 1)), (1, (1,)))), ("zero", ((2, (0,)),))))
    records = all_records(domain)
    assert np.array_equal(rules.feasible(records), (records[:, 1] == 0) & (records[:, 2] == 1))
    witness = feasible_record(rules)
    assert rules.feasible(witness)
    # a combination whose only literal lists both codes of a binary attribute forbids everything
    everything = Constraints(domain=domain, combinations=(("all", ((0, (0, 1)),)),))
    assert infeasible_rules(everything) == ("all",)
