-- validation_combinations: the distinct combinations of the columns named in the list $columns of the table
-- $table, as text (NULL is a value), each with the number of rows that have it (the last column): a column frame
-- (one column) or a rule frame (expectations.frame).
select
    columns(lambda c: list_contains($columns, c))::varchar,
    count(*) as rows
from query_table($table)
group by all
