-- attach_working: the run's working database file as the connection's default database, with row groups of
-- getvariable('row_group_rows') rows for the tables it writes (a wide table's ingest: DuckDB holds the row group
-- being written in memory, one string per cell), and its spill folder where DuckDB puts it for an opened file.
-- Session variables: working_path, spill_folder, row_group_rows.
set temp_directory = getvariable('spill_folder');
attach getvariable('working_path') as working (row_group_size getvariable('row_group_rows'));
use working;
