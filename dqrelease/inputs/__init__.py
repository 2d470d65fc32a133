"""What a release reads: config, schema, rules, the ingested and discretised private table.

What a release reads: the release config and schema files (TOML, validated by pydantic), the schema's public
encoding and rules, the private source's ingestion into DuckDB and its discretisation to value codes.
"""
