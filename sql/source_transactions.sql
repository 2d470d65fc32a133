-- source_transactions: the configured basket files, one row per line (the whole line as text).
-- Session variables: source_paths, source_comment ('' = none), source_compression ('auto' or 'gzip').
-- Unit separator (0x1f) as the delimiter: a line is never split into fields.
create or replace temp view source_rows as
select line
from read_csv(
    getvariable('source_paths'),
    columns = {'line': 'VARCHAR'},
    header = false,
    delim = chr(31),
    quote = '',
    escape = '',
    comment = getvariable('source_comment'),
    compression = getvariable('source_compression'),
    auto_detect = false
);
