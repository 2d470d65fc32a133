-- validation_combinations: the distinct combinations of the columns named in the list $columns of the table
-- {{ table }}, as text (NULL is a value), each with the number of rows that have it (the last column): a column
-- frame (one column) or a rule frame (expectations.frame). The table is named in the text and the columns by the
-- list: a lambda over the columns, or query_table($table), made binding each of a wide table's thousands of such
-- statements cost time in proportion to the width (0.34 s a statement at 10,000 columns, against 0.01 s).
-- A table of distinct rows with their copies (expectations.validate.SyntheticValidation.send_copies) has the number of
-- copies of each row in a column of its own: the caller then puts that column's sum in place of the marked count,
-- so the rows are those of the copies.
select
    columns($columns)::varchar,
    count(*) /* rows */ as rows
from {{ table }}
group by all
