-- published_csv: the rows of the table $table as the published CSV text (dqrelease/outputs/csv_text.py), written
-- to the file $path, with the header line when $header. Every field is cast to text, so that the empty text can be
-- told from NULL: both are an empty field, except in a table of one column ($one_column), where an empty field
-- would make a blank line and is written "" instead. No comment character: DuckDB would otherwise quote a text that
-- starts with '#'. A field is quoted only when it holds the delimiter, the quote, a line feed or a carriage return.
copy (
    select
        case
            when $one_column then coalesce(columns(*)::varchar, '')
            else nullif(columns(*)::varchar, '')
        end
    from query_table($table)
) to $path (
    format csv,
    header $header,
    delimiter ',',
    quote '"',
    escape '"',
    nullstr '',
    comment '',
    new_line '\n'
);
