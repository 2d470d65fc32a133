"""The public schema file: its columns and its rules, loaded and checked together (``docs/schema.md``).

Bins and value sets come from here, never from the data. Loading a schema never reads the private data.

A schema is a list of columns (:mod:`dqrelease.inputs.columns`: public value sets, bucket edges, binary flags) and
``[[rules]]`` (:mod:`dqrelease.inputs.rules`: edit rules and structural zeros). Each model checks its own shape;
the schema checks what the rules mean over its columns' domain (whether they name known columns and values, align
with bucket edges, forbid anything, and leave a feasible record) with
:func:`dqrelease.inputs.rules.constraints_from_rules` when it is validated, so a schema with a broken rule never
loads.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from dqrelease.errors import ConfigInvalidError
from dqrelease.inputs.columns import ColumnSchema
from dqrelease.inputs.rules import RuleSchema, constraints_from_rules
from dqrelease.inputs.schema_scaffold import FILL_DOCS, unfilled_columns
from dqrelease.inputs.toml_input import STRICT, StrictModel, format_validation_error, read_toml

if TYPE_CHECKING:
    from dq_engine.data.constraints import Constraints
    from dqrelease.inputs.config import ReleaseConfig

__all__ = ["Schema", "config_constraints", "load_schema", "rule_actions", "schema_constraints"]


def _refuse_repeated(what: str, names: list[str]) -> None:
    """Raise a ValueError naming every name given more than once (``what``: ``"column"`` or ``"rule"``)."""
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise ValueError(f"{what} names must be unique; repeated: {repeated}")


class Schema(StrictModel):
    """The public schema of the raw table. Bins and value sets come from here, never from the data."""

    columns: list[ColumnSchema] = Field(min_length=1)
    rules: list[RuleSchema] = Field(
        default_factory=list, description="Public edit rules and structural zeros (docs/schema.md, 'Rules')."
    )

    @field_validator("columns")
    @classmethod
    def _unique(cls, columns: list[ColumnSchema]) -> list[ColumnSchema]:
        _refuse_repeated("column", [c.name for c in columns])
        return columns

    @field_validator("rules")
    @classmethod
    def _rules_mean_something(cls, rules: list[RuleSchema], info: ValidationInfo) -> list[RuleSchema]:
        """Rule names are unique, and the rules translate into satisfiable constraints over the columns."""
        _refuse_repeated("rule", [rule.name for rule in rules])
        columns = info.data.get("columns")
        if rules and columns:
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


_UNFILLED_SHOWN = 10
"""Columns with an empty list named in the refusal of an unfilled schema (the rest are counted)."""


def load_schema(path: Path) -> Schema:
    """Parse and validate a schema file.

    A skeleton of ``dqrelease schema init`` is refused while a column's ``values`` or ``edges`` is empty.

    Raises:
        ConfigInvalidError: On a missing file, invalid TOML or an invalid schema (one line, with the key).
    """
    path = Path(path)
    raw = read_toml(path, what="schema")
    unfilled = unfilled_columns(raw)
    if unfilled:
        shown = ", ".join(repr(name) for name in unfilled[:_UNFILLED_SHOWN])
        more = f" and {len(unfilled) - _UNFILLED_SHOWN} more" if len(unfilled) > _UNFILLED_SHOWN else ""
        which = f"column {shown} still has an" if len(unfilled) == 1 else f"columns {shown}{more} still have an"
        raise ConfigInvalidError(
            f"{path}: {which} empty value list or edge list; fill them with the public value sets or bucket edges "
            f"of a codebook, never from the data ({FILL_DOCS})"
        )
    try:
        return Schema.model_validate(raw, strict=STRICT)
    except ValidationError as error:
        raise ConfigInvalidError(format_validation_error(error, path, raw, Schema)) from None


def schema_constraints(schema: Schema) -> Constraints | None:
    """The schema's rules as constraints over its domain, or None when it declares none."""
    if not schema.rules:
        return None
    return constraints_from_rules(schema.columns, schema.rules)


def config_constraints(config: ReleaseConfig) -> Constraints | None:
    """The rules of a release config's schema file (loaded and checked again), or None."""
    return schema_constraints(load_schema(config.schema_file))


def rule_actions(schema: Schema) -> dict[str, str]:
    """``on_violation`` of every rule, by name."""
    return {rule.name: rule.on_violation for rule in schema.rules}
