-- raw_row_ids: number of rows and the largest rowid of the table {{ raw_table }} (rowids index the codes).
select
    count(*) as row_count,
    coalesce(max(rowid), -1) as max_rowid
from {{ raw_table }}
