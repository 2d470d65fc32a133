-- table_row_count: number of rows of the table $table.
select count(*) as row_count
from query_table($table)
