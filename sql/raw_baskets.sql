-- raw_baskets: the long basket table, one row per (basket, item) from the view source_rows.
-- A basket is a non-blank line; items are separated by whitespace; an item repeated in a basket is kept
-- once. Baskets are numbered 0 .. n-1 (row_id); blank lines are not baskets.
with

source as (
    select trim_text(line) as basket
    from source_rows
),

baskets as (
    select
        row_number() over () - 1 as row_id,
        basket
    from source
    where basket <> ''
),

basket_items as (
    select
        row_id,
        unnest(string_split_regex(basket, '\s+')) as item
    from baskets
)

select distinct
    row_id,
    item
from basket_items
