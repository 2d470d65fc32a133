-- source_parquet: the configured Parquet files as one relation (typed; cast to text by raw_table).
-- Session variables: source_paths. Files are matched by column name (union_by_name).
create or replace temp view source_rows as
select *
from read_parquet(
    getvariable('source_paths'),
    union_by_name = true
);
