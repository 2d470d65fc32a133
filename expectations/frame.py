"""The validation frame: the layout in which a table's chunks meet the expectation suites.

Every column of the table as text (``VARCHAR``, whatever its stored type), plus one ``DOUBLE`` column
``"<name> (as number)"`` for each numeric column whose range or rules are checked (parsed from the text; NULL where
the text is not a number): Great Expectations compares numbers only on numeric columns. The suites
(:mod:`dqrelease.expectations.suite`, :mod:`dqrelease.expectations.rules`) name the derived columns and the engine
(:mod:`dqrelease.expectations.engine`) adds them, both through :func:`number_column`.
"""

from __future__ import annotations

__all__ = ["NUMBER_SUFFIX", "number_column"]

NUMBER_SUFFIX = " (as number)"
"""Suffix of the derived numeric column of a range-checked numeric column."""


def number_column(name: str) -> str:
    """Name of the derived ``DOUBLE`` column that holds ``name`` parsed as a number."""
    return f"{name}{NUMBER_SUFFIX}"
