-- raw_table: the declared columns of the source (view source_rows), every value trimmed text.
-- Parameters: $columns (declared column names), $null_strings (strings read as NULL, including '').
-- Columns of the source that the schema does not declare are not loaded.
with

source as (
    select * from source_rows
)

select
    clean_value(columns(lambda c: list_contains($columns, c)), $null_strings)
from source
