"""The ``schema`` commands: ``schema init`` writes a schema skeleton from the source's header.

Only the release config's ``schema_file`` and ``[source]`` are read (the other sections may still be unwritten), and
of the source only its column names (:func:`dqrelease.inputs.ingest.source_header`); the skeleton is
:func:`dqrelease.inputs.schema_scaffold.scaffold_schema`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dqrelease.cli.app import FullShortHelp, HelpConventions, _exit_codes, _stdout, app

schema_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=None, cls=FullShortHelp,
    help="Scaffold the public schema file of a new table.",
)
app.add_typer(schema_app, name="schema")


@schema_app.command("init", cls=HelpConventions)
def init(
    config: Annotated[
        Path, typer.Argument(metavar="CONFIG", help="Release config (TOML); only schema_file and [source] are read.")
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", metavar="PATH", help="Write the skeleton here instead of the config's schema_file."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the file if it exists.")] = False,
) -> None:
    """Write a schema skeleton from the source's column names (header only; no value of the data is read).

    Every column gets a type to confirm and an empty value list to fill from a public codebook; `dqrelease plan`
    and `run` refuse the file until every list is filled (docs/schema.md, 'Public value sets and bucket edges').
    """
    from dqrelease.inputs.config import load_source_section
    from dqrelease.inputs.ingest import source_header
    from dqrelease.inputs.schema_scaffold import FILL_DOCS, scaffold_schema, write_new_file

    with _exit_codes():
        section = load_source_section(config)
        columns = source_header(section.source)
        source = section.source
        if source.column_names:
            what = "source.column_names of the release config"
        elif source.format == "duckdb":
            what = f"the columns of table {source.table} in {Path(source.database).name}"
        else:
            kind = "header line" if source.format == "csv" else "Parquet schema"
            what = f"the {kind} of {', '.join(Path(p).name for p in source.paths)}"
        target = output or section.schema_file
        write_new_file(target, scaffold_schema(columns, what=what), force=force)
    _stdout().print(
        f"wrote {target}: {len(columns)} columns, each with a type to confirm and an empty value list to fill from "
        f"a public codebook ({FILL_DOCS}); `dqrelease plan` refuses the file until every list is filled",
        markup=False, highlight=False,
    )
