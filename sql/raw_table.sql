-- raw_table: the declared columns of the source (view source_rows), every value trimmed text.
-- Parameters: $columns (declared column names), $null_strings (strings read as NULL, including '').
-- Columns of the source that the schema does not declare are not loaded. Trimmed first, then compared with the
-- null strings (macros.sql, null_value: one trim per cell, and no expression repeated per column).
with

trimmed as (
    select trim_text(columns(lambda c: list_contains($columns, c)))
    from source_rows
)

select
    null_value(columns(*), $null_strings)
from trimmed
