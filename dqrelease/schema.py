"""The public schema file: columns with public value sets or bucket edges, and public rules (``docs/schema.md``).

Bins and value sets come from here, never from the data. Loading a schema never reads the private data.

``[[rules]]`` declare edit rules and structural zeros (:class:`RuleSchema`): an implication (``if`` / ``then``),
a forbidden combination (``forbid``) or a recode (``recode``). The models here check the rules' shape; what their
values mean over the discretized domain (and whether they name known columns and values, align with bucket edges,
forbid anything, and leave a feasible record) is checked by :func:`dqrelease.rules.constraints_from_rules` when the
schema is validated, so a schema with a broken rule never loads.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from dqrelease.errors import ConfigInvalidError
from dqrelease.toml_input import StrictModel, format_validation_error, read_toml

__all__ = [
    "BinaryColumn",
    "CategoricalColumn",
    "ColumnSchema",
    "NumericColumn",
    "RecodeSchema",
    "RuleSchema",
    "RuleValue",
    "Schema",
    "load_schema",
]


class CategoricalColumn(StrictModel):
    """A categorical column: a public, finite value set (one-hot block after discretization)."""

    name: str = Field(min_length=1, description="Column name in the source table.")
    type: Literal["categorical"] = "categorical"
    values: list[str] = Field(min_length=1, description="Declared values, including the missing-value code.")
    aliases: dict[str, str] = Field(
        default_factory=dict, description="Raw spellings mapped to a declared value (e.g. '>50K.' -> '>50K')."
    )
    missing: str | None = Field(
        default=None, description="Declared value that a NULL / empty cell becomes (must be in values)."
    )
    nullable: bool = Field(default=False, description="Whether NULL is allowed in the raw table.")

    @model_validator(mode="after")
    def _check(self) -> CategoricalColumn:
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"column {self.name!r}: values must be distinct")
        unknown = sorted(set(self.aliases.values()) - set(self.values))
        if unknown:
            raise ValueError(f"column {self.name!r}: aliases map to undeclared values {unknown}; add them to values")
        shadowing = sorted(set(self.aliases) & set(self.values))
        if shadowing:
            raise ValueError(
                f"column {self.name!r}: alias spellings {shadowing} are also declared values; remove them from aliases"
            )
        if self.missing is not None and self.missing not in self.values:
            raise ValueError(f"column {self.name!r}: missing code {self.missing!r} must be one of values")
        if self.nullable and self.missing is None:
            raise ValueError(f"column {self.name!r}: nullable needs a 'missing' value that NULL becomes")
        return self

    @property
    def size(self) -> int:
        """Number of values (width of the one-hot block)."""
        return len(self.values)

    @property
    def labels(self) -> list[str]:
        """Public labels of the codes."""
        return list(self.values)


class NumericColumn(StrictModel):
    """A numeric column bucketed with public edges: bucket ``i`` is ``[edges[i], edges[i+1])``."""

    name: str = Field(min_length=1)
    type: Literal["integer", "float"]
    edges: list[float] = Field(min_length=2, description="Strictly increasing public bucket edges.")
    out_of_range: Literal["error", "clip"] = Field(
        default="error", description="'error': values outside [first, last edge) fail validation; 'clip': clamp."
    )
    nullable: bool = False
    missing_bucket: bool = Field(
        default=False, description="Add a bucket for NULL (requires nullable = true)."
    )

    @model_validator(mode="after")
    def _check(self) -> NumericColumn:
        if any(not math.isfinite(e) for e in self.edges):
            raise ValueError(f"column {self.name!r}: edges must be finite numbers")
        if any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError(f"column {self.name!r}: edges must be strictly increasing")
        if self.type == "integer" and not all(float(e).is_integer() for e in self.edges):
            raise ValueError(f"column {self.name!r}: an integer column needs whole-number edges (e.g. 17, not 17.5)")
        if self.missing_bucket and not self.nullable:
            raise ValueError(f"column {self.name!r}: missing_bucket needs nullable = true")
        if self.nullable and not self.missing_bucket:
            raise ValueError(f"column {self.name!r}: a nullable numeric column needs missing_bucket = true")
        return self

    @property
    def size(self) -> int:
        """Number of buckets (plus the missing bucket)."""
        return len(self.edges) - 1 + int(self.missing_bucket)

    @property
    def labels(self) -> list[str]:
        """Bucket labels ``[lo, hi)``."""
        def fmt(v: float) -> str:
            return str(int(v)) if float(v).is_integer() else repr(v)

        labels = [f"[{fmt(a)}, {fmt(b)})" for a, b in zip(self.edges, self.edges[1:], strict=False)]
        return [*labels, "missing"] if self.missing_bucket else labels


class BinaryColumn(StrictModel):
    """A natively binary 0/1 column (a single bit)."""

    name: str = Field(min_length=1)
    type: Literal["binary"]
    nullable: bool = False

    @property
    def size(self) -> int:
        """Always 2."""
        return 2

    @property
    def labels(self) -> list[str]:
        """'0', '1'."""
        return ["0", "1"]


ColumnSchema = Annotated[CategoricalColumn | NumericColumn | BinaryColumn, Field(discriminator="type")]


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
    on_violation: Literal["fail", "report"] = Field(
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


class Schema(StrictModel):
    """The public schema of the raw table. Bins and value sets come from here, never from the data."""

    columns: list[ColumnSchema] = Field(min_length=1)
    rules: list[RuleSchema] = Field(
        default_factory=list, description="Public edit rules and structural zeros (docs/schema.md, 'Rules')."
    )

    @field_validator("columns")
    @classmethod
    def _unique(cls, columns: list[ColumnSchema]) -> list[ColumnSchema]:
        names = [c.name for c in columns]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"column names must be unique; repeated: {duplicates}")
        return columns

    @field_validator("rules")
    @classmethod
    def _rules_mean_something(cls, rules: list[RuleSchema], info: ValidationInfo) -> list[RuleSchema]:
        """Rule names are unique, and the rules translate into satisfiable constraints over the columns."""
        names = [rule.name for rule in rules]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"rule names must be unique; repeated: {duplicates}")
        columns = info.data.get("columns")
        if rules and columns:
            from dqrelease.rules import constraints_from_rules  # the domain translation (imports the engine)

            constraints_from_rules(columns, rules)  # raises ValueError naming the rule
        return rules

    @property
    def has_rules(self) -> bool:
        """Whether the schema declares any rule."""
        return bool(self.rules)

    @property
    def names(self) -> list[str]:
        """Column names in order."""
        return [c.name for c in self.columns]


def load_schema(path: Path) -> Schema:
    """Parse and validate a schema file.

    Raises:
        ConfigInvalidError: On a missing file, invalid TOML or an invalid schema (one line, with the key).
    """
    path = Path(path)
    raw = read_toml(path, what="schema")
    try:
        return Schema.model_validate(raw)
    except ValidationError as error:
        raise ConfigInvalidError(format_validation_error(error, path, raw, Schema)) from None
