"""SQL models of the pipeline (one file per model), loaded by name.

Each ``<name>.sql`` file in this package is one model in the dbt jaffle-shop style: lower-case keywords,
import CTEs, transform CTEs, then a final ``select``. Values (paths, column names, mapping tables) are
never written into the text: single-statement models take DuckDB ``$name`` parameters, multi-statement
scripts read session variables with ``getvariable('name')`` (DuckDB binds parameters to the last statement
of a script only). Table names are the only identifiers supplied at run time, and only by
:func:`dqrelease.warehouse.materialize`, which accepts plain identifiers from code, never from data.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["load_sql"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@cache
def load_sql(name: str) -> str:
    """Return the text of the model ``sql/<name>.sql`` (read from the installed package).

    Args:
        name: Model name without the ``.sql`` suffix (lower case, digits, underscores).

    Raises:
        ValueError: If the name is not a plain model name.
        FileNotFoundError: If the package has no such model.
    """
    if not _NAME.match(name):
        raise ValueError(f"SQL model name {name!r} must be lower case letters, digits and underscores")
    resource = resources.files(__name__).joinpath(f"{name}.sql")
    if not resource.is_file():
        raise FileNotFoundError(f"no SQL model {name!r} in the sql package; expected sql/{name}.sql")
    return resource.read_text(encoding="utf-8")
