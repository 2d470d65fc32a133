"""One Great Expectations expectation per public schema rule: no row of the table breaks it.

Each rule (:mod:`dqrelease.inputs.rules`, translated into forbidden combinations of codes) becomes
``expect_column_sum_to_be_between(column = "(rows)", max_value = 0)`` restricted by a pandas ``row_condition`` that
selects the rows breaking the rule: the disjunction, over the rule's combinations, of the conjunction of their
literals. It runs on the rule's *rule frame* (:mod:`dqrelease.expectations.frame`): the distinct combinations of
the rule's columns, each with the number of the table's rows that have it in
:data:`~dqrelease.expectations.frame.ROWS_COLUMN`; its observed sum is therefore the number of breaking rows, which
the validation sums over chunks.

A literal (column, codes) becomes a condition on the table as it is represented (``representation``):

* ``raw`` -- the raw table as text: a categorical code matches its declared value and every alias spelling of it
  (and NULL when it is the ``missing`` value); a binary code its text ``0`` / ``1`` (NULL too for code 0 of a
  nullable column); numeric codes the numbers of their buckets on the derived ``"<name> (as number)"`` column, as
  discretization codes them (``out_of_range = "clip"`` opens the outer buckets), and NULL for the missing bucket;
* ``uniform`` -- the published table with numbers drawn inside buckets: declared values only, numbers as above;
* ``bucket_label`` -- the published table with bucket labels: numeric codes match their published labels
  (:meth:`~dqrelease.inputs.columns.NumericColumn.published_labels`).

The condition is built from the public schema only. The expectation's ``meta`` carries the rule's name, its
``on_violation``, the schema columns it names (``columns``: the rule frame's columns) and the numeric ones whose
derived number column the rule frame must add (``numbers_of``).
"""

from __future__ import annotations

import math
from typing import Literal as TypingLiteral

import great_expectations.expectations as gxe

from dqrelease.errors import ConfigInvalidError
from dqrelease.expectations.frame import ROWS_COLUMN, number_column
from dqrelease.inputs.columns import BinaryColumn, CategoricalColumn, NumericColumn
from dqrelease.inputs.encoding import numeric_buckets
from dqrelease.inputs.schema import Schema, schema_constraints

__all__ = ["Representation", "rule_expectations", "rule_number_columns"]

Representation = TypingLiteral["raw", "uniform", "bucket_label"]


def rule_number_columns(schema: Schema, representation: Representation) -> list[str]:
    """Numeric columns some rule names, whose derived number column the rule conditions read (schema order)."""
    constraints = schema_constraints(schema)
    if constraints is None or representation == "bucket_label":
        return []
    named = set(constraints.attributes.tolist())
    return [c.name for i, c in enumerate(schema.columns) if i in named and isinstance(c, NumericColumn)]


def rule_expectations(
    schema: Schema, representation: Representation, *, single_value_numbers: bool = True
) -> list[gxe.ExpectColumnSumToBeBetween]:
    """One expectation per rule of ``schema`` (none without rules).

    ``single_value_numbers``: with bucket labels, one-value integer buckets are written as their number.
    """
    constraints = schema_constraints(schema)
    if constraints is None:
        return []
    numbers = set(rule_number_columns(schema, representation))
    expectations = []
    for rule in schema.rules:
        combinations = [literals for name, literals in constraints.combinations if name == rule.name]
        condition = " | ".join(
            "(" + " & ".join(_literal(schema, attribute, codes, representation, single_value_numbers)
                             for attribute, codes in literals) + ")"
            for literals in combinations
        )
        named = {a for literals in combinations for a, _ in literals}
        columns = [column.name for i, column in enumerate(schema.columns) if i in named]
        expectations.append(
            gxe.ExpectColumnSumToBeBetween(
                column=ROWS_COLUMN,
                max_value=0,
                row_condition=condition,
                condition_parser="pandas",
                meta={"schema_column": "(rules)", "rule": rule.name, "on_violation": rule.on_violation,
                      "columns": columns, "numbers_of": sorted(set(columns) & numbers)},
            )
        )
    return expectations


def _quoted(name: str) -> str:
    if "`" in name:
        raise ConfigInvalidError(f"column {name!r} contains a backtick, which rule checks cannot quote; rename it")
    return f"`{name}`"


def _literal(
    schema: Schema, attribute: int, codes: tuple[int, ...], representation: Representation, single_value_numbers: bool
) -> str:
    """The pandas condition of one literal (see the module docstring)."""
    column = schema.columns[attribute]
    name = _quoted(column.name)
    parts: list[str] = []
    if isinstance(column, CategoricalColumn):
        values = [column.values[c] for c in codes]
        if representation == "raw":
            values += [alias for alias, target in column.aliases.items() if target in values]
            if column.missing is not None and column.missing in values:
                parts.append(f"{name}.isnull()")
        parts.insert(0, f"{name}.isin({values!r})")
    elif isinstance(column, BinaryColumn):
        parts.append(f"{name}.isin({[str(c) for c in codes]!r})")
        if representation == "raw" and column.nullable and 0 in codes:
            parts.append(f"{name}.isnull()")
    else:
        parts += _numeric(column, codes, representation, single_value_numbers)
    return "(" + " | ".join(parts) + ")"


def _numeric(
    column: NumericColumn, codes: tuple[int, ...], representation: Representation, single_value_numbers: bool
) -> list[str]:
    name = _quoted(column.name)
    buckets = len(column.edges) - 1
    parts = []
    if column.missing_bucket and buckets in codes:
        parts.append(f"{name}.isnull()")
    inside = [c for c in codes if c < buckets]
    if representation == "bucket_label":
        if inside:
            labels = column.published_labels(single_value_numbers=single_value_numbers)
            parts.insert(0, f"{name}.isin({[labels[c] for c in inside]!r})")
        return parts
    number = _quoted(number_column(column.name))
    # the buckets as discretization codes them (out_of_range = "clip" opens the outer ones)
    bounds_of = [(b["lo"], b["hi"]) for b in numeric_buckets([column])]
    runs: list[list[int]] = []  # consecutive codes merge into one interval
    for code in inside:
        if runs and runs[-1][-1] == code - 1:
            runs[-1].append(code)
        else:
            runs.append([code])
    for run in runs:
        low, high = bounds_of[run[0]][0], bounds_of[run[-1]][1]
        bounds = [f"({number} >= {low!r})"] if math.isfinite(low) else []
        bounds += [f"({number} < {high!r})"] if math.isfinite(high) else []
        parts.append(" & ".join(bounds) if bounds else f"({number} == {number})")
    return parts

