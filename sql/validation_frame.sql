-- validation_frame: every column of the table $table as text, the frame the expectation suites describe
-- (derived numeric columns are added chunk by chunk in Python).
with

source as (
    select * from query_table($table)
)

select
    columns(*)::varchar
from source
