-- discretized_numeric: the bucket code of every (record, numeric column) cell of the wide table
-- {{ raw_table }}, from bucket tables built from the public schema only (bound parameters):
--   $column_names    the numeric column names
--   $columns         {column_name, column_index, missing_code}  (missing_code: the missing bucket or NULL)
--   $numeric_buckets {column_name, lo, hi, code}                bucket `code` is [lo, hi); a clipped
--                                                              column's first lo is -inf, last hi +inf
-- Text that is not a number parses to NaN and falls in no bucket (NULL code). Every cell gives at least one
-- row (unpivot keeps NULLs, the join is a left join), so discretize() can count codes per column.
with

raw_cells as (
    select
        rowid as row_id,
        parse_number(columns(lambda c: list_contains($column_names, c)))
    from {{ raw_table }}
),

schema_columns as (
    select unnest($columns, recursive := true)
),

numeric_buckets as (
    select unnest($numeric_buckets, recursive := true)
),

long_values as (
    from raw_cells
    unpivot include nulls (number for column_name in (columns(* exclude (row_id))))
),

coded_values as (
    select
        long_values.row_id,
        schema_columns.column_index,
        case
            when long_values.number is null then schema_columns.missing_code
            else numeric_buckets.code
        end as code
    from long_values
    inner join schema_columns
        on schema_columns.column_name = long_values.column_name
    left join numeric_buckets
        on numeric_buckets.column_name = long_values.column_name
        and long_values.number >= numeric_buckets.lo
        and long_values.number < numeric_buckets.hi
)

select
    row_id,
    column_index,
    code
from coded_values
