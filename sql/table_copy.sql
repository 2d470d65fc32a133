-- table_copy: every row of the table {{ table }} as it is (to hold a registered Arrow table in DuckDB's own storage:
-- statements on it then bind only the columns they name; expectations/validate.py, COPY_ABOVE_COLUMNS).
select *
from {{ table }}
