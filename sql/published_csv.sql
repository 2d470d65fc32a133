-- published_csv: the rows of the table $table as the published CSV text (dqrelease/outputs/csv_text.py), written
-- to the file $path, with the header line when $header. Every field is cast to text; NULL is an empty field. The
-- caller has made the empty texts NULL already (Arrow, before this model), because DuckDB writes an empty text as
-- "" to tell it from NULL, and the published text writes both as an empty field; except in a table of one column,
-- where an empty field would make a blank line: there $fill is '' and every NULL is written "" instead ($fill is
-- NULL otherwise). No comment character: DuckDB would otherwise quote a text that starts with '#'. A field is
-- quoted only when it holds the delimiter, the quote, a line feed or a carriage return. One expression per column,
-- with nothing repeated in it: DuckDB's common-subexpression pass is quadratic in the number of repeated
-- expressions (a nullif of the cast per column took 13 s for 4,000 columns x 5,000 rows, against 3 s for the cast).
copy (
    select
        coalesce(columns(*)::varchar, $fill)
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
