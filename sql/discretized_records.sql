-- discretized_records: the distinct coded records of the wide table {{ raw_table }}, each with its number of rows.
-- One GROUP BY: the private table leaves DuckDB as its distinct records, never row by row.
-- The two markers become one line per schema column j, in schema order, built by dqrelease.inputs.discretize from
-- the public schema only (every value a bound parameter; each column name quoted by warehouse.quote_column, as a
-- lambda over the columns per name made binding quadratic in the width):
--   cells:  "<name_j>" as cell_j
--   codes:  categorical and binary: value_code(cell_j, $keys_j, $codes_j, $missing_j)            (macros.sql)
--           numeric: case when number_j is null then $missing_j
--                         when number_j >= $lo_j_k and number_j < $hi_j_k then $code_j_k ... end
--           (number_j = parse_number(cell_j); bucket k is [lo, hi); out_of_range = "clip" opens the outer ones)
-- A cell that gets no code (a value outside the schema) is NULL; discretize() names the columns that have one.
with

cells as (
    select
        /* cells */
    from {{ raw_table }}
)

select
    /* codes */
    count(*) as record_count
from cells
group by all
