-- source_csv: the configured CSV files as one relation, every column read as untrimmed text.
-- Session variables: source_paths, source_header, source_names ([] = from the header or generated),
-- source_delimiter, source_comment ('' = none), source_compression ('auto' or 'gzip').
-- Files are matched by column name (union_by_name), so their column order may differ. skip = 0 and an
-- explicit comment stop the dialect sniffer from dropping leading lines or '#' lines on its own.
create or replace temp view source_rows as
select *
from read_csv(
    getvariable('source_paths'),
    header = getvariable('source_header'),
    names = getvariable('source_names'),
    delim = getvariable('source_delimiter'),
    comment = getvariable('source_comment'),
    compression = getvariable('source_compression'),
    skip = 0,
    union_by_name = true,
    all_varchar = true
);
