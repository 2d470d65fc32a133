-- table_columns: name and type of every column of the table $table, in table order.
with

table_description as (
    describe select * from query_table($table)
)

select
    column_name,
    column_type
from table_description
