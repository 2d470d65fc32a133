"""Fixtures of the abuse corpus: a fresh standard workspace per case (see ``abuse_harness``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.abuse_harness import Workspace, make_workspace


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    """The standard workspace (schema, 1,000-row table with canaries, seeded MWEM config) in a temporary folder."""
    return make_workspace(tmp_path / "ws")
