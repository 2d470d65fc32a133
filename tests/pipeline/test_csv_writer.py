"""The published CSV text (DuckDB's COPY) is the bytes pandas' ``to_csv`` wrote, chunk by chunk, and reads back.

The reference is ``frame.to_csv(index=False, lineterminator="\\n")``, what publishing used before (issue 26), on
the published dtypes (``string``, ``int8``, ``Int64``, ``Float64``: ``dqrelease/outputs/decode.py``).
"""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dq_engine import make_rng
from dqrelease.outputs.csv_text import canonical_csv
from dqrelease.outputs.publish import write_outputs

TEXTS = ["plain", "a, b", 'say "hi"', '"', "two\nlines", "crlf\r\nend", " leading", "trailing ", " ", "", None,
         "ünïcødé €", "#hash", "semi;colon", "tab\there", "'single'", "NULL", "NA", "back\\slash", "[17, 20)"]
FLOATS = [0.1, 1e-7, 1e20, -0.0, 0.0, 17.0, -3.5, 1e16, 9999999999999998.0, 1e-4, 2.5e-05, 1 / 3, 5e-324,
          1.7976931348623157e308, -2.2250738585072014e-308, 123456789.125, None, 0.30000000000000004, 1e15, -1e-5]


def _awkward() -> pd.DataFrame:
    """Every kind of value a published column can hold, with the awkward ones."""
    n = len(TEXTS)
    return pd.DataFrame({
        "text": pd.array(TEXTS, dtype="string"),
        "binary": np.arange(n, dtype=np.int8) % 2,
        "count": pd.array([None if i % 7 == 3 else (-1) ** i * 2 ** (3 * i) for i in range(n)], dtype="Int64"),
        "number": pd.array(FLOATS[:n], dtype="Float64"),
        "label": pd.array([None if t is None else f"[{i}, {i + 1})" for i, t in enumerate(TEXTS)], dtype="string"),
    })


def _pandas_csv(frame: pd.DataFrame, *, header: bool = True) -> bytes:
    return frame.to_csv(index=False, header=header, lineterminator="\n").encode()


def test_the_published_csv_is_the_bytes_pandas_writes_for_awkward_values():
    frame = _awkward()
    assert canonical_csv(frame) == _pandas_csv(frame)
    assert canonical_csv(frame, header=False) == _pandas_csv(frame, header=False)


def test_random_texts_and_floats_are_written_as_pandas_writes_them():
    rng = make_rng(26)
    n = 5000
    alphabet = list('ab ,"\n\t#;\'\\-.0ü€')  # everything but a lone carriage return (next test)
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 6))) for _ in range(n)]
    bits = rng.integers(-(2**63), 2**63, n, dtype=np.int64, endpoint=False).view(np.float64).copy()
    bits[~np.isfinite(bits)] = 0.5  # every bit pattern: subnormal to huge, both signs; decoded floats are finite
    scaled = rng.random(n) * 10.0 ** rng.integers(-12, 22, n)
    missing = rng.random(n) < 0.05
    frame = pd.DataFrame({
        "text": pd.array([None if m else t for t, m in zip(texts, missing, strict=True)], dtype="string"),
        "bits": pd.arrays.FloatingArray(bits, missing),
        "scaled": pd.arrays.FloatingArray(scaled, np.roll(missing, 1)),
        "count": pd.arrays.IntegerArray(rng.integers(-(2**62), 2**62, n), np.roll(missing, 2)),
    })
    assert canonical_csv(frame) == _pandas_csv(frame)


def test_a_lone_carriage_return_is_quoted_and_reads_back():
    frame = pd.DataFrame({"text": pd.array(["a\rb", "c"], dtype="string"), "n": [1, 2]})
    text = canonical_csv(frame)
    assert text == b'text,n\n"a\rb",1\nc,2\n'  # pandas before Python 3.11.9 wrote a\rb unquoted: two rows on reading
    back = pd.read_csv(io.BytesIO(text), dtype={"text": "string"})
    pd.testing.assert_frame_equal(back, frame)


@pytest.mark.parametrize("values", [
    pd.array(["", None, "x", "#y"], dtype="string"),
    pd.array([1, None, -2], dtype="Int64"),
    pd.array([1.5, None, -0.0], dtype="Float64"),
])
def test_a_one_column_table_writes_an_empty_field_as_two_quotes_as_pandas_does(values):
    frame = pd.DataFrame({"only": values})
    assert canonical_csv(frame) == _pandas_csv(frame)
    assert b'\n""\n' in canonical_csv(frame)  # never a blank line, which readers skip


def test_chunks_concatenated_are_the_whole_table_in_the_file_and_the_hash(tmp_path: Path):
    frame = _awkward()
    cuts = [0, 1, 2, 9, 10, len(frame)]
    parts = [frame.iloc[start:stop].reset_index(drop=True) for start, stop in itertools.pairwise(cuts)]
    assert b"".join(canonical_csv(part, header=i == 0) for i, part in enumerate(parts)) == canonical_csv(frame)
    outputs = write_outputs([*parts, frame.iloc[:0]], tmp_path, ["csv", "duckdb"])
    assert (tmp_path / "synthetic.csv").read_bytes() == _pandas_csv(frame)
    assert outputs["duckdb"]["content_sha256"] == outputs["csv"]["sha256"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["synthetic.csv", "synthetic.duckdb"]  # no scratch


def test_pandas_and_duckdb_read_the_published_csv_back_as_the_same_table(tmp_path: Path):
    frame = _awkward()
    path = tmp_path / "synthetic.csv"
    write_outputs([frame], tmp_path, ["csv"])
    expected = frame.assign(text=frame["text"].replace("", pd.NA))  # the empty text and NULL are one empty field
    back = pd.read_csv(path, dtype=dict(expected.dtypes), keep_default_na=False, na_values=[""],
                       float_precision="round_trip")
    pd.testing.assert_frame_equal(back, expected)
    types = {"text": "varchar", "binary": "tinyint", "count": "bigint", "number": "double", "label": "varchar"}
    with duckdb.connect() as con:
        result = con.execute("select * from read_csv($path, header = true, columns = $types)",
                             {"path": str(path), "types": types})
        names, rows = [column[0] for column in result.description], result.fetchall()
    read = dict(zip(names, map(list, zip(*rows, strict=True)), strict=True))
    assert names == list(frame.columns)
    assert read["text"] == [None if t == "" else t for t in TEXTS]
    assert read["count"] == list(frame["count"].astype(object).replace(pd.NA, None))
    assert list(map(repr, read["number"])) == list(map(repr, FLOATS))  # every bit, the sign of zero too


def test_a_column_of_another_type_is_refused_with_its_name():
    frame = pd.DataFrame({"flag": [True, False], "n": [1, 2]})
    message = "column 'flag' has type bool: the published CSV takes text, integers and float64 only"
    with pytest.raises(ValueError, match=re.escape(message)):
        canonical_csv(frame)


def test_the_writer_reads_chunks_as_arrow_tables_of_one_schema(tmp_path: Path):
    """A later chunk whose column is all NULL keeps the first chunk's types (pandas gives it another dtype)."""
    first = pd.DataFrame({"text": pd.array(["a"], dtype="string"), "number": pd.array([0.5], dtype="Float64")})
    later = pd.DataFrame({"text": pd.array([None], dtype="string"), "number": [None]})
    write_outputs([first, later], tmp_path, ["csv", "parquet", "duckdb"])
    assert (tmp_path / "synthetic.csv").read_bytes() == b"text,number\na,0.5\n,\n"
    with duckdb.connect(str(tmp_path / "synthetic.duckdb"), read_only=True) as con:
        assert con.execute("select count(*), count(number) from synthetic").fetchone() == (2, 1)
    assert str(pq.read_table(tmp_path / "synthetic.parquet").schema.field("number").type) == "double"
