"""Shared fixtures of the pipeline tests: an in-memory DuckDB warehouse."""

from __future__ import annotations

import pytest

from dqrelease.warehouse import connect


@pytest.fixture()
def con():
    """A fresh in-memory warehouse connection, closed after the test."""
    with connect(None) as connection:
        yield connection
