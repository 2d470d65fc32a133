"""The small public schema the discretize, expectations and decode tests share (one column of each kind)."""

from __future__ import annotations

from dqrelease.inputs.schema import Schema

_TOY_COLUMNS = [
    {"name": "colour", "type": "categorical", "values": ["red", "blue", "?"], "aliases": {"RED": "red"}},
    {"name": "size", "type": "integer", "edges": [0, 10, 100]},
    {"name": "weight", "type": "float", "edges": [0.0, 0.5, 2.5], "out_of_range": "clip"},
    {"name": "flag", "type": "binary"},
    {"name": "note", "type": "categorical", "values": ["a", "none"], "missing": "none", "nullable": True},
    {"name": "score", "type": "float", "edges": [0, 1], "nullable": True, "missing_bucket": True},
]


def toy_schema(*, drop: tuple[str, ...] = ()) -> Schema:
    """The toy schema (colour, size, weight, flag, note, score) without the columns named in ``drop``."""
    return Schema.model_validate({"columns": [column for column in _TOY_COLUMNS if column["name"] not in drop]})
