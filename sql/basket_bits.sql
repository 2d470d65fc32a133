-- basket_bits: the (basket, attribute) pairs of the long basket table $raw_table, with the attribute
-- position of each item taken from $items {item, column_index} (the schema's binary columns).
-- Items outside the schema get a NULL column_index (validation rejects them before this runs).
with

baskets as (
    select * from query_table($raw_table)
),

items as (
    select unnest($items, recursive := true)
)

select
    baskets.row_id,
    items.column_index
from baskets
left join items on items.item = baskets.item
