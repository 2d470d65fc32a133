"""Ingestion of CSV / Parquet / DuckDB / transaction sources into the raw table."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pytest

from dqrelease.errors import ConfigInvalidError, ValidationFailedError
from dqrelease.inputs.config import SourceConfig, load_config
from dqrelease.inputs.ingest import ingest_source
from dqrelease.inputs.schema import Schema, load_schema
from dqrelease.warehouse import table_columns

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "examples" / "adult"


def _schema(columns: list[dict]) -> Schema:
    return Schema.model_validate({"columns": columns})


TWO_COLUMNS = _schema([
    {"name": "colour", "type": "categorical", "values": ["red", "blue"]},
    {"name": "size", "type": "integer", "edges": [0, 10, 100]},
])


def _rows(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


# ---------------------------------------------------------------------- the Adult example
def test_adult_train_and_test_files_give_48842_trimmed_records(con):
    config = load_config(ADULT / "release.toml")
    schema = load_schema(config.schema_file)

    rows = ingest_source(con, config.source, schema)

    assert rows == 48842 == _rows(con, "select count(*) from raw")[0][0]
    assert [name for name, _ in table_columns(con, "raw")] == schema.names
    assert {kind for _, kind in table_columns(con, "raw")} == {"VARCHAR"}
    first = _rows(con, 'select age, workclass, "native-country", income from raw limit 1')[0]
    assert first == ("39", "State-gov", "United-States", "<=50K")
    untrimmed = _rows(con, "select count(*) from raw where workclass <> trim(workclass) or income <> trim(income)")
    assert untrimmed == [(0,)]
    # adult.test's first line "|1x3 Cross validator" is skipped by comment = "|", its labels keep the dot
    assert _rows(con, "select count(*) from raw where age like '|%'") == [(0,)]
    assert _rows(con, "select count(*) from raw where income in ('<=50K.', '>50K.')") == [(16281,)]


def test_missing_source_file_is_a_config_error_naming_the_path(con, tmp_path):
    source = SourceConfig(format="csv", paths=[tmp_path / "nowhere.csv"])
    with pytest.raises(ConfigInvalidError, match=r"nowhere\.csv.*fix source\.paths"):
        ingest_source(con, source, TWO_COLUMNS)


def test_missing_duckdb_file_is_a_config_error_naming_the_path(con, tmp_path):
    source = SourceConfig(format="duckdb", database=tmp_path / "absent.duckdb", table="people")
    with pytest.raises(ConfigInvalidError, match=r"absent\.duckdb.*fix source\.database"):
        ingest_source(con, source, TWO_COLUMNS)


# ---------------------------------------------------------------------- CSV details
def test_declared_column_missing_from_the_source_fails_naming_it_and_no_value(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("colour,weight\nred,Secret-Weight-917\n")
    source = SourceConfig(format="csv", paths=[path])

    with pytest.raises(ValidationFailedError) as caught:
        ingest_source(con, source, TWO_COLUMNS)

    assert "'size'" in str(caught.value)
    assert caught.value.failures == [
        {"expectation": "expect_table_columns_to_match_set", "column": "size", "unexpected_count": "1"}
    ]
    assert "Secret-Weight-917" not in str(caught.value) + repr(caught.value.failures)


@pytest.mark.parametrize(("separator", "written"), [(";", '";"'), ("\t", '"\\t"'), ("|", '"|"')])
def test_a_header_read_as_one_column_names_the_likely_delimiter(con, tmp_path, separator: str, written: str):
    path = tmp_path / "data.csv"
    path.write_text(f"colour{separator}size{separator}Private-Header\nred{separator}7{separator}Secret-917\n")
    source = SourceConfig(format="csv", paths=[path])  # delimiter "," by default

    with pytest.raises(ValidationFailedError) as caught:
        ingest_source(con, source, TWO_COLUMNS)

    message = str(caught.value)
    assert "the delimiter is likely wrong" in message and "'colour', 'size'" in message
    assert f"set source.delimiter = {written} in the config" in message
    assert "Private-Header" not in message and "Secret-917" not in message  # only schema names are quoted


def test_a_single_column_without_another_delimiter_still_names_the_missing_columns(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("colour\nred\n")
    with pytest.raises(ValidationFailedError, match="the source has no column 'size' declared in the schema"):
        ingest_source(con, SourceConfig(format="csv", paths=[path]), TWO_COLUMNS)


def test_undeclared_source_columns_are_not_loaded(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("id,colour,size\n7,red,3\n")
    ingest_source(con, SourceConfig(format="csv", paths=[path]), TWO_COLUMNS)
    assert [name for name, _ in table_columns(con, "raw")] == ["colour", "size"]


def test_blank_cells_and_null_strings_become_null_after_trimming(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("colour;size\n  red ;\t5 \n;7\n NA ;  \n")
    source = SourceConfig(format="csv", paths=[path], delimiter=";", null_strings=["NA"])

    assert ingest_source(con, source, TWO_COLUMNS) == 3
    assert _rows(con, "select colour, size from raw") == [("red", "5"), (None, "7"), (None, None)]


def test_lines_starting_with_hash_are_data_unless_comment_is_set(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("colour,size\n#red,1\nblue,2\n")
    assert ingest_source(con, SourceConfig(format="csv", paths=[path]), TWO_COLUMNS) == 2
    assert ingest_source(con, SourceConfig(format="csv", paths=[path], comment="#"), TWO_COLUMNS) == 1


def test_multiple_files_are_matched_by_header_name(con, tmp_path):
    (tmp_path / "a.csv").write_text("colour,size\nred,1\n")
    (tmp_path / "b.csv").write_text("size,colour\n2,blue\n")
    source = SourceConfig(format="csv", paths=[tmp_path / "a.csv", tmp_path / "b.csv"])
    ingest_source(con, source, TWO_COLUMNS)
    assert sorted(_rows(con, "select colour, size from raw")) == [("blue", "2"), ("red", "1")]


def test_paths_may_be_globs_and_an_empty_glob_is_a_config_error(con, tmp_path):
    (tmp_path / "part-1.csv").write_text("colour,size\nred,1\n")
    (tmp_path / "part-2.csv").write_text("colour,size\nblue,2\n")
    assert ingest_source(con, SourceConfig(format="csv", paths=[tmp_path / "part-*.csv"]), TWO_COLUMNS) == 2
    with pytest.raises(ConfigInvalidError, match=r"none-\*\.csv"):
        ingest_source(con, SourceConfig(format="csv", paths=[tmp_path / "none-*.csv"]), TWO_COLUMNS)


def test_gzip_csv_without_header_uses_column_names(con, tmp_path):
    path = tmp_path / "data.csv.gz"
    path.write_bytes(gzip.compress(b"red,1\nblue,20\n"))
    source = SourceConfig(format="csv", paths=[path], header=False, column_names=["colour", "size"], gzip=True)
    assert ingest_source(con, source, TWO_COLUMNS) == 2
    assert _rows(con, "select colour, size from raw order by size") == [("red", "1"), ("blue", "20")]


def test_unreadable_csv_fails_without_quoting_the_offending_line(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("colour,size\nred,1\nblue,2,Extra-Private-Field,9\n")
    with pytest.raises(ValidationFailedError) as caught:
        ingest_source(con, SourceConfig(format="csv", paths=[path]), TWO_COLUMNS)
    assert "Extra-Private-Field" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_ingest_replaces_an_existing_raw_table(con, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("colour,size\nred,1\nblue,2\n")
    source = SourceConfig(format="csv", paths=[path])
    ingest_source(con, source, TWO_COLUMNS)
    assert ingest_source(con, source, TWO_COLUMNS) == 2


# ---------------------------------------------------------------------- Parquet and DuckDB sources
def test_parquet_values_are_read_as_trimmed_text(con, tmp_path):
    path = tmp_path / "data.parquet"
    con.execute(f"copy (select ' red' as colour, 5 as size, 1.5 as extra) to '{path}' (format parquet)")
    ingest_source(con, SourceConfig(format="parquet", paths=[path]), TWO_COLUMNS)
    assert _rows(con, "select colour, size from raw") == [("red", "5")]
    assert {kind for _, kind in table_columns(con, "raw")} == {"VARCHAR"}


def test_duckdb_source_table_is_read_from_a_read_only_attachment(con, tmp_path):
    path = tmp_path / "source.duckdb"
    with duckdb.connect(str(path)) as source_con:
        source_con.execute("create table people as select * from (values ('red', 3), ('blue', 40)) t(colour, size)")
    source = SourceConfig(format="duckdb", database=path, table="people")

    assert ingest_source(con, source, TWO_COLUMNS) == 2
    assert sorted(_rows(con, "select colour, size from raw")) == [("blue", "40"), ("red", "3")]
    assert _rows(con, "select count(*) from duckdb_databases() where database_name = 'dqrelease_source'") == [(0,)]


def test_duckdb_source_without_the_table_is_a_config_error(con, tmp_path):
    path = tmp_path / "source.duckdb"
    with duckdb.connect(str(path)) as source_con:
        source_con.execute("create table other as select 1 as x")
    with pytest.raises(ConfigInvalidError, match="'people' was not found"):
        ingest_source(con, SourceConfig(format="duckdb", database=path, table="people"), TWO_COLUMNS)


# ---------------------------------------------------------------------- transactions
ITEMS = _schema([{"name": name, "type": "binary"} for name in ["10", "20", "30"]])


def test_transactions_become_a_long_basket_table(con, tmp_path):
    path = tmp_path / "baskets.txt"
    path.write_text("10 20\n\n30  10 10\n# not a basket\n20\n   \n")
    source = SourceConfig(format="transactions", paths=[path], comment="#")

    assert ingest_source(con, source, ITEMS) == 3
    assert [name for name, _ in table_columns(con, "raw")] == ["row_id", "item"]
    baskets = _rows(con, "select row_id, list(item order by item) from raw group by row_id order by row_id")
    assert [items for _, items in baskets] == [["10", "20"], ["10", "30"], ["20"]]
    assert [row_id for row_id, _ in baskets] == [0, 1, 2]


def test_transactions_need_a_binary_schema(con, tmp_path):
    path = tmp_path / "baskets.txt"
    path.write_text("10 20\n")
    with pytest.raises(ConfigInvalidError, match="binary"):
        ingest_source(con, SourceConfig(format="transactions", paths=[path]), TWO_COLUMNS)


# ---------------------------------------------------------------------- wide sources
def _wide_table(tmp_path: Path, *, columns: int, rows: int) -> tuple[SourceConfig, Schema]:
    names = [f"c{j}" for j in range(columns)]
    with duckdb.connect() as source_con:
        cells = ", ".join(f"((range * {j + 3}) % 7 < 3)::int as c{j}" for j in range(columns))
        target = tmp_path / "wide.parquet"
        source_con.execute(f"copy (select {cells} from range({rows})) to '{target}' (format parquet)")
    schema = _schema([{"name": name, "type": "binary"} for name in names])
    return SourceConfig(format="parquet", paths=[tmp_path / "wide.parquet"]), schema


def _row_groups(con, table: str) -> int:
    return _rows(con, f"select count(distinct row_group_id) from pragma_storage_info('{table}')")[0][0]


def test_a_wide_source_is_written_in_small_row_groups_on_one_thread_with_the_same_rows(tmp_path, monkeypatch):
    """The row groups and the thread count change how much DuckDB holds, not the raw table (constants shrunk so that
    6 columns are wide and 2,048 rows make a row group)."""
    from dqrelease.inputs import ingest

    source, schema = _wide_table(tmp_path, columns=6, rows=5_000)
    with ingest.ingest_database(tmp_path / "narrow.duckdb", source, schema) as con:
        assert ingest_source(con, source, schema) == 5_000
        narrow = _rows(con, "select * from raw")
        assert _row_groups(con, "raw") == 1

    monkeypatch.setattr(ingest, "WIDE_INGEST_COLUMNS", 5)
    monkeypatch.setattr(ingest, "WIDE_ROW_GROUP_ROWS", 2_048)
    with ingest.ingest_database(tmp_path / "wide.duckdb", source, schema) as con:
        assert _rows(con, "select current_setting('threads')") == [(1,)]
        assert ingest_source(con, source, schema) == 5_000
        assert _rows(con, "select * from raw") == narrow  # same rows, same order
        assert _row_groups(con, "raw") == 3
    with duckdb.connect(str(tmp_path / "wide.duckdb"), read_only=True) as reopened:  # the raw table is in the file
        assert reopened.execute("select count(*) from raw").fetchone() == (5_000,)
    assert (tmp_path / "wide.duckdb").stat().st_mode & 0o777 == 0o600


def test_only_tables_of_more_than_256_declared_columns_are_wide_and_baskets_never():
    from dqrelease.inputs.ingest import WIDE_INGEST_COLUMNS, is_wide_ingest

    assert WIDE_INGEST_COLUMNS == 256
    assert not is_wide_ingest("csv", 256) and is_wide_ingest("csv", 257) and is_wide_ingest("parquet", 10_000)
    assert is_wide_ingest("duckdb", 300) and not is_wide_ingest("transactions", 10_000)


def test_duckdb_running_out_of_memory_is_one_line_naming_the_fix_not_a_read_error(con, tmp_path, monkeypatch):
    from dqrelease.inputs import ingest

    source, schema = _wide_table(tmp_path, columns=3, rows=10)

    def out_of_memory(*args, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 256.0 KiB")

    monkeypatch.setattr(ingest, "materialize", out_of_memory)
    with pytest.raises(ConfigInvalidError, match=r"^the source could not be ingested: DuckDB ran out of memory .*; "
                                                 r"free memory on this machine, or release fewer columns at a time$"):
        ingest_source(con, source, schema)
