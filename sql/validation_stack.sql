-- validation_stack: the distinct values of each column of a set of columns with the same checks (a stack of
-- expectations.engine), as text (NULL is a value), each with the number of rows that have it, in one statement:
-- "column" (the column's name), "value", rows. The columns are listed twice: in $columns (the text casts) and, quoted,
-- in place of the marker below (UNPIVOT names its columns in the text). On a wide table one statement per column
-- cost about 5-15 ms each whatever the rows (binding against thousands of columns); this one costs per cell and is
-- used where that is less (expectations.validate.UNPIVOT_ROWS).
with texts as (
    select columns($columns)::varchar from {{ table }}
)
select "column", "value", count(*) as rows
from texts unpivot include nulls ("value" for "column" in (/* columns */))
group by all
