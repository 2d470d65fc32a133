"""The validation frames: the layouts in which a table, collapsed to distinct values, meets the expectation suites.

Every column of the table as text (``VARCHAR``, whatever its stored type), plus one ``DOUBLE`` column
``"<name> (as number)"`` for each numeric column whose range or rules are checked (parsed from the text; NULL where
the text is not a number): Great Expectations compares numbers only on numeric columns. The suites
(:mod:`dqrelease.expectations.suite`, :mod:`dqrelease.expectations.rules`) name the derived columns and the engine
(:mod:`dqrelease.expectations.engine`) adds them, both through :func:`number_column`.

The table reaches Great Expectations collapsed (:mod:`dqrelease.expectations.validate`): the *column frame* holds in
each column that column's distinct values (each column its own list; the number of rows of each value is kept
beside the frame), a *rule frame* the distinct combinations of one rule's columns with their number of rows in the
column :data:`ROWS_COLUMN`. Both derived names are reserved: a schema column may not carry them.
"""

from __future__ import annotations

__all__ = ["NUMBER_SUFFIX", "ROWS_COLUMN", "number_column"]

NUMBER_SUFFIX = " (as number)"
"""Suffix of the derived numeric column of a range-checked numeric column."""

ROWS_COLUMN = "(rows)"
"""Column of a rule frame: the number of the table's rows that have the row's combination of values."""


def number_column(name: str) -> str:
    """Name of the derived ``DOUBLE`` column that holds ``name`` parsed as a number."""
    return f"{name}{NUMBER_SUFFIX}"
