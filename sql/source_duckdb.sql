-- source_duckdb: a table of another DuckDB file, attached read-only as dqrelease_source.
-- Session variables: source_database (file path), source_relation ('dqrelease_source.<table>').
detach database if exists dqrelease_source;

attach getvariable('source_database') as dqrelease_source (read_only);

create or replace temp view source_rows as
select *
from query_table(getvariable('source_relation'));
