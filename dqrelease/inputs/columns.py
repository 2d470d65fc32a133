"""The columns of a public schema: categorical value sets, numeric bucket edges, binary flags (``docs/schema.md``).

Each model checks its own declaration (distinct values, aliases that name declared values, increasing whole-number
edges, ...) and knows its width in the discretized domain (``size``) and its codes' public labels (``labels``).
Nothing here reads data: value sets and edges come from the schema file, never from the private table.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from dqrelease.inputs.toml_input import StrictModel

__all__ = ["BinaryColumn", "CategoricalColumn", "ColumnSchema", "NumericColumn"]


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

    def single_values(self) -> list[int | None]:
        """Per bucket (the missing bucket excluded), the one integer it holds, or None.

        None for a float column's buckets and for integer buckets wider than one; ``[16, 17)`` holds 16 only.
        """
        if self.type != "integer":
            return [None] * (len(self.edges) - 1)
        return [int(a) if b - a == 1 else None for a, b in zip(self.edges, self.edges[1:], strict=False)]

    def published_labels(self, *, single_value_numbers: bool) -> list[str]:
        """How a published table with bucket labels writes each bucket (the missing bucket excluded, it is NULL).

        Its label ``[lo, hi)``; with ``single_value_numbers`` (``output.single_value_numbers``), a bucket that holds
        one integer is written as that number (``16``, not ``[16, 17)``).
        """
        labels = self.labels[: len(self.edges) - 1]
        if not single_value_numbers:
            return labels
        values = self.single_values()
        return [label if value is None else str(value) for label, value in zip(labels, values, strict=True)]


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
