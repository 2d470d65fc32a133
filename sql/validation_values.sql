-- validation_values: the distinct values of every column of the table $table as text (NULL is one value), each
-- with the number of rows that have it, in long form (column_name, value, rows). The values of a column are
-- numbered from 0 (in no particular order); value number p is slot p % $rows of chunk p // $rows. Ordered by that
-- number, so that the values of one chunk of every column come together (the column frame, expectations.frame).
with

source as (
    select columns(*)::varchar from query_table($table)
),

cells as (
    from source unpivot include nulls (value for column_name in (columns(*)))
),

counted as (
    select column_name, value, count(*) as rows
    from cells
    group by column_name, value
),

numbered as (
    select *, row_number() over (partition by column_name) - 1 as position
    from counted
)

select column_name, value, rows, position // $rows as chunk, position % $rows as slot
from numbered
order by position
