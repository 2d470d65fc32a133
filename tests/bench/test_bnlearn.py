"""The bnlearn networks' reader and forward sampler (bench/bnlearn.py): tables whose dependence is known."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bench.bnlearn import BifError, forward_sample, independent_pairs, read_bif

# A -> C <- B, D alone; A and B share no ancestor (independent), C depends on both.
TINY = """network unknown {
}
variable A {
  type discrete [ 2 ] { yes, no };
}
variable B {
  type discrete [ 3 ] { low, mid, high };
}
variable C {
  type discrete [ 2 ] { on, off };
}
variable D {
  type discrete [ 2 ] { x, y };
}
probability ( C | A, B ) {
  (yes, low) 0.9, 0.1;
  (no, low) 0.2, 0.8;
  (yes, mid) 0.5, 0.5;
  (no, mid) 0.3, 0.7;
  (yes, high) 0.1, 0.9;
  (no, high) 0.6, 0.4;
}
probability ( A ) {
  table 0.3, 0.7;
}
probability ( B ) {
  table 0.2, 0.5, 0.3;
}
probability ( D ) {
  table 0.5, 0.5;
}
"""


def _write(tmp_path: Path, text: str, *, zipped: bool = True) -> Path:
    path = tmp_path / ("net.bif.gz" if zipped else "net.bif")
    path.write_bytes(gzip.compress(text.encode()) if zipped else text.encode())
    return path


def test_reader_orders_parents_first_and_indexes_tables_by_parent_codes(tmp_path):
    network = read_bif(_write(tmp_path, TINY))
    names = [v.name for v in network.variables]
    assert names == ["A", "B", "C", "D"]  # the file's variable order is the column order
    assert network.order.index(names.index("C")) > max(network.order.index(0), network.order.index(1))
    c = network.variables[2]
    assert c.parents == ("A", "B")
    # row of (A = no, B = high) is 1 * 3 + 2 = 5
    np.testing.assert_allclose(c.table[5], [0.6, 0.4])
    assert read_bif(_write(tmp_path, TINY, zipped=False)).sizes == {"A": 2, "B": 3, "C": 2, "D": 2}


def test_forward_samples_follow_the_conditional_tables(tmp_path):
    network = read_bif(_write(tmp_path, TINY))
    codes = forward_sample(network, 40_000, np.random.default_rng(7))
    # Tolerance 0.02: every checked share has standard error below 0.0065 here (n >= 6,000 records), so > 3 sd.
    np.testing.assert_allclose(np.bincount(codes[:, 1], minlength=3) / len(codes), [0.2, 0.5, 0.3], atol=0.02)
    given = (codes[:, 0] == 1) & (codes[:, 1] == 2)  # A = no, B = high: P(C = on) = 0.6
    assert given.sum() > 6_000
    assert abs((codes[given, 2] == 0).mean() - 0.6) < 0.02


def test_independent_pairs_are_those_without_a_common_ancestor(tmp_path):
    network = read_bif(_write(tmp_path, TINY))
    assert independent_pairs(network) == {(0, 1), (0, 3), (1, 3), (2, 3)}


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda text: text.replace("table 0.5, 0.5;", "table 0.5, 0.4;"), "not distributions"),
        (lambda text: text.replace("  (no, high) 0.6, 0.4;\n", ""), "misses some parent configurations"),
        (lambda text: re.sub(r"probability \( D \) \{[^}]*\}", "", text), "without a probability block: D"),
        (lambda text: text.replace("[ 3 ] { low, mid, high }", "[ 3 ] { low, mid }"), "declares 3 states"),
    ],
)
def test_reader_names_what_is_wrong_with_a_bif(tmp_path, edit: Callable[[str], str], message: str):
    with pytest.raises(BifError, match=message):
        read_bif(_write(tmp_path, edit(TINY)))


def test_hailfinder_has_its_documented_shape(require_shared_data: Callable[[str], Path]):
    network = read_bif(require_shared_data("bnlearn/hailfinder.bif.gz"))
    assert len(network.variables) == 56  # SOURCE.md's table
    assert len(independent_pairs(network)) == 908  # of 1,540 pairs: most are independent
    codes = forward_sample(network, 1_000, np.random.default_rng(0))
    assert (codes < np.array(list(network.sizes.values()))).all() and (codes >= 0).all()
