"""The single source of random generators: OS entropy by default, seeds only for tests and audits."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dq_engine import make_rng
from dq_engine.privacy.rng import spawn


def test_make_rng_without_seed_draws_from_os_entropy():
    first, second = make_rng(None), make_rng()
    assert not np.array_equal(first.integers(0, 2**63, size=4), second.integers(0, 2**63, size=4))


def test_make_rng_with_seed_is_reproducible():
    np.testing.assert_array_equal(make_rng(5).random(8), make_rng(5).random(8))
    assert not np.array_equal(make_rng(5).random(8), make_rng(6).random(8))


def test_make_rng_rejects_a_negative_seed():
    with pytest.raises(ValueError, match=re.escape("seed (-1) must be a non-negative integer or None")):
        make_rng(-1)


def test_spawned_children_are_reproducible_and_independent_streams():
    children = spawn(make_rng(9), 3)
    again = spawn(make_rng(9), 3)
    draws = [c.random(4) for c in children]
    for child, expected in zip(again, draws, strict=True):
        np.testing.assert_array_equal(child.random(4), expected)
    assert not np.array_equal(draws[0], draws[1])
