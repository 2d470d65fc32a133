"""A schema skeleton written from the source's column names alone (``dqrelease schema init``).

Invariant: the skeleton holds column names and, for Parquet and DuckDB sources, the stored type as a comment, all
read from the header (:func:`dqrelease.inputs.ingest.source_header`); never a value of the data. Every column gets
the placeholder ``type = "categorical"`` marked ``# confirm`` and an empty ``values`` list (with ``edges``
commented out beside it) to fill from a public codebook: guessing types, value sets or bucket edges from the data
would publish facts about the private table. :func:`unfilled_columns` finds the empty lists, so ``plan`` and ``run``
refuse the skeleton (:func:`dqrelease.inputs.schema.load_schema`) until it is filled in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dqrelease.errors import ConfigInvalidError

__all__ = ["FILL_DOCS", "scaffold_schema", "unfilled_columns", "write_new_file"]

FILL_DOCS = "docs/schema.md, 'Public value sets and bucket edges'"
"""Where the docs say how public value sets and bucket edges are chosen."""

_PREAMBLE = """\
# Schema skeleton written by `dqrelease schema init`: column names only, no value of the data.
# The names were read from {what}.
# `dqrelease plan` and `dqrelease run` refuse this file while a list below is empty. For each column:
# * confirm its type: "categorical" (a value set), "integer" / "float" (numbers in buckets: replace `values` by
#   `edges`) or "binary" (0/1, remove `values`);
# * fill `values` with the public value set from the table's codebook or a published classification (plus the code
#   the data writes for unknowns, e.g. "?"), or `edges` with public bucket edges (codebook ranges, legal limits,
#   round numbers); never values or quantiles read from the data
#   ({docs});
# * delete the columns you do not release (identifiers, free text): source columns the schema does not declare are
#   not loaded.
# Reference of every key: docs/schema.md.
"""

_COLUMN = """\

[[columns]]
name = {name}{stored}
type = "categorical"  # confirm: "categorical", "integer", "float" or "binary"
values = []           # fill from the public codebook, e.g. ["A", "B", "?"]; never from the data
# edges = []          # for "integer" / "float" instead of values: public bucket edges, e.g. [0, 18, 65, 100]
"""


def scaffold_schema(columns: list[tuple[str, str | None]], *, what: str) -> str:
    """The skeleton's TOML text for ``columns`` (``(name, stored type or None)``, from the header).

    Args:
        columns: The source's column names in order, with the type the format declares (Parquet, DuckDB) or None.
        what: What the names were read from, for the file's first comment (file names, never a full path).
    """
    parts = [_PREAMBLE.format(what=what, docs=FILL_DOCS)]
    for name, stored in columns:
        note = f"  # stored as {stored} in the source" if stored else ""
        parts.append(_COLUMN.format(name=json.dumps(name, ensure_ascii=False), stored=note))
    return "".join(parts)


def unfilled_columns(raw: Any) -> list[str]:
    """Names of the columns of a parsed schema file whose ``values`` or ``edges`` is an empty list.

    An empty list is what :func:`scaffold_schema` leaves to fill; anything else is left to the schema's models.
    """
    columns = raw.get("columns") if isinstance(raw, dict) else None
    if not isinstance(columns, list):
        return []
    return [
        str(column.get("name", f"[{i}]")) for i, column in enumerate(columns, 1)
        if isinstance(column, dict) and any(column.get(key) == [] for key in ("values", "edges"))
    ]


def write_new_file(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path``; an existing file is replaced only with ``force``.

    Raises:
        ConfigInvalidError: The file exists and ``force`` is false, or its folder does not exist.
    """
    try:
        with open(path, "w" if force else "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise ConfigInvalidError(
            f"{path} already exists; give --force to overwrite it, or --output PATH to write the skeleton elsewhere"
        ) from None
    except FileNotFoundError:
        raise ConfigInvalidError(f"the folder of {path} does not exist; create it or give --output PATH") from None
    except IsADirectoryError:
        raise ConfigInvalidError(f"{path} is a directory; give --output PATH naming a file") from None
