-- basket_count: number of baskets (records) of the long basket table $table.
select count(distinct row_id) as baskets
from query_table($table)
