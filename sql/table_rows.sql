-- table_rows: every row of the table $table, as stored (what dqrelease.runtime.chunks hands to a cluster's workers,
-- a chunk of rows at a time).
select *
from query_table($table)
