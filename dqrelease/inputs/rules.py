"""The schema's public rules as :class:`dq_engine.data.constraints.Constraints` over the discretized domain.

This is the one place where the rule syntax of ``docs/schema.md`` ("Rules") gets its meaning. Each value of a rule
becomes the set of codes of its column that it matches, over the domain of
:func:`dqrelease.inputs.encoding.domain_from_columns`:

* categorical: a declared value or a list of them (an alias spelling is refused: name the declared value);
* binary: ``"0"`` / ``"1"`` (or ``0`` / ``1``);
* numeric: a comparison ``"< 15"``, ``"<= 14"``, ``"> 64"``, ``">= 65"``, ``"= 0"``, an interval ``"[20, 30)"``
  (bucket labels are intervals), ``"missing"`` (the missing bucket), or a list of those. A comparison or interval
  must not cut a bucket: a threshold inside a bucket is an error naming the rule, the column and the edge to add.
  Integer columns compare integers (``"<= 14"`` is ``"< 15"``). With ``out_of_range = "clip"`` the first bucket
  holds everything below its upper edge and the last everything from its lower edge on. Comparisons never match
  the missing bucket.

Rules become forbidden combinations: ``if A then B`` forbids ``A ∧ not B`` (one combination per ``then`` column),
``forbid`` forbids its combination, and a recode is one implication per key of its map. A rule is an error (one
line naming it) when it names an unknown column or value, when a value matches nothing, when it forbids nothing
(its ``then`` allows every value), or when the rules together leave no feasible record (CP-SAT names a core:
:func:`dq_engine.oracle.feasible.infeasible_rules`).
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from dqrelease.inputs.columns import BinaryColumn, CategoricalColumn, ColumnSchema
from dqrelease.inputs.encoding import domain_from_columns, numeric_buckets
from dqrelease.inputs.toml_input import StrictModel

if TYPE_CHECKING:  # the engine is imported when rules are translated, not when a schema module is imported
    from dq_engine.data.constraints import Constraints, Literal
    from dq_engine.data.domain import Domain

__all__ = ["MISSING", "RecodeSchema", "RuleSchema", "RuleValue", "constraints_from_rules"]

MISSING = "missing"
"""The value that names a numeric column's missing bucket."""

_NUMBER = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_COMPARISON = re.compile(rf"^\s*(<=|>=|==|=|<|>)\s*({_NUMBER})\s*$")
_INTERVAL = re.compile(rf"^\s*([\[(])\s*({_NUMBER})\s*,\s*({_NUMBER})\s*([\])])\s*$")


@dataclass(frozen=True)
class _Range:
    """A set of reals ``{x : low (<|<=) x (<|<=) high}``."""

    low: float
    low_closed: bool
    high: float
    high_closed: bool


# ---------------------------------------------------------------------- the rule models
RuleValue = str | int | list[str | int]
"""A rule's value for a column: a declared value, a list of them, or for a numeric column a comparison (``"< 15"``,
``">= 65"``, ``"= 0"``), an interval (``"[20, 30)"``), ``"missing"`` (the missing bucket), or a list of those."""


class RecodeSchema(StrictModel):
    """``recode = {from = ..., to = ..., map = {...}}``: one implication per listed source value."""

    source: str = Field(alias="from", min_length=1, description="The column whose values are recoded.")
    to: str = Field(min_length=1, description="The column that holds the recoded value.")
    map: dict[str, RuleValue] = Field(
        min_length=1, description="Source value -> the target's value(s) it implies (declared values, intervals)."
    )


class RuleSchema(StrictModel):
    """One public rule: exactly one of ``if``/``then``, ``forbid`` and ``recode``.

    * ``if = {...}`` / ``then = {...}``: every record whose columns match all of ``if`` matches all of ``then``;
    * ``forbid = {...}``: no record matches all of it (a structural zero);
    * ``recode = {from, to, map}``: ``from = key`` implies ``to = map[key]``, for every key of ``map``.
    """

    name: str = Field(min_length=1, description="Names the rule in messages and reports.")
    condition: dict[str, RuleValue] | None = Field(
        default=None, alias="if", description="Columns and values a record must all match for 'then' to apply."
    )
    then: dict[str, RuleValue] | None = Field(default=None, description="What a record matching 'if' must match.")
    forbid: dict[str, RuleValue] | None = Field(default=None, description="A combination no record may match.")
    recode: RecodeSchema | None = Field(default=None, description="A recode (one implication per source value).")
    on_violation: typing.Literal["fail", "report"] = Field(
        default="fail",
        description="What raw rows breaking the rule do at validation: 'fail' stops the run (exit 3), 'report' "
        "counts them in the internal report.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> RuleSchema:
        forms = [self.condition is not None or self.then is not None, self.forbid is not None, self.recode is not None]
        if sum(forms) != 1:
            raise ValueError(f"rule {self.name!r}: give exactly one of if/then, forbid or recode")
        if forms[0] and (self.condition is None or self.then is None):
            raise ValueError(f"rule {self.name!r}: an implication needs both 'if' and 'then'")
        for part, mapping in (("if", self.condition), ("then", self.then), ("forbid", self.forbid)):
            if mapping is not None and not mapping:
                raise ValueError(f"rule {self.name!r}: '{part}' names no column")
        return self


# ---------------------------------------------------------------------- rules -> constraints
def constraints_from_rules(columns: Sequence[ColumnSchema], rules: Sequence[RuleSchema]) -> Constraints:
    """Translate rules into forbidden combinations over the columns' domain and check they leave a record.

    Raises:
        ValueError: One line naming the rule: unknown column or value, a value that matches nothing, a threshold
            inside a bucket, a rule that forbids nothing, or rules that together leave no feasible record.
    """
    from dq_engine.data.constraints import Constraints

    domain = domain_from_columns(columns)
    by_name = {column.name: (index, column) for index, column in enumerate(columns)}
    combinations = []
    for rule in rules:
        combinations += [(rule.name, literals) for literals in _rule_combinations(rule, by_name, domain)]
    constraints = Constraints(domain=domain, combinations=tuple(combinations))
    _check_satisfiable(constraints)
    return constraints


# ---------------------------------------------------------------------- rules -> combinations
def _rule_combinations(
    rule: RuleSchema, by_name: dict[str, tuple[int, ColumnSchema]], domain: Domain
) -> list[tuple[Literal, ...]]:
    def literal(column: str, value: RuleValue) -> tuple[int, tuple[int, ...]]:
        if column not in by_name:
            raise ValueError(
                f"rule {rule.name!r}: unknown column {column!r}; use a column declared in [[columns]]"
            )
        index, schema_column = by_name[column]
        return index, _codes(rule.name, schema_column, value)

    if rule.forbid is not None:
        return [tuple(literal(column, value) for column, value in rule.forbid.items())]
    if rule.recode is not None:
        recode = rule.recode
        return [
            _implication(rule.name, [literal(recode.source, key)], [literal(recode.to, value)], domain)[0]
            for key, value in recode.map.items()
        ]
    condition = [literal(column, value) for column, value in rule.condition.items()]
    both = sorted(set(rule.condition) & set(rule.then))
    if both:
        raise ValueError(f"rule {rule.name!r}: column {both[0]!r} is in both 'if' and 'then'; keep it in one")
    return _implication(rule.name, condition, [literal(column, value) for column, value in rule.then.items()], domain)


def _implication(
    name: str, condition: list[Literal], consequence: list[Literal], domain: Domain
) -> list[tuple[Literal, ...]]:
    """``condition → consequence``: one forbidden combination ``condition ∧ ¬c`` per consequence literal ``c``."""
    combinations = []
    for attribute, codes in consequence:
        others = tuple(sorted(set(range(int(domain.sizes[attribute]))) - set(codes)))
        if not others:
            label = domain.attributes[attribute].name
            raise ValueError(f"rule {name!r}: 'then' allows every value of {label!r}, so the rule forbids nothing")
        combinations.append((*condition, (attribute, others)))
    return combinations


# ---------------------------------------------------------------------- values -> codes
def _codes(rule: str, column: ColumnSchema, value: RuleValue) -> tuple[int, ...]:
    """The codes of ``column`` that ``value`` matches (see the module docstring)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError(f"rule {rule!r}: the value list of column {column.name!r} is empty")
    codes: set[int] = set()
    for item in items:
        text = str(item)
        if isinstance(column, CategoricalColumn):
            codes.add(_categorical_code(rule, column, text))
        elif isinstance(column, BinaryColumn):
            if text not in ("0", "1"):
                raise ValueError(f"rule {rule!r}: binary column {column.name!r} has values '0' and '1', not {text!r}")
            codes.add(int(text))
        else:
            codes |= _numeric_codes(rule, column, text)
    return tuple(sorted(codes))


def _categorical_code(rule: str, column: object, text: str) -> int:
    if text in column.values:
        return column.values.index(text)
    if text in column.aliases:
        raise ValueError(
            f"rule {rule!r}: {text!r} is an alias of {column.aliases[text]!r} in column {column.name!r}; "
            "name the declared value"
        )
    raise ValueError(f"rule {rule!r}: unknown value {text!r} of column {column.name!r}; use one of its values")


def _numeric_codes(rule: str, column: object, text: str) -> set[int]:
    if text.strip() == MISSING:
        if not column.missing_bucket:
            raise ValueError(f"rule {rule!r}: column {column.name!r} has no missing bucket to match {MISSING!r}")
        return {column.size - 1}
    wanted = _parse_range(rule, column, text)
    integer = column.type == "integer"
    buckets = numeric_buckets([column])  # what discretization codes
    codes = set()
    for code, (low, high) in enumerate((bucket["lo"], bucket["hi"]) for bucket in buckets):
        share = _bucket_share(wanted, low, high, integer=integer)
        if share == "partial":
            cut = _cut(wanted, low, high, integer=integer)
            if cut is not None and cut in column.edges:  # an outer edge, opened by out_of_range = "clip"
                aligned = f"'< {_fmt(high)}'" if not math.isfinite(low) else f"'>= {_fmt(low)}'"
                raise ValueError(
                    f"rule {rule!r}: {text!r} cuts bucket {column.labels[code]!r} of column {column.name!r}, which "
                    f"holds [{_fmt(low)}, {_fmt(high)}) with out_of_range = 'clip'; write {aligned} for that bucket"
                )
            clipped = f" (with out_of_range = 'clip' it holds [{_fmt(low)}, {_fmt(high)}))" if (
                column.out_of_range == "clip" and not (math.isfinite(low) and math.isfinite(high))
            ) else ""
            raise ValueError(
                f"rule {rule!r}: {text!r} cuts bucket {column.labels[code]!r} of column {column.name!r}{clipped}; "
                f"add {_fmt(cut)} to its edges"
                if cut is not None else
                f"rule {rule!r}: {text!r} cuts bucket {column.labels[code]!r} of column {column.name!r}; buckets are "
                "[lo, hi): write the interval with a closed lower and an open upper bound at edges"
            )
        if share == "full":
            codes.add(code)
    if not codes:
        raise ValueError(f"rule {rule!r}: {text!r} matches no bucket of column {column.name!r}")
    return codes


def _parse_range(rule: str, column: object, text: str) -> _Range:
    comparison = _COMPARISON.match(text)
    if comparison:
        operator, number = comparison.group(1), float(comparison.group(2))
        return {
            "<": _Range(-math.inf, False, number, False),
            "<=": _Range(-math.inf, False, number, True),
            ">": _Range(number, False, math.inf, False),
            ">=": _Range(number, True, math.inf, False),
            "=": _Range(number, True, number, True),
            "==": _Range(number, True, number, True),
        }[operator]
    interval = _INTERVAL.match(text)
    if interval:
        low, high = float(interval.group(2)), float(interval.group(3))
        if not low < high:
            raise ValueError(f"rule {rule!r}: interval {text!r} of column {column.name!r} is empty")
        return _Range(low, interval.group(1) == "[", high, interval.group(4) == "]")
    raise ValueError(
        f"rule {rule!r}: {text!r} is not a value of numeric column {column.name!r}; write a comparison like '< 15' "
        f"or '>= 65', an interval like '[20, 30)', or {MISSING!r}"
    )


def _integer_bounds(wanted: _Range) -> tuple[float, float]:
    """The integers of ``wanted`` as a half-open ``[first, last + 1)`` (infinite ends kept)."""
    low = wanted.low
    if math.isfinite(low):
        low = math.ceil(low) if wanted.low_closed else math.floor(low) + 1
    high = wanted.high
    if math.isfinite(high):
        high = math.floor(high) + 1 if wanted.high_closed else math.ceil(high)
    return low, high


def _bucket_share(wanted: _Range, low: float, high: float, *, integer: bool) -> str:
    """``"full"``, ``"none"`` or ``"partial"``: how much of bucket ``[low, high)`` the range holds."""
    if integer:
        first, stop = _integer_bounds(wanted)
        if stop <= first or high <= first or low >= stop:
            return "none"
        return "full" if first <= low and high <= stop else "partial"
    below = wanted.high < low or (wanted.high == low and not wanted.high_closed)
    if below or wanted.low >= high:
        return "none"
    lower_ok = wanted.low < low or (wanted.low == low and (wanted.low_closed or math.isinf(low)))
    return "full" if lower_ok and high <= wanted.high else "partial"


def _cut(wanted: _Range, low: float, high: float, *, integer: bool) -> float | None:
    """The edge that would make the range align with bucket ``[low, high)`` (None if an edge already is there)."""
    first, stop = _integer_bounds(wanted) if integer else (wanted.low, wanted.high)
    for point in (first, stop):
        if math.isfinite(point) and low < point < high:
            return point
    return None


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "-inf" if value < 0 else "inf"
    return str(int(value)) if float(value).is_integer() else repr(value)


# ---------------------------------------------------------------------- satisfiability
def _check_satisfiable(constraints: Constraints) -> None:
    from dq_engine.oracle.feasible import infeasible_rules

    names = infeasible_rules(constraints)
    if len(names) == 1:
        raise ValueError(f"rule {names[0]!r} forbids every record; it can never be satisfied: fix or remove it")
    if names:
        listed = ", ".join(repr(name) for name in names)
        raise ValueError(f"rules {listed} together leave no feasible record; fix or remove one of them")

