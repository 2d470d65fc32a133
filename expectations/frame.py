"""The validation frames: the layouts in which a table, collapsed to distinct values, meets the expectation suites.

Every column of the table as text (``VARCHAR``, whatever its stored type), plus one ``DOUBLE`` column
``"<name> (as number)"`` for each numeric column whose range or rules are checked (parsed from the text; NULL where
the text is not a number): Great Expectations compares numbers only on numeric columns. The suites
(:mod:`dqrelease.expectations.suite`, :mod:`dqrelease.expectations.rules`) name the derived columns and the engine
(:mod:`dqrelease.expectations.engine`) adds them, both through :func:`number_column`.

The table reaches Great Expectations collapsed (:mod:`dqrelease.expectations.validate`) into three kinds of frames:
the *table frame* (every column, one row of NULLs, or none for an empty table: what the column-set and row-count
expectations look at), a *column frame* per column (its distinct values) and a *rule frame* per set of rule columns
(their distinct combinations). Column and rule frames carry, in the column :data:`ROWS_COLUMN`, the number of the
table's rows that have each value or combination. Both derived names are reserved: a schema column may not carry
them.
"""

from __future__ import annotations

__all__ = ["NUMBER_SUFFIX", "ROWS_COLUMN", "number_column"]

NUMBER_SUFFIX = " (as number)"
"""Suffix of the derived numeric column of a range-checked numeric column."""

ROWS_COLUMN = "(rows)"
"""Column of a column or rule frame: the number of the table's rows that have the frame row's values."""


def number_column(name: str) -> str:
    """Name of the derived ``DOUBLE`` column that holds ``name`` parsed as a number."""
    return f"{name}{NUMBER_SUFFIX}"
