-- discretized_categorical: the code of every (record, categorical or binary column) cell of the wide
-- table {{ raw_table }}, from mapping tables built from the public schema only (bound parameters):
--   $column_names      the categorical and binary column names
--   $columns           {column_name, column_index, missing_code}  (missing_code: the code NULL becomes)
--   $categorical_codes {column_name, raw_value, code}            declared values and alias spellings
-- Every cell gives at least one row (unpivot keeps NULLs, the join is a left join): a value without a
-- mapping gets a NULL code and a value with two mappings two rows, which discretize() counts per column.
with

raw_cells as (
    select
        rowid as row_id,
        columns(lambda c: list_contains($column_names, c))::varchar
    from {{ raw_table }}
),

schema_columns as (
    select unnest($columns, recursive := true)
),

categorical_codes as (
    select unnest($categorical_codes, recursive := true)
),

long_values as (
    from raw_cells
    unpivot include nulls (raw_value for column_name in (columns(* exclude (row_id))))
),

coded_values as (
    select
        long_values.row_id,
        schema_columns.column_index,
        case
            when long_values.raw_value is null then schema_columns.missing_code
            else categorical_codes.code
        end as code
    from long_values
    inner join schema_columns
        on schema_columns.column_name = long_values.column_name
    left join categorical_codes
        on categorical_codes.column_name = long_values.column_name
        and categorical_codes.raw_value = long_values.raw_value
)

select
    row_id,
    column_index,
    code
from coded_values
