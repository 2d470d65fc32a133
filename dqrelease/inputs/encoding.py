"""The schema's public encoding: the engine domain of its columns and the code of every value and bucket.

A categorical column is a one-hot block of ``len(values)`` bits whose code ``i`` is ``values[i]``; a numeric column
is a one-hot block of its buckets ``[edges[i], edges[i+1])`` plus a last ``missing`` bucket when
``missing_bucket = true``; a binary column is one bit. This is the encoding of the DualQuery paper (Gaboardi et al.
2014, §6.4 "Data discretization"): one binary feature per value of a discrete attribute. Discretisation
(:mod:`dqrelease.inputs.discretize`), the rules (:mod:`dqrelease.inputs.rules`), the expectation suites and the
decoder all read the codes from here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dqrelease.inputs.columns import BinaryColumn, CategoricalColumn, ColumnSchema, NumericColumn

if TYPE_CHECKING:  # the engine is imported when a domain is built, not when a schema module is imported
    from dq_engine.data.domain import Domain

__all__ = ["categorical_codes", "domain_from_columns", "numeric_buckets"]


def domain_from_columns(columns: Sequence[ColumnSchema]) -> Domain:
    """The public domain of a schema's columns: one attribute per column, in order, labels from the schema."""
    from dq_engine.data.domain import Attribute, Domain

    attributes = []
    for column in columns:
        if isinstance(column, BinaryColumn):
            attributes.append(Attribute(name=column.name, size=2, binary=True, labels=tuple(column.labels)))
        else:
            attributes.append(Attribute(name=column.name, size=column.size, labels=tuple(column.labels)))
    return Domain(tuple(attributes))


def categorical_codes(columns: Sequence[ColumnSchema]) -> list[dict[str, Any]]:
    """The ``(column_name, raw_value, code)`` rows of every categorical and binary column.

    Declared values map to their position and alias spellings to their target's position. (NULL cells are
    coded by the column table: the ``missing`` value, or 0 for a nullable binary column, an absent flag.)
    """
    rows: list[dict[str, Any]] = []
    for column in columns:
        if isinstance(column, CategoricalColumn):
            position = {value: code for code, value in enumerate(column.values)}
            rows += [{"column_name": column.name, "raw_value": v, "code": c} for v, c in position.items()]
            rows += [
                {"column_name": column.name, "raw_value": alias, "code": position[target]}
                for alias, target in column.aliases.items()
            ]
        elif isinstance(column, BinaryColumn):
            rows += [{"column_name": column.name, "raw_value": v, "code": c} for c, v in enumerate(column.labels)]
    return rows


def numeric_buckets(columns: Sequence[ColumnSchema]) -> list[dict[str, Any]]:
    """The ``(column_name, lo, hi, code)`` rows of every numeric column: bucket ``code`` is ``[lo, hi)``.

    With ``out_of_range = "clip"`` the first bucket starts at -inf and the last ends at +inf (clamping).
    """
    rows: list[dict[str, Any]] = []
    for column in columns:
        if not isinstance(column, NumericColumn):
            continue
        edges = [float(e) for e in column.edges]
        if column.out_of_range == "clip":
            edges[0], edges[-1] = -math.inf, math.inf
        rows += [
            {"column_name": column.name, "lo": lo, "hi": hi, "code": code}
            for code, (lo, hi) in enumerate(itertools.pairwise(edges))
        ]
    return rows
